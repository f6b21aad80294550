"""Why a tensor is alive at the peak: one line per row of ``explain_peak``, naming the rule that
keeps it (the window's Explain dialog and the reports show the same text)."""

from __future__ import annotations


def why_alive(row: dict, node) -> str:
    """One line on the rule that keeps this tensor alive; ``node`` is the design's node or None."""
    tensor, cat = row["tensor"], row["category"]
    if cat == "gradients" and tensor.startswith("accumulated gradient"):
        return "a fan-in's gradient contributions summed by autograd into a new tensor; both summands die right after"
    if node is None:
        return shared_rule(cat)
    if cat == "gradients" and ("parameter gradients" in tensor or tensor.endswith(".grad")):
        return "p.grad: kept from this layer's backward until the next zero_grad"
    if cat == "gradients" and tensor == "low-precision grad":
        return "autocast's low-precision weight gradient: cast into the fp32 p.grad right after this backward"
    if cat == "gradients":
        return "an activation gradient: freed once the op that made the tensor has run its backward"
    if tensor == "input batch":
        return "the batch stays alive for the whole step"
    if tensor == "output":
        return ("an output: alive until its consumers ran, and in training until the ops that keep it "
                f"ran their backward (this layer keeps {node.layer.keeps_for_backward or 'nothing'})")
    if cat == "workspace":
        return "a temporary of this op or of the optimizer step"
    return f"kept for backward by this layer: {node.layer.keeps_for_backward or tensor}"


def shared_rule(category: str) -> str:
    """The rule for whole-model tensors (no single layer owns them)."""
    return {
        "weights": "parameters and buffers live for the whole step",
        "optimizer_state": "optimizer state exists from the first step on (steady state)",
        "gradients": "the loss gradient seed lives until backward returns",
        "activations": "the batch and the model's output live for the whole step",
        "workspace": "the optimizer step's temporaries",
    }.get(category, "")

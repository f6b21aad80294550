"""Why a tensor is alive at the peak: one line per row of ``explain_peak``, naming the rule that
keeps it (the window's Explain dialog and the reports show the same text)."""

from __future__ import annotations


def why_alive(row: dict, node) -> str:
    """One line on the rule that keeps this tensor alive; ``node`` is the design's node or None."""
    tensor, cat = row["tensor"], row["category"]
    # gradients are told apart by what they are, whether or not one layer owns them: a parameter
    # gradient lives until zero_grad, an activation gradient until its producer's backward ran,
    # and only ones_like(loss) is the loss's seed
    if cat == "gradients":
        if tensor == "ones_like(loss)":
            return "the loss gradient seed (ones_like(loss)): lives until backward returns"
        if tensor.startswith("accumulated gradient"):
            return ("a fan-in's gradient contributions summed by autograd into a new tensor; both summands die "
                    "right after")
        if "parameter gradients" in tensor or tensor.endswith(".grad"):
            return "p.grad: kept from this layer's backward until the next zero_grad (not freed by backward)"
        if tensor == "low-precision grad":
            return ("autocast's low-precision weight gradient: cast into the fp32 p.grad right after this "
                    "layer's backward")
        if tensor == "MeanBackward0 gradient":
            return ("the gradient of the model's output from loss = out.mean(): freed once the last layer's "
                    "backward has run")
        return "an activation gradient: freed once the op that made the tensor has run its backward"
    if node is None:
        return shared_rule(cat)
    if tensor.startswith("recomputed for backward"):
        return ("recomputed by activation checkpointing when its segment's backward began; freed once that "
                "segment's backward has run")
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
        "gradients": "a gradient autograd holds during backward",
        "activations": "the batch and the model's output live for the whole step",
        "workspace": "the optimizer step's temporaries",
    }.get(category, "")


def run_header(settings) -> str:
    """The settings an explanation depends on, in one line (the Explain dialog's header, the
    reports): AMP and checkpointing change what is alive, so they are always named."""
    s = settings
    parts = [s.mode, f"batch {s.batch}", s.dtype]
    if s.mode == "train":
        parts.append(s.optimizer)
        parts.append("AMP on" if s.amp else "AMP off")
        parts.append("activation checkpointing on" if (s.checkpointing or s.checkpoint_layers)
                     else "checkpointing off")
    elif s.amp:
        parts.append("AMP on")
    parts.append(f"{s.backend} semantics")
    return ", ".join(parts)

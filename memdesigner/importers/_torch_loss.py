"""A loss computed inside the imported model (``F.cross_entropy(logits, y)``,
``nn.CrossEntropyLoss()``, ``F.mse_loss``, ``nn.MSELoss``) becomes a Loss node with the target as
its second input, so the Loss rule (model/layers/loss.py) applies: log_softmax kept for backward,
the two input-sized gradients of nll_loss and log_softmax in backward, and nothing held in the
forward beyond them. Variants whose memory the rule does not describe stay Generic (traced):
class weights, label smoothing (a smoothing term over all classes), probability targets,
``reduction='none'`` (a per-element loss)."""

from __future__ import annotations

from memdesigner.model import registry

# torch name -> the Loss kind it computes, from the Loss registration (its torch_props)
KINDS = {op: dict(props)["kind"] for op, props in registry.get("Loss").torch_props}
_ATEN_REDUCTION = {0: "none", 1: "mean", 2: "sum"}  # at::Reduction


def options_of_call(fxn, name: str) -> dict:
    """The loss options of a functional call, by its signature's positions."""
    def arg(i, key, default=None):
        return fxn.args[i] if len(fxn.args) > i else fxn.kwargs.get(key, default)

    if getattr(fxn.target, "_schema", None) is not None:  # an aten op (the torch.export fallback)
        # aten::cross_entropy_loss(self, target, weight, reduction, ignore_index, label_smoothing)
        # aten::mse_loss(self, target, reduction)
        ce = name == "cross_entropy_loss"
        return {"weight": arg(2, "weight") if ce else None, "legacy": (None, None),
                "reduction": _ATEN_REDUCTION.get(arg(3 if ce else 2, "reduction", 1), "none"),
                "label_smoothing": arg(5, "label_smoothing", 0.0) if ce else 0.0}
    if name == "cross_entropy":  # (input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        return {"weight": arg(2, "weight"), "legacy": (arg(3, "size_average"), arg(5, "reduce")),
                "reduction": arg(6, "reduction", "mean"), "label_smoothing": arg(7, "label_smoothing", 0.0)}
    # mse_loss(input, target, size_average, reduce, reduction, weight)
    return {"weight": arg(5, "weight"), "legacy": (arg(2, "size_average"), arg(3, "reduce")),
            "reduction": arg(4, "reduction", "mean"), "label_smoothing": 0.0}


def options_of_module(mod) -> dict:
    return {"weight": getattr(mod, "weight", None), "legacy": (None, None),
            "reduction": getattr(mod, "reduction", "mean"), "label_smoothing": getattr(mod, "label_smoothing", 0.0)}


def loss_kind(name: str, opts: dict, x, target) -> str | None:
    """The Loss node's kind, or None when the call stays Generic."""
    kind = KINDS.get(name)
    if kind is None or opts["weight"] is not None or opts["legacy"] != (None, None):
        return None
    if opts["reduction"] not in ("mean", "sum") or float(opts["label_smoothing"] or 0.0) != 0.0:
        return None
    if kind == "cross_entropy" and (target.spec.kind != "int64" or len(x.spec.shape) < 1):
        return None  # class probabilities as the target: another kernel path
    if kind == "mse" and tuple(target.spec.shape) != tuple(x.spec.shape):
        return None  # a broadcast target
    return kind


def map_loss(st, fxn, name: str, x, target, opts: dict, single):
    """The Loss node for this call (single: _torch_nodes._single), or None to import it as Generic."""
    from memdesigner.importers._torch_values import Val

    if not (isinstance(x, Val) and isinstance(target, Val)):
        return None
    kind = loss_kind(name, opts, x, target)
    if kind is None:
        return None
    return single(st, fxn, "Loss", {"kind": kind}, [x, target])

"""``torch.nn.utils.parametrizations.weight_norm`` on a Linear or a convolution (Wav2Vec2's and
HuBERT's positional convolution, vocoders, TTS decoders).

The layer's parameters are g (one norm per slice along ``dim``) and v (the weight's shape); the
weight is computed from them at every access (aten._weight_norm_interface, which also returns the
norms). The computed weight is a new tensor of the weight's size: the layer keeps it for backward
where a plain layer keeps its parameter (at no cost), the weight norm's backward keeps the norms,
and the layer's backward makes a gradient of the weight's size that the weight norm turns into
g's and v's gradients. Without autograd the weight and the norms live while the layer runs.
"""

from __future__ import annotations

from memdesigner.model.oprules import MemCtx, OpMem, Param, T
from memdesigner.model.registry import ParamSpec, Prop

PROP = Prop("weight_norm", "int", None, min=-1, optional=True,
            doc="weight_norm(dim=...) re-parametrises the weight (g, v): the dim, -1 for one norm of "
                "the whole weight; empty: a plain weight")
HOOK = Prop("weight_norm_hook", "bool", False,
            doc="the weight norm is torch.nn.utils.weight_norm's forward pre-hook, which keeps the "
                "computed weight as an attribute between calls (parametrizations.weight_norm does not)")


def g_shape(weight_shape: tuple, dim: int) -> tuple:
    """The shape of g: the weight's size along ``dim``, 1 elsewhere (``dim`` -1: one scalar)."""
    if dim is None or dim < 0:
        return ()
    return tuple(d if i == dim else 1 for i, d in enumerate(weight_shape))


def param_specs(c, weight_shape: tuple) -> list:
    """g, for a layer whose weight is weight-normed (v is the layer's ``weight``); the hook's kept
    weight is a buffer: alive all the time, counted once however often the layer runs."""
    dim = c["weight_norm"]
    if dim is None:
        return []
    ps = [ParamSpec("weight_g", g_shape(weight_shape, dim))]
    if c["weight_norm_hook"]:
        ps.append(ParamSpec("weight", weight_shape, "buffer"))
    return ps


def apply(m: MemCtx, mem: OpMem) -> OpMem:
    """Add the computed weight and the norms to a layer rule written for a plain weight (param 0).

    Measured (torch 2.13, CPU): the layer's backward makes the weight's gradient after which its
    saved weight is freed, and the weight norm's backward turns it into v's: two weights at most,
    as the rule's saved weight + v's gradient already count. The norms die at once without grad.
    The hook's weight is the buffer (param_specs): what the layer keeps costs nothing, and its new
    weight is made while the old one is still the attribute, before the layer's op allocates."""
    dim = m.props.get("weight_norm")
    if dim is None or not m.params:
        return mem
    v = m.params[0]
    dt = v.dtype or m.dtype
    w = T(v.numel, dt, "weight computed by weight_norm")
    if m.props.get("weight_norm_hook"):
        # the pre-hook runs before the layer's op allocates anything: only a new weight larger
        # than what the op makes raises the moment
        made = sum(t.nbytes for t in list(mem.outputs) + list(mem.temps) + list(mem.saved) if isinstance(t, T))
        beyond = v.numel * T(1, dt).nbytes - made
        if beyond > 0:
            mem.temps = list(mem.temps) + [T(beyond, "uint8", "the hook's new weight (beside the kept one) beyond "
                                                                "what the layer's op makes")]
    elif Param(0) in mem.saved:
        mem.saved = [w if s == Param(0) else s for s in mem.saved]
    else:
        mem.temps = [w] + list(mem.temps)
    if m.records and v.requires_grad:
        norms = T(max(1, _numel(g_shape(v.shape, dim))), dt, "weight_norm's norms")
        mem.saved = list(mem.saved) + [norms]
    return mem


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def wrap_export(props: dict, constructor: str) -> str:
    """The exported module's constructor with its weight_norm written back (the API it came from)."""
    if props.get("weight_norm") is None:
        return constructor
    wn = "nn.utils.weight_norm" if props.get("weight_norm_hook") else "nn.utils.parametrizations.weight_norm"
    dim = int(props["weight_norm"])
    return f"{wn}({constructor}, dim={dim if dim >= 0 else None})"

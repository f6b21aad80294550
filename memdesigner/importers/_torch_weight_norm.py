"""weight_norm traced as aten ops (torch.export, the dispatch trace): ``_weight_norm_interface(v,
g, dim)`` computes the weight and the norms from two parameters. Folded into v like a view or a
cast, g went uncounted and so did the computed weight the layer keeps; instead the weight stays v
marked with (g, dim, hook-based), and the Linear or convolution that reads it takes ``weight_norm=dim`` and
owns g (model/layers/_weight_norm.py counts what PyTorch allocates). A module torch.fx keeps
whole runs torch.nn.utils.weight_norm's pre-hook outside the graph: the module says it."""

from __future__ import annotations

from memdesigner.importers._torch_nodes import _arg, _claim, _single
from memdesigner.importers._torch_values import Multi, ParamVal

# aten's name -> the ops that compute a weight-normed weight from (v, g, dim)
_OPS = ("_weight_norm_interface", "_weight_norm")


def weight_normed(st, fxn, name: str, args: list):
    """The value of a weight_norm op on two parameters: (weight, norms) for the aten interface,
    the weight for ``torch._weight_norm``; None for any other op."""
    if name not in _OPS or len(args) < 2 or not all(isinstance(a, ParamVal) for a in args[:2]):
        return None
    v, g = args[0], args[1]
    dim = int(_arg(fxn, 2, "dim", 0))
    # -1: one norm of the whole weight
    w = ParamVal(v.name, v.shape, True, (g.name, max(dim, -1), _hook_based(st.module, v.name)))
    if name == "_weight_norm":
        return w
    tm = fxn.meta.get("tensor_meta")
    norms = tuple(int(d) for d in tm[1].shape) if isinstance(tm, (tuple, list)) and len(tm) > 1 else g.shape
    return Multi([w, ParamVal(g.name, norms, True)])


def _hook_based(module, v_name: str) -> bool:
    """Whether v belongs to torch.nn.utils.weight_norm's pre-hook (which keeps the weight it
    computes as the module's attribute), not to parametrizations.weight_norm."""
    from torch.nn.utils.weight_norm import WeightNorm

    path = v_name.rsplit(".", 1)[0] if "." in v_name else ""
    try:
        owner = module.get_submodule(path)
    except AttributeError:
        return False
    return any(isinstance(h, WeightNorm) for h in owner._forward_pre_hooks.values())


def module_props(mod) -> dict:
    """The layer props of a Linear / convolution module traced whole (torch.fx): its weight_norm
    pre-hook, if it has one, runs outside the traced graph."""
    from torch.nn.utils.weight_norm import WeightNorm

    for h in mod._forward_pre_hooks.values():
        if isinstance(h, WeightNorm) and h.name == "weight":
            return {"weight_norm": -1 if h.dim is None else max(int(h.dim), -1), "weight_norm_hook": True}
    return {}


def props_of(w) -> dict:
    """The layer props for a weight that is (or is not) weight-normed."""
    if not isinstance(w, ParamVal) or w.weight_norm is None:
        return {}
    return {"weight_norm": w.weight_norm[1], "weight_norm_hook": w.weight_norm[2]}


def claim_g(st, nid: str, w) -> None:
    if isinstance(w, ParamVal) and w.weight_norm is not None:
        _claim(st, nid, "weight_g", w.weight_norm[0])


def param_linear(st, fxn, x, w, b, out_features):
    """``F.linear(x, weight, bias)`` (or ``addmm``) on a module's parameters: a Linear that owns them,
    weight-normed when its weight is."""
    props = {"out_features": int(out_features), "bias": b is not None, **props_of(w)}
    out = _single(st, fxn, "Linear", props, [x], x.dmap)
    _claim(st, out.nid, "weight", w.name)
    if b is not None:
        _claim(st, out.nid, "bias", b.name)
    claim_g(st, out.nid, w)
    return out

"""Shared arithmetic for layer rules: conv/pool output sizes, AMP casts, checks."""

from __future__ import annotations

import math

from memdesigner.model.oprules import In, MemCtx, OpMem, Param, T
from memdesigner.model.registry import LayerError, Prop, TensorSpec

HALF = ("float16", "bfloat16")


def as_tuple(v, n: int) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return tuple(v) * n
        if len(v) != n:
            raise ValueError(f"expected {n} values, got {len(v)}")
        return tuple(v)
    return (v,) * n


def need_rank(ctx, ranks, layer_hint: str = "") -> TensorSpec:
    x = ctx.inputs[0]
    if len(x.shape) not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise LayerError("inputs", f"expects a {want}-D input per sample{layer_hint}, got shape {fmt(x.shape)}")
    return x


def fmt(shape) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def window_out(ctx, n: int, spatial, kernel, stride, padding, dilation, ceil_mode=False, field_k="kernel"):
    """Output sizes of a conv/pool window, PyTorch arithmetic, SAME/VALID the TensorFlow way."""
    k = as_tuple(kernel, n)
    s = as_tuple(stride, n)
    d = as_tuple(dilation, n)
    outs = []
    pads = []
    if padding == "SAME":
        for i in range(n):
            o = math.ceil(spatial[i] / s[i])
            total = max((o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - spatial[i], 0)
            pads.append(total)
            outs.append(o)
        return tuple(outs), tuple(pads)
    p = (0,) * n if padding == "VALID" else as_tuple(padding, n)
    for i in range(n):
        eff = (k[i] - 1) * d[i] + 1
        padded = spatial[i] + 2 * p[i]
        if eff > padded:
            raise LayerError(field_k, f"{k[i]} is larger than the padded input {padded}")
        num = padded - eff
        o = (-(-num // s[i]) if ceil_mode else num // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= spatial[i] + p[i]:
            o -= 1
        outs.append(o)
        pads.append(2 * p[i])
    return tuple(outs), tuple(pads)


def conv_props(n: int, transpose: bool = False) -> tuple:
    props = [
        Prop("out_channels", "int", 16, min=1, doc="number of output feature maps (filters)"),
        Prop("kernel", "pair", 3, doc="kernel size: one number or one per spatial dim"),
        Prop("stride", "pair", 1),
        Prop("padding", "pad", 0 if transpose else "VALID", doc="a number, or SAME / VALID (TensorFlow style)"),
        Prop("dilation", "pair", 1),
        Prop("groups", "int", 1, min=1, doc="in_channels = depthwise"),
        Prop("bias", "bool", True),
    ]
    if transpose:
        props.insert(4, Prop("output_padding", "pad", 0))
        props[3] = Prop("padding", "pad", 0, doc="a number (PyTorch padding)")
    return tuple(props)


def amp_casts(m: MemCtx, mem: OpMem, n_inputs: int = 1, save_inputs: bool = True) -> OpMem:
    """Add autocast's casts to a low-precision op rule already written for half inputs.

    fp32 parameters get a cached half copy (``casts``; saved in place of the parameter when the
    op keeps its weight); fp32 float inputs get an uncached half copy that the op saves instead of
    the input. ``mem`` must be built as if everything were already half (m.amp dtype).
    """
    if m.amp is None:
        return mem
    half = m.amp
    frozen_casts = {}
    for k, p in enumerate(m.params):
        if p.trainable and (p.dtype is None or p.dtype == "float32"):
            if p.requires_grad:
                mem.casts.append((k, T(p.numel, half, f"autocast copy of {p.name}")))
            else:
                # autocast caches casts of leaves that require grad only: a frozen weight is cast
                # anew by each op, saved if the op keeps its weight, else freed after the op
                frozen_casts[k] = T(p.numel, half, f"autocast copy of frozen {p.name}")
    if frozen_casts:
        mem.saved = [frozen_casts.pop(s.k) if isinstance(s, Param) and s.k in frozen_casts else s
                     for s in mem.saved]
        mem.temps = list(frozen_casts.values()) + list(mem.temps)
    new_saved = []
    cast_of = {}
    for i in range(min(n_inputs, len(m.in_dtypes))):
        if m.in_dtypes[i] == "float32":
            t = T(m.in_elems(i), half, f"autocast copy of input {i}")
            cast_of[i] = t
    for s in mem.saved:
        if isinstance(s, In) and s.i in cast_of:
            new_saved.append(cast_of[s.i])
        else:
            new_saved.append(s)
    used = {id(t) for t in new_saved}
    for t in cast_of.values():
        if id(t) not in used:
            mem.temps.insert(0, t)
    mem.saved = new_saved
    mem.out_dtypes = [half if d in ("float32",) + HALF else d for d in mem.out_dtypes]
    mem.outputs = [T(o.elems, half, o.what) if isinstance(o, T) and o.dtype in ("float32",) + HALF else o
                   for o in mem.outputs]
    return mem


def f_dtype(m: MemCtx) -> str:
    return m.amp if m.amp else m.float_in


def amp_fp32(m: MemCtx, mem: OpMem) -> OpMem:
    """CUDA autocast's fp32 list (layer_norm, group_norm, softmax, losses, upsample): a half input
    is cast to fp32 (the cast is what the op keeps) and the output is fp32. CPU autocast leaves
    these ops alone, so they keep their input dtype there."""
    if m.amp is None or m.backend != "cuda":
        return mem
    casts = {}
    for i, d in enumerate(m.in_dtypes):
        if d in HALF:
            casts[i] = T(m.in_elems(i), "float32", f"autocast fp32 copy of input {i}")
    if not casts:
        return mem
    mem.saved = [casts[s.i] if isinstance(s, In) and s.i in casts else s for s in mem.saved]
    used = {id(t) for t in mem.saved}
    mem.temps = [t for i, t in casts.items() if id(t) not in used] + list(mem.temps)
    mem.out_dtypes = ["float32" if d in HALF else d for d in mem.out_dtypes]
    mem.outputs = [T(o.elems, "float32", o.what) if isinstance(o, T) and o.dtype in HALF else o for o in mem.outputs]
    return mem

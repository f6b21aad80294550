"""Fully connected layers, embeddings and reshapes."""

from memdesigner.model.layers._common import amp_casts, f_dtype, fmt
from memdesigner.model.layers._keras_torch import IMPL, keras
from memdesigner.model.oprules import In, OpMem, Param, T, view
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register


def _linear_shape(c):
    x = c.inputs[0]
    if not x.shape:
        raise LayerError("inputs", "Linear needs at least a 1-D input per sample")
    return [TensorSpec(x.shape[:-1] + (c["out_features"],))]


def _linear_params(c):
    ps = [ParamSpec("weight", (c["out_features"], c.inputs[0].shape[-1]))]
    if c["bias"]:
        ps.append(ParamSpec("bias", (c["out_features"],), "bias"))
    return ps


def _linear_flops(c, outs):
    return 2 * outs[0].numel * c.inputs[0].shape[-1] + (outs[0].numel if c["bias"] else 0)


def _linear_mem(m):
    """addmm/mm saves the input for dW (if the weight trains) and the weight for dx (if x needs grad).

    A 3-D input that cannot be viewed as 2-D (a transposed one) is copied by the reshape inside
    matmul; that copy is what is saved.
    """
    dt = f_dtype(m)
    saved, temps = [], []
    x = In(0)
    if len(m.in_shapes[0]) > 2 and not m.viewable(0, (-1, m.in_shapes[0][-1])):
        x = T(m.in_elems(0), m.in_dtypes[0], "contiguous copy of the input")
        temps.append(x)
    if m.records:
        if m.has_trainable:
            saved.append(x)
        if m.in_rg[0]:
            saved.append(Param(0))
    temps = [t for t in temps if t not in saved]
    if keras(m) and m.props["bias"]:  # Keras Dense: matmul, then a separate bias add
        temps.append(T(m.out_elems(0), dt, "matmul output before the bias add"))
    mem = OpMem(outputs=[T(m.out_elems(0), dt, "output")], out_dtypes=[dt], saved=saved, temps=temps,
                grad_in=["new"])
    return amp_casts(m, mem)


Linear = register(LayerType(
    name="Linear", family="dense",
    doc="Fully connected layer on the last dimension (Keras Dense).",
    props=(Prop("out_features", "int", 128, min=1, doc="output units"), Prop("bias", "bool", True), IMPL),
    shape=_linear_shape, params=_linear_params, flops=_linear_flops, memory=_linear_mem,
    aliases=("Dense",), torch_ops=("Linear", "linear"),
    search_words=("fc", "fully connected", "dense", "mlp", "perceptron", "affine", "projection", "head"),
    keeps_for_backward="its input (for the weight gradient)",
))


def _emb_shape(c):
    x = c.inputs[0]
    if x.kind != "int64":
        raise LayerError("inputs", "Embedding needs int64 token ids (set the Input dtype to int64)")
    return [TensorSpec(x.shape + (c["embedding_dim"],))]


def _emb_mem(m):
    saved = [In(0)] if m.records else []
    return OpMem(outputs=[T(m.out_elems(0), m.dtype, "output")], out_dtypes=[m.dtype], saved=saved,
                 grad_in=[None])


Embedding = register(LayerType(
    name="Embedding", family="dense",
    search_words=("embedding", "token", "lookup", "word vectors", "vocabulary", "transformer"),
    doc="Lookup table of token vectors.",
    props=(Prop("num_embeddings", "int", 10000, min=1, doc="vocabulary size"),
           Prop("embedding_dim", "int", 256, min=1)),
    shape=_emb_shape,
    params=lambda c: [ParamSpec("weight", (c["num_embeddings"], c["embedding_dim"]))],
    flops=lambda c, outs: 0, memory=_emb_mem, torch_ops=("Embedding",),
    keeps_for_backward="the token ids (int64)",
))


def _flatten_shape(c):
    x = c.inputs[0]
    s = c["start_dim"] - 1  # per-sample index (start_dim counts the batch)
    if s < 0 or s >= max(len(x.shape), 1):
        raise LayerError("start_dim", f"{c['start_dim']} is outside the input's dimensions 1..{len(x.shape)}")
    n = 1
    for d in x.shape[s:]:
        n *= d
    return [TensorSpec(x.shape[:s] + (n,), x.kind)]


def _reshape_mem(m):
    """A view when the strides allow it (PyTorch's computeStride), else a contiguous copy.
    A Keras Flatten (impl keras_torch) of an image flattens it in (H, W, C) order: a view only
    when the memory is channels last."""
    from memdesigner.model.layout import view_strides

    if keras(m) and m.in_strides and (len(m.in_shapes[0]) >= 4 or len(m.out_shapes[0]) >= 4):
        return _keras_reshape_mem(m)
    st = view_strides(m.in_shapes[0], m.in_strides[0], m.out_shapes[0]) if m.in_strides else None
    if st is not None or not m.in_strides:
        mem = view(m)
        mem.out_strides = [st]
        return mem
    t = T(m.in_elems(0), m.in_dtypes[0], "contiguous copy")
    return OpMem(outputs=[t], out_dtypes=[m.in_dtypes[0]], grad_in=["alias"])


def _channels_last_perm(rank: int) -> tuple:
    """Keras's dimension order of an internal (B, C, *spatial) tensor; identity below 4-D."""
    return (0,) + tuple(range(2, rank)) + (1,) if rank >= 4 else tuple(range(rank))


def _keras_reshape_mem(m):
    """A Keras Flatten / Reshape of a channels-last image reshapes Keras's (B, H, W, C) order:
    a view when that order's strides allow it (after a convolution: channels-last memory),
    a copy otherwise (after pooling, whose output is channels-first memory)."""
    from memdesigner.model.layout import contiguous_strides, view_strides

    shape, strides, out = m.in_shapes[0], m.in_strides[0], m.out_shapes[0]
    pin, pout = _channels_last_perm(len(shape)), _channels_last_perm(len(out))
    k_out = tuple(out[p] for p in pout)
    st = view_strides(tuple(shape[p] for p in pin), tuple(strides[p] for p in pin), k_out)
    copy = st is None
    if copy:
        st = contiguous_strides(k_out)
    internal = [0] * len(out)
    for j, p in enumerate(pout):
        internal[p] = st[j]
    if copy:
        t = T(m.in_elems(0), m.in_dtypes[0], "contiguous copy (Keras reshapes channels last)")
        mem = OpMem(outputs=[t], out_dtypes=[m.in_dtypes[0]], grad_in=["alias"])
    else:
        mem = view(m)
    mem.out_strides = [tuple(internal)]
    return mem


Flatten = register(LayerType(
    name="Flatten", family="dense",
    doc="Flattens all dimensions from start_dim on (a view: no new memory when contiguous).",
    props=(Prop("start_dim", "int", 1, min=1, doc="first dimension to flatten, counting the batch as 0"), IMPL),
    shape=_flatten_shape, memory=_reshape_mem, torch_ops=("Flatten", "flatten"),
    keeps_for_backward="nothing",
))


def _reshape_shape(c):
    x = c.inputs[0]
    target = list(c["shape"])
    if target.count(-1) > 1:
        raise LayerError("shape", "at most one dimension may be -1")
    known = 1
    for d in target:
        if d == 0 or d < -1:
            raise LayerError("shape", f"dimension {d} must be positive or -1")
        if d != -1:
            known *= d
    n = x.numel
    if -1 in target:
        if n % known:
            raise LayerError("shape", f"{fmt(x.shape)} ({n} elements) cannot be viewed as {fmt(target)}")
        target[target.index(-1)] = n // known
    elif known != n:
        raise LayerError("shape", f"{fmt(x.shape)} has {n} elements, {fmt(target)} has {known}")
    return [TensorSpec(tuple(target), x.kind)]


Reshape = register(LayerType(
    name="Reshape", family="dense",
    doc="Reshape per sample (a view when the input is contiguous, a copy otherwise).",
    props=(Prop("shape", "ints", (-1,), doc="per-sample target shape; one dimension may be -1"), IMPL),
    shape=_reshape_shape, memory=_reshape_mem, torch_ops=("reshape", "view"),
    keeps_for_backward="nothing",
))

"""Fully connected layers, embeddings and reshapes."""

from memdesigner.model.exportspec import TorchExport, module_export
from memdesigner.model.layers import _weight_norm
from memdesigner.model.layers._common import amp_casts, f_dtype, fmt
from memdesigner.model.layers._keras_torch import IMPL, keras
from memdesigner.model.onnxmap import Alias
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
    return ps + _weight_norm.param_specs(c, ps[0].shape)


def _linear_flops(c, outs):
    return 2 * outs[0].numel * c.inputs[0].shape[-1] + (outs[0].numel if c["bias"] else 0)


def _linear_mem(m):
    """addmm/mm saves the input for dW (if the weight requires grad: a frozen weight, a LoRA base,
    keeps no input) and the weight for dx (if x needs grad); a trainable bias alone needs neither.

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
        if m.param_rg(0):
            saved.append(x)
        if m.in_rg[0]:
            saved.append(Param(0))
    temps = [t for t in temps if t not in saved]
    if keras(m) and m.props["bias"]:  # Keras Dense: matmul, then a separate bias add
        temps.append(T(m.out_elems(0), dt, "matmul output before the bias add"))
    mem = OpMem(outputs=[T(m.out_elems(0), dt, "output")], out_dtypes=[dt], saved=saved, temps=temps,
                grad_in=["new"])
    return amp_casts(m, _weight_norm.apply(m, mem))


def _linear_onnx(ctx):
    """Gemm(x, W, b) (2-D input; W is (out, in) with transB=1), or MatMul(x, W) with the bias Add
    that follows it fused in by the importer (W is (in, out))."""
    w = ctx.param(1)
    if w is None or len(w) != 2 or ctx.x(0).kind != "tensor":
        return None  # a product of two activations: MatMul
    if ctx.op == "Gemm":
        if ctx.attr("transA", 0):
            raise LayerError("inputs", "Gemm with transA")
        out = w[0] if ctx.attr("transB", 0) else w[1]
    else:
        out = w[1]
    inner = w[1] if (ctx.op == "Gemm" and ctx.attr("transB", 0)) else w[0]
    if ctx.x(0).shape and ctx.x(0).shape[-1] != inner:
        raise LayerError("inputs", f"the weight {w} does not take {ctx.x(0).shape[-1]} input features")
    bias = ctx.param(2)
    ctx.tensor_inputs = [0]
    return {"out_features": int(out), "bias": bias is not None and bias[-1] == out}


def _linear_export(e):
    return module_export(e, _weight_norm.wrap_export(
        e.props, f"nn.Linear({e.in_shapes[0][-1]}, {e.lit('out_features')}, bias={e.lit('bias')})"))


Linear = register(LayerType(
    name="Linear", family="dense", to_torch=_linear_export, keeps_layout=True,
    from_torch_module=lambda c: {"out_features": c.module.out_features, "bias": c.module.bias is not None}
    if c.from_torch_nn else None,
    doc="Fully connected layer on the last dimension (Keras Dense).",
    props=(Prop("out_features", "int", 128, min=1, doc="output units"), Prop("bias", "bool", True), IMPL,
           _weight_norm.PROP, _weight_norm.HOOK),
    shape=_linear_shape, params=_linear_params, flops=_linear_flops, memory=_linear_mem,
    aliases=("Dense",), torch_ops=("Linear", "linear"),
    search_words=("fc", "fully connected", "dense", "mlp", "perceptron", "affine", "projection", "head"),
    onnx_ops=("Gemm", "MatMul", "MatMul+Add"), from_onnx=_linear_onnx,
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


def _emb_onnx(ctx):
    """Gather(table, ids) with the table an initializer: an embedding lookup."""
    w = ctx.param(0)
    if w is None or len(w) != 2 or ctx.x(1).kind != "tensor" or int(ctx.attr("axis", 0)) != 0:
        return None
    ids = ctx.x(1)
    ctx.tensor_inputs = [1]
    ctx.out_dmap = tuple(ids.dmap) + (ids.drank,)
    return {"num_embeddings": int(w[0]), "embedding_dim": int(w[1])}


Embedding = register(LayerType(
    name="Embedding", family="dense", to_torch=lambda e: module_export(e, f"nn.Embedding({e.lit('num_embeddings')}, {e.lit('embedding_dim')})"),
    from_torch_module=lambda c: {"num_embeddings": c.module.num_embeddings, "embedding_dim": c.module.embedding_dim}
    if c.from_torch_nn else None,
    search_words=("embedding", "token", "lookup", "word vectors", "vocabulary", "transformer"),
    doc="Lookup table of token vectors.",
    props=(Prop("num_embeddings", "int", 10000, min=1, doc="vocabulary size"),
           Prop("embedding_dim", "int", 256, min=1)),
    shape=_emb_shape,
    params=lambda c: [ParamSpec("weight", (c["num_embeddings"], c["embedding_dim"]))],
    flops=lambda c, outs: 0, memory=_emb_mem, torch_ops=("Embedding", "embedding"), onnx_ops=("Gather",), from_onnx=_emb_onnx,
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
def _flatten_onnx(ctx):
    """ONNX Flatten(axis) makes a 2-D tensor: only axis 1 keeps the batch apart."""
    x = ctx.tensor(0)
    if int(ctx.attr("axis", 1)) != 1:
        raise LayerError("start_dim", f"Flatten(axis={ctx.attr('axis', 1)}) merges the batch dimension")
    if tuple(x.dmap) != tuple(range(len(x.shape))):
        return None  # the design's layout differs: a Reshape
    return {"start_dim": 1}


Flatten = register(LayerType(
    name="Flatten", family="dense", to_torch=lambda e: TorchExport(f"torch.flatten({e.x}, {e.lit('start_dim')})"),
    doc="Flattens all dimensions from start_dim on (a view: no new memory when contiguous).",
    props=(Prop("start_dim", "int", 1, min=1, doc="first dimension to flatten, counting the batch as 0"), IMPL),
    shape=_flatten_shape, memory=_reshape_mem, torch_ops=("Flatten", "flatten"),
    onnx_ops=("Flatten",), from_onnx=_flatten_onnx,
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


def _reshape_onnx(ctx):
    """Reshape / Flatten / Squeeze / Unsqueeze to the inferred shape, per sample. Squeezing a
    size-1 dim of a tensor the design lays out differently (after a split) only changes the layout."""
    x = ctx.tensor(0)
    out = tuple(ctx.out_shapes[0])
    identity = tuple(x.dmap) == tuple(range(len(x.shape)))
    if ctx.op == "Squeeze" and not identity:
        axes = ctx.attr("axes")
        if axes is None and ctx.x(1).kind == "const":
            axes = [int(a) for a in ctx.const(1).reshape(-1)]
        if axes is None:
            axes = [i for i, d in enumerate(x.shape) if d == 1]
        axes = {a % len(x.shape) for a in axes}
        if 0 in {x.dmap[a] for a in axes}:
            raise LayerError("shape", "squeezes the batch dimension")
        return Alias(tuple(d for i, d in enumerate(x.dmap) if i not in axes))
    if x.dmap[0] != 0 or not out or out[0] != ctx.batch:
        raise LayerError("shape", f"reshape to {out} merges or moves the batch dimension")
    if len(out) < 2:
        raise LayerError("shape", "reshape to a scalar per sample")
    ctx.tensor_inputs = [0]
    ctx.out_dmap = tuple(range(len(out)))
    return {"shape": out[1:]}


Reshape = register(LayerType(
    name="Reshape", family="dense", to_torch=lambda e: TorchExport(f"{e.x}.reshape({e.x}.shape[0], {', '.join(str(d) for d in e.out_shapes[0])})"),
    doc="Reshape per sample (a view when the input is contiguous, a copy otherwise).",
    props=(Prop("shape", "ints", (-1,), doc="per-sample target shape; one dimension may be -1"), IMPL),
    shape=_reshape_shape, memory=_reshape_mem, torch_ops=("reshape", "view"),
    onnx_ops=("Reshape", "Flatten", "Squeeze", "Unsqueeze"), from_onnx=_reshape_onnx,
    keeps_for_backward="nothing",
))

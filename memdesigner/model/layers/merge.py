"""Nodes that combine several tensors."""

from memdesigner.model.exportspec import TorchExport
from memdesigner.model.layers._common import fmt
from memdesigner.model.oprules import In, OpMem, T
from memdesigner.model.registry import LayerError, LayerType, Prop, TensorSpec, register


def _broadcast(c):
    shapes = [x.shape for x in c.inputs]
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        dims = {s[len(s) - nd + i] for s in shapes if len(s) - nd + i >= 0} - {1}
        if len(dims) > 1:
            raise LayerError("inputs", "shapes " + ", ".join(fmt(s) for s in shapes) + " do not broadcast")
        out.append(dims.pop() if dims else 1)
    return [TensorSpec(tuple(out))]


def _promoted(m) -> str:
    """torch's type promotion of float tensors of different dtypes: bf16 + fp32 is fp32 (a half
    attention score plus an fp32 mask under autocast), bf16 + fp16 is fp32."""
    floats = {d for d in m.in_dtypes if d in ("float16", "bfloat16", "float32", "float64")}
    if len(floats) <= 1:
        return m.float_in
    return "float64" if "float64" in floats else "float32"


def _add_mem(m):
    """x + y allocates the sum; its backward passes the gradient on unchanged (reduced by a sum
    for a broadcast input). In place (out += y) it allocates nothing."""
    dt = _promoted(m)
    n = m.out_elems(0)
    grads = ["alias" if m.in_elems(i) == n else T(m.in_elems(i), m.in_dtypes[i], "reduced gradient")
             for i in range(len(m.in_shapes))]
    if m.props.get("inplace") and m.in_elems(0) == n:
        return OpMem(outputs=[In(0)], out_dtypes=[dt], grad_in=grads)
    return OpMem(outputs=[T(n, dt, "sum")], out_dtypes=[dt], grad_in=grads, elementwise=True)


def _same_layout(ctx):
    """Element-wise ops on activations laid out alike (scalars and parameters are other types')."""
    if any(v.kind != "tensor" for v in ctx.inputs):
        return None
    ranks = {len(v.shape) for v in ctx.inputs}
    if len(ranks) == 1 and len({tuple(v.dmap) for v in ctx.inputs}) != 1:
        raise LayerError("inputs", "operands laid out differently")
    widest = max(ctx.inputs, key=lambda v: len(v.shape))
    ctx.out_dmap = tuple(widest.dmap)
    return {}


Add = register(LayerType(
    name="Add", family="merge", doc="Element-wise sum (residual connections). Broadcasts.",
    props=(Prop("inplace", "bool", False, doc="out += other, as torchvision's ResNet blocks do"),),
    min_inputs=2, max_inputs=None, shape=_broadcast, flops=lambda c, o: (len(c.inputs) - 1) * o[0].numel,
    memory=_add_mem, torch_ops=("add", "iadd"), aliases=("add",), onnx_ops=("Add", "Sum"), from_onnx=_same_layout,
    keeps_for_backward="nothing",
))


def _mul_mem(m):
    """a * b keeps each operand for the other's gradient."""
    saved = []
    if m.records:
        if m.in_rg[0]:
            saved.append(In(1))
        if len(m.in_rg) > 1 and m.in_rg[1]:
            saved.append(In(0))
    grads = ["new" if m.in_elems(i) == m.out_elems(0) else T(m.in_elems(i), m.in_dtypes[i], "reduced gradient")
             for i in range(len(m.in_shapes))]
    return OpMem(outputs=[T(m.out_elems(0), m.float_in, "product")], out_dtypes=[m.float_in], saved=saved,
                 grad_in=grads, elementwise=True)





Multiply = register(LayerType(
    name="Multiply", family="merge", to_torch=lambda e: TorchExport(f"{e.x} * {e.inputs[1]}"), doc="Element-wise product (gating). Broadcasts.",
    min_inputs=2, max_inputs=2, shape=_broadcast, flops=lambda c, o: o[0].numel, memory=_mul_mem,
    torch_ops=("mul",), aliases=("mul",), onnx_ops=("Mul",), from_onnx=_same_layout, keeps_for_backward="both operands",
))


def _cat_shape(c):
    d = c["dim"]
    shapes = [x.shape for x in c.inputs]
    nd = len(shapes[0]) + 1
    if d < 0:
        d += nd
    if d <= 0 or d >= nd:
        raise LayerError("dim", f"{c['dim']} is not a non-batch dimension of a {nd}-D tensor")
    k = d - 1
    for s in shapes[1:]:
        if len(s) != len(shapes[0]) or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != k):
            raise LayerError("inputs", "shapes " + ", ".join(fmt(s) for s in shapes) + f" differ outside dim {d}")
    out = list(shapes[0])
    out[k] = sum(s[k] for s in shapes)
    return [TensorSpec(tuple(out), c.inputs[0].kind)]


def _cat_mem(m):
    """torch.cat keeps the inputs' memory format when they all share it: channels-last images
    (a Keras model's) give a channels-last result."""
    from memdesigner.model.layers._keras_torch import channels_last_strides, is_channels_last
    from memdesigner.model.layout import is_contiguous

    dt = m.float_in
    mem = OpMem(outputs=[T(m.out_elems(0), dt, "concatenation")], out_dtypes=[dt],
                grad_in=["alias"] * len(m.in_shapes))
    if m.in_strides and len(m.out_shapes[0]) >= 4 and all(
            is_channels_last(s, st) and not is_contiguous(s, st) for s, st in zip(m.in_shapes, m.in_strides)):
        mem.out_strides = [channels_last_strides(m.out_shapes[0])]
    return mem


def _cat_onnx(ctx):
    if len(ctx.inputs) < 2 or any(v.kind != "tensor" for v in ctx.inputs):
        return None
    if len({tuple(v.dmap) for v in ctx.inputs}) != 1:
        raise LayerError("inputs", "operands laid out differently")
    return {"dim": ctx.ddim(int(ctx.attr("axis", 0)))}


Concat = register(LayerType(
    name="Concat", family="merge", to_torch=lambda e: TorchExport(f"torch.cat([{', '.join(e.inputs)}], dim={e.lit('dim')})"), doc="Concatenation along a dimension (U-Net skips, DenseNet).",
    props=(Prop("dim", "int", 1, doc="dimension counting the batch as 0; 1 = channels"),),
    min_inputs=2, max_inputs=None, shape=_cat_shape, memory=_cat_mem, torch_ops=("cat",), onnx_ops=("Concat",),
    from_onnx=_cat_onnx,
    aliases=("Concatenate", "cat"), keeps_for_backward="nothing (gradients are slices)",
))

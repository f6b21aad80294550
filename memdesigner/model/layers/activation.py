"""Element-wise activations and softmax."""

from memdesigner.model.layers._common import amp_fp32
from memdesigner.model.onnxmap import f32
from memdesigner.model.oprules import In, OpMem, Out, T
from memdesigner.model.registry import LayerError, LayerType, Prop, TensorSpec, register


def _same(c):
    x = c.inputs[0]
    if x.kind != "float":
        raise LayerError("inputs", "needs a float input")
    return [TensorSpec(x.shape)]


def _act_mem(saves: str, inplace_clone: bool, elementwise: bool = True):
    """saves: 'out' (backward uses the result: ReLU, Sigmoid, Tanh, Softmax) or 'in' (GELU, SiLU,
    ReLU6, LeakyReLU). An in-place op whose backward needs the input makes autograd clone it first."""

    def rule(m):
        dt = m.float_in
        n = m.in_elems(0)
        inplace = bool(m.props.get("inplace", False))
        out = In(0) if inplace else T(n, dt, "output")
        if not m.records:
            return OpMem(outputs=[out], out_dtypes=[dt], grad_in=["new"], elementwise=elementwise)
        if saves == "out" or (inplace and not inplace_clone):
            saved = [Out(0)]
        elif inplace:
            saved = [T(n, dt, "clone of the input (in-place op needs the original)")]
        else:
            saved = [In(0)]
        return OpMem(outputs=[out], out_dtypes=[dt], saved=saved, grad_in=["new"], elementwise=elementwise)

    return rule


def _onnx_act(props=None):
    """An element-wise activation; ONNX has no in-place ops, so inplace stays False."""
    def rule(ctx):
        return dict(props(ctx)) if props else {}
    return rule


def _act(name, saves, doc, inplace=False, inplace_clone=False, extra=(), aliases=(), flops=1, onnx_ops=(),
         onnx_props=None):
    props = tuple(extra) + ((Prop("inplace", "bool", False),) if inplace else ())
    what = "its output" if saves == "out" else "its input"
    if inplace and saves == "in":
        what += "; in place it keeps a clone of the input" if inplace_clone else "; in place it keeps the result"
    return register(LayerType(
        name=name, family="activation", doc=doc, props=props, shape=_same,
        flops=lambda c, o, f=flops: f * o[0].numel, memory=_act_mem(saves, inplace_clone),
        aliases=aliases, torch_ops=(name, name.lower()), keeps_for_backward=what,
        onnx_ops=onnx_ops, from_onnx=_onnx_act(onnx_props) if onnx_ops else None,
    ))


def _clip_range(ctx):
    """Clip(x, 0, 6) is ReLU6 (min/max as inputs since opset 11, attributes before)."""
    lo = ctx.scalar(1, ctx.attr("min", float("-inf")))
    hi = ctx.scalar(2, ctx.attr("max", float("inf")))
    if (lo, hi) != (0.0, 6.0):
        raise LayerError("inputs", f"Clip({lo:g}, {hi:g}): only Clip(0, 6) is ReLU6")
    ctx.tensor_inputs = [0]
    return {}


def _gelu_props(ctx):
    a = ctx.attr("approximate", "none")
    return {"approximate": a.decode() if isinstance(a, bytes) else str(a)}


ReLU = _act("ReLU", "out", "max(x, 0).", inplace=True, aliases=("relu",), onnx_ops=("Relu",))
ReLU6 = _act("ReLU6", "in", "min(max(x, 0), 6) (hardtanh).", inplace=True, inplace_clone=True, aliases=("relu6",),
             onnx_ops=("Clip",), onnx_props=_clip_range)
LeakyReLU = _act("LeakyReLU", "in", "x if x > 0 else slope * x.", inplace=True,
                 extra=(Prop("negative_slope", "float", 0.01),), aliases=("leaky_relu",), onnx_ops=("LeakyRelu",),
                 onnx_props=lambda ctx: {"negative_slope": f32(ctx.attr("alpha", 0.01))})
GELU = _act("GELU", "in", "Gaussian error linear unit.", extra=(Prop("approximate", "choice", "none",
                                                                     choices=("none", "tanh")),),
            aliases=("gelu",), flops=8, onnx_ops=("Gelu", "Mul(Mul(x,Add(Erf(Div(x,c)),1)),0.5)"),
            onnx_props=_gelu_props)
SiLU = _act("SiLU", "in", "x * sigmoid(x) (swish).", inplace=True, inplace_clone=True,
            aliases=("swish", "silu"), flops=4, onnx_ops=("Mul(x,Sigmoid(x))",))
Sigmoid = _act("Sigmoid", "out", "1 / (1 + exp(-x)).", aliases=("sigmoid",), flops=4, onnx_ops=("Sigmoid",))
Tanh = _act("Tanh", "out", "Hyperbolic tangent.", aliases=("tanh",), flops=4, onnx_ops=("Tanh",))


def _softmax_shape(c):
    x = c.inputs[0]
    d = c["dim"]
    nd = len(x.shape) + 1
    if not -nd <= d < nd or d == 0 or d == -nd:
        raise LayerError("dim", f"{d} is not a non-batch dimension of a {nd}-D tensor")
    return [TensorSpec(x.shape)]


Softmax = register(LayerType(
    name="Softmax", family="activation",
    doc="Softmax (or log-softmax) along a dimension (batch is dimension 0).",
    props=(Prop("dim", "int", -1), Prop("log", "bool", False, doc="log_softmax: same memory, log-probabilities")),
    shape=_softmax_shape, flops=lambda c, o: 5 * o[0].numel,
    memory=lambda m: amp_fp32(m, _act_mem("out", False, elementwise=False)(m)), aliases=("softmax", "LogSoftmax", "log_softmax"), torch_ops=("Softmax", "softmax", "LogSoftmax", "log_softmax"),
    onnx_ops=("Softmax", "LogSoftmax"),
    from_onnx=lambda ctx: {"dim": ctx.ddim(int(ctx.attr("axis", -1))), "log": ctx.op == "LogSoftmax"},
    keeps_for_backward="its output",
))

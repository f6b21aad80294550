"""Element-wise activations and softmax."""

from memdesigner.model.exportspec import module_export
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


def _inplace_module(c, lt_props) -> dict:
    return {"inplace": bool(c.module.inplace)} if "inplace" in lt_props and hasattr(c.module, "inplace") else {}


def _inplace_call(c, inplace_at: dict) -> bool:
    """relu_ / x.relu_(), inplace=True, or F.relu(x, True) (the flag's position per function)."""
    at = inplace_at.get(c.op)
    return bool(c.op.endswith("_") or c.kwargs.get("inplace", False)
                or (at is not None and c.kind == "call_function" and c.arg(at, "inplace", False) is True))


def _act(name, saves, doc, inplace=False, inplace_clone=False, extra=(), aliases=(), flops=1, onnx_ops=(),
         onnx_props=None, calls=(), inplace_at=None, module_props=None, call_props=None, keras=(), keras_props=None,
         ctor=None):
    """An element-wise activation: nn.<name> and the functions ``calls`` import as it (``inplace_at``:
    function -> position of its inplace flag; ``module_props`` / ``call_props``: the other props read
    from the module or the call), Keras activations ``keras`` (``keras_props``: their props), and the
    export ``ctor`` (ExportCtx -> the module's constructor; default ``nn.<name>(inplace=True)``)."""
    props = tuple(extra) + ((Prop("inplace", "bool", False),) if inplace else ())
    names = {p.name for p in props}
    what = "its output" if saves == "out" else "its input"
    if inplace and saves == "in":
        what += "; in place it keeps a clone of the input" if inplace_clone else "; in place it keeps the result"

    def from_module(c):
        if not c.from_torch_nn:
            return None
        return {**_inplace_module(c, names), **(module_props(c.module) if module_props else {})}

    def from_call(c):
        out = {"inplace": _inplace_call(c, inplace_at or {})} if inplace else {}
        return {**out, **(call_props(c) if call_props else {})}

    def to_torch(e):
        text = ctor(e) if ctor else f"nn.{name}(" + ("inplace=True)" if e.props.get("inplace") else ")")
        return module_export(e, text)

    return register(LayerType(
        name=name, family="activation", doc=doc, props=props, shape=_same,
        flops=lambda c, o, f=flops: f * o[0].numel, memory=_act_mem(saves, inplace_clone),
        aliases=aliases, torch_ops=(name,) + tuple(calls), keeps_for_backward=what,
        from_torch_module=from_module, from_torch_call=from_call, keeps_layout=True,
        keras_activations=tuple(keras), from_keras=keras_props, to_torch=to_torch,
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


def _hardtanh_range(c):
    """F.hardtanh(x, 0, 6) is ReLU6 (F.relu6 itself becomes aten hardtanh under torch.export)."""
    if c.op in ("hardtanh", "hardtanh_") and (c.arg(1, "min_val", -1.0), c.arg(2, "max_val", 1.0)) != (0.0, 6.0):
        raise LayerError("inputs", "only hardtanh(0, 6) maps to ReLU6")
    return {}


def _leaky_ctor(e):
    return f"nn.LeakyReLU({e.lit('negative_slope')}" + (", inplace=True)" if e.props.get("inplace") else ")")


def _gelu_ctor(e):
    return "nn.GELU(" + (f"approximate={e.lit('approximate')})" if e.props["approximate"] != "none" else ")")


ReLU = _act("ReLU", "out", "max(x, 0).", inplace=True, aliases=("relu",), onnx_ops=("Relu",),
            calls=("relu", "relu_"), inplace_at={"relu": 1}, keras=("relu",))
ReLU6 = _act("ReLU6", "in", "min(max(x, 0), 6) (hardtanh).", inplace=True, inplace_clone=True, aliases=("relu6",),
             onnx_ops=("Clip",), onnx_props=_clip_range, calls=("relu6", "hardtanh", "hardtanh_"), inplace_at={"relu6": 1},
             call_props=_hardtanh_range, keras=("relu6",))
LeakyReLU = _act("LeakyReLU", "in", "x if x > 0 else slope * x.", inplace=True,
                 extra=(Prop("negative_slope", "float", 0.01),), aliases=("leaky_relu",), onnx_ops=("LeakyRelu",),
                 onnx_props=lambda ctx: {"negative_slope": f32(ctx.attr("alpha", 0.01))},
                 calls=("leaky_relu", "leaky_relu_"), inplace_at={"leaky_relu": 2},
                 module_props=lambda m: {"negative_slope": float(m.negative_slope)},
                 call_props=lambda c: {"negative_slope": float(c.arg(1, "negative_slope", 0.01))},
                 keras=("leaky_relu",), keras_props=lambda k: {"negative_slope": 0.2}, ctor=_leaky_ctor)
GELU = _act("GELU", "in", "Gaussian error linear unit.", extra=(Prop("approximate", "choice", "none",
                                                                     choices=("none", "tanh")),),
            aliases=("gelu",), flops=8, onnx_ops=("Gelu", "Mul(Mul(x,Add(Erf(Div(x,c)),1)),0.5)"),
            onnx_props=_gelu_props, calls=("gelu",), module_props=lambda m: {"approximate": m.approximate},
            call_props=lambda c: {"approximate": c.kwargs.get("approximate", "none")}, keras=("gelu",),
            ctor=_gelu_ctor)
SiLU = _act("SiLU", "in", "x * sigmoid(x) (swish).", inplace=True, inplace_clone=True,
            aliases=("swish", "silu"), flops=4, onnx_ops=("Mul(x,Sigmoid(x))",), calls=("silu", "silu_"),
            inplace_at={"silu": 1}, keras=("swish", "silu"))
Sigmoid = _act("Sigmoid", "out", "1 / (1 + exp(-x)).", aliases=("sigmoid",), flops=4, onnx_ops=("Sigmoid",),
               calls=("sigmoid", "sigmoid_"), keras=("sigmoid",))
Tanh = _act("Tanh", "out", "Hyperbolic tangent.", aliases=("tanh",), flops=4, onnx_ops=("Tanh",),
            calls=("tanh", "tanh_"), keras=("tanh",))


def _softmax_shape(c):
    x = c.inputs[0]
    d = c["dim"]
    nd = len(x.shape) + 1
    if not -nd <= d < nd or d == 0 or d == -nd:
        raise LayerError("dim", f"{d} is not a non-batch dimension of a {nd}-D tensor")
    return [TensorSpec(x.shape)]


def _softmax_module(c):
    if not c.from_torch_nn:
        return None
    if c.module.dim is None:
        raise LayerError("dim", "Softmax without dim")
    return {"dim": c.ddim(c.module.dim), "log": c.op == "LogSoftmax"}


def _softmax_call(c):
    d = c.arg(1, "dim", None)
    if d is None:
        raise LayerError("dim", "softmax without dim")
    return {"dim": c.ddim(int(d)), "log": "log" in c.op}


Softmax = register(LayerType(
    name="Softmax", family="activation",
    doc="Softmax (or log-softmax) along a dimension (batch is dimension 0).",
    props=(Prop("dim", "int", -1), Prop("log", "bool", False, doc="log_softmax: same memory, log-probabilities")),
    shape=_softmax_shape, flops=lambda c, o: 5 * o[0].numel,
    memory=lambda m: amp_fp32(m, _act_mem("out", False, elementwise=False)(m)),
    aliases=("softmax", "LogSoftmax", "log_softmax"),
    torch_ops=("Softmax", "LogSoftmax", "softmax", "_softmax", "log_softmax", "_log_softmax"),
    from_torch_module=_softmax_module, from_torch_call=_softmax_call, keeps_layout=True,
    keras_activations=("softmax", "log_softmax"), from_keras=lambda k: {"dim": k.axis(-1), "log": k.name == "log_softmax"},
    to_torch=lambda e: module_export(e, f"nn.{'LogSoftmax' if e.props['log'] else 'Softmax'}(dim={e.lit('dim')})"),
    onnx_ops=("Softmax", "LogSoftmax"),
    from_onnx=lambda ctx: {"dim": ctx.ddim(int(ctx.attr("axis", -1))), "log": ctx.op == "LogSoftmax"},
    keeps_for_backward="its output",
))


def _softsign_mem(m):
    """F.softsign is Python, ``x / (x.abs() + 1)``: |x| dies after the add, the divisor 1 + |x|
    is kept for the division's backward (with x, which abs keeps too); in inference it dies with the op."""
    dt = m.float_in
    n = m.in_elems(0)
    divisor = T(n, dt, "1 + |x| (the division keeps it)")
    if not m.records:
        return OpMem(outputs=[T(n, dt, "output")], out_dtypes=[dt], temps=[divisor], grad_in=["new"], elementwise=True)
    # backward: the division's two gradients (x's and the divisor's, the latter through x / divisor
    # / divisor), abs's sign times its gradient, then their sum: at most 3 more tensors beside x's gradient
    return OpMem(outputs=[T(n, dt, "output")], out_dtypes=[dt], saved=[In(0), divisor], grad_in=["new"],
                 bwd_temps=[T(3 * n, dt, "the division's and abs's backward (x / d / d, the divisor's gradient, sign(x))")],
                 elementwise=True)


Softsign = register(LayerType(
    name="Softsign", family="activation", doc="x / (1 + |x|).", shape=_same, flops=lambda c, o: 3 * o[0].numel,
    memory=_softsign_mem, keeps_for_backward="its input and 1 + |x|", aliases=("softsign",),
    torch_ops=("Softsign", "softsign"), keeps_layout=True, keras_activations=("softsign",),
    from_torch_module=lambda c: {} if c.from_torch_nn else None, from_torch_call=lambda c: {},
    to_torch=lambda e: module_export(e, "nn.Softsign()"), onnx_ops=("Softsign",), from_onnx=_onnx_act(),
))

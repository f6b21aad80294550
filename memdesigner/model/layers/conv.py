"""Convolutions (PyTorch arithmetic; SAME/VALID padding the TensorFlow way)."""

from memdesigner.model.layers._common import amp_casts, as_tuple, conv_props, f_dtype, need_rank, window_out
from memdesigner.model.onnxmap import pads, pair, spatial_rank
from memdesigner.model.oprules import In, OpMem, Param, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, TensorSpec, register


def _conv_shape(n):
    def rule(c):
        x = need_rank(c, (n + 1,))
        cin, spatial = x.shape[0], x.shape[1:]
        g, cout = c["groups"], c["out_channels"]
        if cin % g:
            raise LayerError("groups", f"{g} does not divide the {cin} input channels")
        if cout % g:
            raise LayerError("groups", f"{g} does not divide out_channels {cout}")
        outs, _ = window_out(c, n, spatial, c["kernel"], c["stride"], c["padding"], c["dilation"])
        for o in outs:
            if o <= 0:
                raise LayerError("kernel", "the output would be empty")
        return [TensorSpec((cout,) + outs)]
    return rule


def _conv_params(n):
    def rule(c):
        cin = c.inputs[0].shape[0]
        k = as_tuple(c["kernel"], n)
        ps = [ParamSpec("weight", (c["out_channels"], cin // c["groups"]) + k)]
        if c["bias"]:
            ps.append(ParamSpec("bias", (c["out_channels"],), "bias"))
        return ps
    return rule


def _conv_flops(n):
    def rule(c, outs):
        cin = c.inputs[0].shape[0]
        kk = 1
        for v in as_tuple(c["kernel"], n):
            kk *= v
        return 2 * outs[0].numel * (cin // c["groups"]) * kk + (outs[0].numel if c["bias"] else 0)
    return rule


def _conv_mem(m):
    """convolution saves its input and weight (ConvolutionBackward0), whatever requires grad."""
    dt = f_dtype(m)
    saved = [In(0), Param(0)] if m.records else []
    mem = OpMem(outputs=[T(m.out_elems(0), dt, "output")], out_dtypes=[dt], saved=saved, grad_in=["new"])
    return amp_casts(m, mem)


def _conv_onnx(n):
    """ONNX Conv(x, W[, B]): W is (out, in/groups, k...); the rank of x picks Conv1d or Conv2d."""
    def rule(ctx):
        if spatial_rank(ctx) != n:
            return None
        w = ctx.param(1)
        if w is None:
            raise LayerError("weight", "the weight is computed, not an initializer")
        g = int(ctx.attr("group", 1))
        if ctx.x(0).shape[1] != w[1] * g:
            raise LayerError("inputs", f"the weight {w} does not take {ctx.x(0).shape[1]} input channels")
        ctx.tensor_inputs = [0]
        return {"out_channels": w[0], "kernel": pair(ctx.attr("kernel_shape") or w[2:]),
                "stride": pair(ctx.attr("strides")), "padding": pads(ctx, n),
                "dilation": pair(ctx.attr("dilations")), "groups": int(ctx.attr("group", 1)),
                "bias": ctx.param(2) is not None}
    return rule


def _make_conv(name, n, aliases=(), torch_ops=()):
    return register(LayerType(
        name=name, family="convolution",
        doc=f"{n}-D convolution. groups = in_channels gives a depthwise convolution.",
        props=conv_props(n), shape=_conv_shape(n), params=_conv_params(n), flops=_conv_flops(n),
        memory=_conv_mem, aliases=aliases, torch_ops=torch_ops, onnx_ops=("Conv",), from_onnx=_conv_onnx(n),
        keeps_for_backward="its input (and the weight)",
    ))


Conv1d = _make_conv("Conv1d", 1, ("Conv1D",), ("Conv1d", "conv1d"))
Conv2d = _make_conv("Conv2d", 2, ("Conv2D", "DepthwiseConv2d"), ("Conv2d", "conv2d"))


def _convt_shape(c):
    x = need_rank(c, (3,))
    cin, spatial = x.shape[0], x.shape[1:]
    g = c["groups"]
    if cin % g or c["out_channels"] % g:
        raise LayerError("groups", f"{g} must divide input channels {cin} and out_channels")
    k, s, d = as_tuple(c["kernel"], 2), as_tuple(c["stride"], 2), as_tuple(c["dilation"], 2)
    p, op = as_tuple(c["padding"], 2), as_tuple(c["output_padding"], 2)
    outs = []
    for i in range(2):
        if op[i] >= max(s[i], d[i]):
            raise LayerError("output_padding", f"{op[i]} must be smaller than stride or dilation")
        o = (spatial[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1
        if o <= 0:
            raise LayerError("padding", f"{p[i]} leaves an empty output")
        outs.append(o)
    return [TensorSpec((c["out_channels"],) + tuple(outs))]


def _convt_params(c):
    cin = c.inputs[0].shape[0]
    ps = [ParamSpec("weight", (cin, c["out_channels"] // c["groups"]) + as_tuple(c["kernel"], 2))]
    if c["bias"]:
        ps.append(ParamSpec("bias", (c["out_channels"],), "bias"))
    return ps


def _convt_flops(c, outs):
    k = as_tuple(c["kernel"], 2)
    return 2 * c.inputs[0].numel * (c["out_channels"] // c["groups"]) * k[0] * k[1]


def _convt_props():
    props = list(conv_props(2, transpose=True))
    return tuple(props)


def _convt_onnx(ctx):
    """ONNX ConvTranspose(x, W[, B]): W is (in, out/groups, kh, kw)."""
    if spatial_rank(ctx) != 2:
        return None
    w = ctx.param(1)
    if w is None:
        raise LayerError("weight", "the weight is computed, not an initializer")
    if ctx.attr("output_shape"):
        raise LayerError("output_shape", "an explicit output_shape is not modelled")
    g = int(ctx.attr("group", 1))
    ctx.tensor_inputs = [0]
    return {"out_channels": w[1] * g, "kernel": pair(ctx.attr("kernel_shape") or w[2:]),
            "stride": pair(ctx.attr("strides")), "padding": pads(ctx, 2),
            "output_padding": pair(ctx.attr("output_padding"), 0), "dilation": pair(ctx.attr("dilations")),
            "groups": g, "bias": ctx.param(2) is not None}


ConvTranspose2d = register(LayerType(
    name="ConvTranspose2d", family="convolution",
    doc="2-D transposed convolution (learned upsampling).",
    props=_convt_props(), shape=_convt_shape, params=_convt_params, flops=_convt_flops,
    memory=_conv_mem, aliases=("Conv2DTranspose",), torch_ops=("ConvTranspose2d",),
    onnx_ops=("ConvTranspose",), from_onnx=_convt_onnx,
    keeps_for_backward="its input (and the weight)",
))

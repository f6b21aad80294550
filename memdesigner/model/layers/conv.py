"""Convolutions (PyTorch arithmetic; SAME/VALID padding the TensorFlow way)."""

import math

from memdesigner.model.exportspec import module_export, same_padding
from memdesigner.model.layers import _weight_norm
from memdesigner.model.layers._common import amp_casts, as_tuple, conv_props, f_dtype, need_rank, window_out
from memdesigner.model.layers._keras_torch import IMPL, channels_last_strides, keras, kernel_copy, layout_copies
from memdesigner.model.onnxmap import pads, pair, spatial_rank
from memdesigner.model.oprules import In, OpMem, Param, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, TensorSpec, register
from memdesigner.model.torchmap import size_arg


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
        return ps + _weight_norm.param_specs(c, ps[0].shape)
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
    if keras(m):
        return _keras_conv_mem(m)
    dt = f_dtype(m)
    saved = [In(0), Param(0)] if m.records else []
    mem = OpMem(outputs=[T(m.out_elems(0), dt, "output")], out_dtypes=[dt], saved=saved, grad_in=["new"])
    return amp_casts(m, _weight_norm.apply(m, mem))


def _keras_conv_mem(m):
    """A Keras Conv1D/2D/3D (DepthwiseConv2D, SeparableConv2D's halves) on the torch backend: the
    input's layout copies and the kernel's channels_last copy are what the convolution keeps; the
    bias is a separate add, so the raw output and the biased one meet. Without grad each copy dies
    after the convolution: the peak is the raw output plus the larger of the last copy and the
    biased output. A 2-D / 3-D output is channels-last memory."""
    dt = f_dtype(m)
    copies, x = layout_copies(m, to_channels_last=True)
    if m.props["padding"] == "SAME":
        # Keras pads explicitly (F.pad, a copy the convolution then reads) when SAME padding is
        # uneven (an odd total: stride 2 on an even size); even padding goes to the convolution
        spatial = m.in_shapes[0][2:]
        n = len(spatial)
        _, pads = window_out(None, n, spatial, m.props["kernel"], m.props["stride"], "SAME", m.props["dilation"])
        if any(p % 2 for p in pads):
            elems = m.in_shapes[0][0] * m.in_shapes[0][1] * math.prod(s + p for s, p in zip(spatial, pads))
            x = T(elems, m.in_dtypes[0], "input padded for uneven SAME padding")
            copies = copies + [x]
    kc = kernel_copy(m, m.params[0].shape)
    out = T(m.out_elems(0), dt, "output (bias added)")
    bias = m.props["bias"]
    raw = [T(m.out_elems(0), dt, "convolution output before the bias add")] if bias else []
    strides = [channels_last_strides(m.out_shapes[0])] if len(m.out_shapes[0]) >= 4 else None
    if m.records:
        saved = [x, kc or Param(0)]
        temps = raw  # the first layout copy died when the second was made
        mem = OpMem(outputs=[out], out_dtypes=[dt], saved=saved, temps=temps, grad_in=["new"])
    else:
        # the input and kernel copies die with the convolution, before the bias add makes the output
        before = (copies[-1].nbytes if copies else 0) + (kc.nbytes if kc else 0)
        if bias:
            temps = list(raw)
            if before > out.nbytes:
                temps.append(T(before - out.nbytes, "uint8", "input / kernel copies beyond the output they precede"))
        else:
            temps = copies[-1:] + ([kc] if kc else [])
        mem = OpMem(outputs=[out], out_dtypes=[dt], temps=temps, grad_in=["new"])
    mem.out_strides = strides
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


def _conv_from_torch(c):
    """nn.Conv1d / 2d / 3d; padding_mode other than zeros has the same memory."""
    if not c.from_torch_nn:
        return None
    mod = c.module
    if mod.padding_mode != "zeros":
        c.warn(f"padding_mode {mod.padding_mode!r} is imported as zero padding")
    pad = mod.padding.upper() if isinstance(mod.padding, str) else size_arg(mod.padding)
    return {"out_channels": mod.out_channels, "kernel": size_arg(mod.kernel_size), "stride": size_arg(mod.stride),
            "padding": pad, "dilation": size_arg(mod.dilation), "groups": mod.groups, "bias": mod.bias is not None}


def _convt_from_torch(c):
    if not c.from_torch_nn:
        return None
    mod = c.module
    return {"out_channels": mod.out_channels, "kernel": size_arg(mod.kernel_size), "stride": size_arg(mod.stride),
            "padding": size_arg(mod.padding), "output_padding": size_arg(mod.output_padding),
            "dilation": size_arg(mod.dilation), "groups": mod.groups, "bias": mod.bias is not None}


def _conv_export(n):
    def emit(e):
        pad = same_padding(e.props, e.in_shapes[0][1:], n)
        return module_export(e, _weight_norm.wrap_export(e.props, (
            f"nn.Conv{n}d({e.in_shapes[0][0]}, {e.lit('out_channels')}, kernel_size={e.lit('kernel')}, "
            f"stride={e.lit('stride')}, padding={e.value(pad)}, dilation={e.lit('dilation')}, "
            f"groups={e.lit('groups')}, bias={e.lit('bias')})")))
    return emit


def _convt_export(e):
    return module_export(e, f"nn.ConvTranspose2d({e.in_shapes[0][0]}, {e.lit('out_channels')}, "
                            f"kernel_size={e.lit('kernel')}, stride={e.lit('stride')}, padding={e.lit('padding')}, "
                            f"output_padding={e.lit('output_padding')}, groups={e.lit('groups')}, "
                            f"bias={e.lit('bias')}, dilation={e.lit('dilation')})")


def _make_conv(name, n, aliases=(), torch_ops=()):
    return register(LayerType(
        name=name, family="convolution",
        doc=f"{n}-D convolution. groups = in_channels gives a depthwise convolution.",
        props=conv_props(n) + (IMPL, _weight_norm.PROP, _weight_norm.HOOK), shape=_conv_shape(n),
        params=_conv_params(n), flops=_conv_flops(n),
        memory=_conv_mem, aliases=aliases, torch_ops=torch_ops,
        search_words=("conv", "cnn", "convolution", "filter", "kernel") + (("depthwise",) if n == 2 else ()),
        onnx_ops=("Conv",), from_onnx=_conv_onnx(n), to_torch=_conv_export(n), from_torch_module=_conv_from_torch,
        keeps_for_backward="its input (and the weight)",
    ))


Conv1d = _make_conv("Conv1d", 1, ("Conv1D",), ("Conv1d", "conv1d"))
Conv2d = _make_conv("Conv2d", 2, ("Conv2D", "DepthwiseConv2d"), ("Conv2d", "conv2d"))
Conv3d = _make_conv("Conv3d", 3, ("Conv3D",), ("Conv3d", "conv3d"))  # volumes, video: (C, D, H, W)


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


def _keras_convt_mem(m):
    """A Keras Conv2DTranspose on the torch backend: a channels-first copy of the input (kept for
    backward), then conv_transpose2d with padding 0 (the largest output, (in - 1) x stride +
    kernel per side), sliced to Keras's window (views) and a separate bias add. Backward: each
    cropped dimension's slice_backward makes a zero-filled gradient of the size before its crop."""
    dt = f_dtype(m)
    copies, x = layout_copies(m, to_channels_last=False)
    b, cin, *spatial = m.in_shapes[0]
    cout, *outs = m.out_shapes[0][1:]
    k, s, d = as_tuple(m.props["kernel"], 2), as_tuple(m.props["stride"], 2), as_tuple(m.props["dilation"], 2)
    natural = [(n - 1) * st + (kk - 1) * dd + 1 for n, kk, st, dd in zip(spatial, k, s, d)]
    raw = T(b * cout * math.prod(natural), dt, "conv_transpose output before cropping")
    out = T(m.out_elems(0), dt, "output (bias added)")
    if not m.records:
        return amp_casts(m, OpMem(outputs=[out], out_dtypes=[dt], temps=[raw], grad_in=["new"]))
    # the chain of gradients: the incoming one, then one per cropped dimension (the last slice's
    # backward runs first); each lives until the next is made, so two neighbours meet at most
    chain, size = [out.elems], list(outs)
    for i in reversed(range(2)):
        if natural[i] != outs[i]:
            size[i] = natural[i]
            chain.append(b * cout * math.prod(size))
    pair = max((a + c for a, c in zip(chain, chain[1:])), default=chain[0])
    bwd = [T(pair - chain[0], dt, "slice_backward: zero-filled gradients of the uncropped output")] if pair > chain[0] else []
    return amp_casts(m, OpMem(outputs=[out], out_dtypes=[dt], saved=[x, Param(0)], temps=[raw],
                              grad_in=["new"], bwd_temps=bwd))


def _convt_mem(m):
    return _keras_convt_mem(m) if keras(m) else _conv_mem(m)


def _convt_props():
    props = list(conv_props(2, transpose=True)) + [IMPL]
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
    name="ConvTranspose2d", family="convolution", to_torch=_convt_export, from_torch_module=_convt_from_torch,
    doc="2-D transposed convolution (learned upsampling).",
    props=_convt_props(), shape=_convt_shape, params=_convt_params, flops=_convt_flops,
    memory=_convt_mem, aliases=("Conv2DTranspose",), torch_ops=("ConvTranspose2d",),
    onnx_ops=("ConvTranspose",), from_onnx=_convt_onnx,
    keeps_for_backward="its input (and the weight)",
))

"""Pooling and resampling."""

from memdesigner.model.exportspec import module_export, same_padding
from memdesigner.model.layers._common import amp_fp32, as_tuple, need_rank, window_out
from memdesigner.model.layers._keras_torch import IMPL, keras, layout_copies
from memdesigner.model.onnxmap import pads, pair, spatial_rank
from memdesigner.model.oprules import In, OpMem, T, simple
from memdesigner.model.registry import LayerError, LayerType, Prop, TensorSpec, register
from memdesigner.model.torchmap import size_arg


def _pool_props(default_k=2):
    return (
        Prop("kernel", "pair", default_k),
        Prop("stride", "pair", None, optional=True, doc="empty = same as kernel (PyTorch default)"),
        Prop("padding", "pad", 0, doc="a number, or SAME / VALID (TensorFlow style)"),
        Prop("ceil_mode", "bool", False), IMPL,
    )


def _pool_shape(n):
    def rule(c):
        x = need_rank(c, (n + 1,))
        stride = c["stride"] or c["kernel"]
        k = as_tuple(c["kernel"], n)
        if c["padding"] not in ("SAME", "VALID"):
            for kk, pp in zip(k, as_tuple(c["padding"], n)):
                if pp * 2 > kk:
                    raise LayerError("padding", f"{pp} should be at most half the kernel {kk}")
        outs, _ = window_out(c, n, x.shape[1:], c["kernel"], stride, c["padding"], 1, c["ceil_mode"])
        return [TensorSpec((x.shape[0],) + outs)]
    return rule


def _pool_flops(n):
    def rule(c, outs):
        k = 1
        for v in as_tuple(c["kernel"], n):
            k *= v
        return outs[0].numel * k
    return rule


def _pool_onnx(n):
    """MaxPool / AveragePool: ONNX strides default to 1 (PyTorch's to the kernel)."""
    def rule(ctx):
        if spatial_rank(ctx) != n:
            return None
        if pair(ctx.attr("dilations")) != 1:
            raise LayerError("kernel", "dilated pooling")
        if len(ctx.out_shapes) > 1:
            raise LayerError("kernel", "pooling that returns indices")
        ctx.tensor_inputs = [0]
        return {"kernel": pair(ctx.attr("kernel_shape")), "stride": pair(ctx.attr("strides")),
                "padding": pads(ctx, n), "ceil_mode": bool(ctx.attr("ceil_mode", 0))}
    return rule


def _maxpool_mem(m):
    """max_pool*_with_indices: int64 indices of the output's size, kept with the input for backward.

    Without grad the indices are still made and dropped at once, so they count for the inference
    peak.
    """
    out = T(m.out_elems(0), m.float_in, "output")
    idx = T(m.out_elems(0), "int64", "argmax indices")
    # Keras: pools a channels-first copy of a channels-last input (kept for backward in its place)
    copies, x = layout_copies(m, to_channels_last=False) if keras(m) else ([], In(0))
    if m.records:
        return OpMem(outputs=[out], out_dtypes=[out.dtype], saved=[x, idx], grad_in=["new"])
    return OpMem(outputs=[out], out_dtypes=[out.dtype], temps=[idx] + copies, grad_in=["new"])


def _pool_from_torch(c):
    """nn.MaxPool / AvgPool; a dilated max pool or one returning its indices is no such layer."""
    if not c.from_torch_nn:
        return None
    mod = c.module
    if hasattr(mod, "return_indices") and (size_arg(mod.dilation) != 1 or mod.return_indices):
        raise LayerError("dilation", "dilation or return_indices")
    return {"kernel": size_arg(mod.kernel_size), "stride": size_arg(mod.stride or mod.kernel_size),
            "padding": size_arg(mod.padding), "ceil_mode": bool(mod.ceil_mode)}


def _pool_call(c):
    """F.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode) and F.avg_pool2d(x,
    kernel_size, stride, padding, ceil_mode=...); a dilated max pool is no such layer."""
    k = c.arg(1, "kernel_size")
    props = {"kernel": size_arg(k), "stride": size_arg(c.arg(2, "stride", None) or k),
             "padding": size_arg(c.arg(3, "padding", 0)), "ceil_mode": bool(c.kwargs.get("ceil_mode", False))}
    if c.op.startswith("max"):
        if size_arg(c.arg(4, "dilation", 1)) != 1:
            raise LayerError("dilation", "dilated pooling")
        props["ceil_mode"] = bool(c.arg(5, "ceil_mode", False))
    return props


def _adaptive_from_torch(c):
    if not c.from_torch_nn:
        return None
    os_ = c.module.output_size
    if os_ is None or isinstance(os_, (tuple, list)) and any(o is None for o in os_):
        raise LayerError("output_size", "output_size with None")
    return {"output_size": size_arg(os_)}


def _pool_export(name, n):
    def emit(e):
        p = e.props
        pad = p["padding"]
        if pad in ("SAME", "VALID"):
            pad = same_padding(dict(p, stride=p["stride"] or p["kernel"], dilation=1), e.in_shapes[0][1:], n)
        return module_export(e, f"nn.{name}(kernel_size={e.lit('kernel')}, stride={e.value(p['stride'] or p['kernel'])}, "
                                f"padding={e.value(pad)}, ceil_mode={e.lit('ceil_mode')})")
    return emit


def _make_maxpool(name, n, aliases):
    return register(LayerType(
        name=name, family="pooling", doc=f"{n}-D max pooling.",
        props=_pool_props(), shape=_pool_shape(n), flops=_pool_flops(n), memory=_maxpool_mem,
        aliases=aliases, torch_ops=(name, f"max_pool{n}d"), onnx_ops=("MaxPool",), from_onnx=_pool_onnx(n),
        to_torch=_pool_export(name, n), from_torch_module=_pool_from_torch, from_torch_call=_pool_call,
        keeps_for_backward="its input and int64 argmax indices (8 bytes per output element)",
    ))


MaxPool1d = _make_maxpool("MaxPool1d", 1, ("MaxPooling1D",))
MaxPool2d = _make_maxpool("MaxPool2d", 2, ("MaxPooling2D",))
MaxPool3d = _make_maxpool("MaxPool3d", 3, ("MaxPooling3D", "MaxPool3D"))  # volumes, video: (C, D, H, W)


def _avgpool_mem(m):
    copies, x = layout_copies(m, to_channels_last=False) if keras(m) else ([], In(0))
    return simple(m, saved=[x] if m.records else [], temps=[] if m.records else copies)


def _make_avgpool(name, n, aliases):
    return register(LayerType(
        name=name, family="pooling", doc=f"{n}-D average pooling.",
        props=_pool_props(), shape=_pool_shape(n), flops=_pool_flops(n), memory=_avgpool_mem,
        aliases=aliases, torch_ops=(name, f"avg_pool{n}d"), onnx_ops=("AveragePool",), from_onnx=_pool_onnx(n),
        to_torch=_pool_export(name, n), from_torch_module=_pool_from_torch, from_torch_call=_pool_call,
        keeps_for_backward=f"its input (avg_pool{n}d_backward takes it)",
    ))


AvgPool2d = _make_avgpool("AvgPool2d", 2, ("AveragePooling2D",))
AvgPool3d = _make_avgpool("AvgPool3d", 3, ("AveragePooling3D", "AvgPool3D"))  # volumes, video: (C, D, H, W)


def _adaptive_shape(c):
    x = need_rank(c, (3,))
    o = as_tuple(c["output_size"], 2)
    return [TensorSpec((x.shape[0],) + tuple(o))]


def _adaptive_mem(m):
    """Output 1x1 is computed as mean(-1,-2): nothing saved. Otherwise the input is saved."""
    if m.out_shapes[0][-1] == 1 and m.out_shapes[0][-2] == 1:
        return simple(m)
    return simple(m, saved=[In(0)] if m.records else [])


def _gap_onnx(ctx):
    """GlobalAveragePool, or ReduceMean over H and W keeping them: global average pooling."""
    x = ctx.tensor(0)
    if len(x.shape) != 4 or tuple(x.dmap) != (0, 1, 2, 3):
        return None
    if ctx.op == "ReduceMean":
        axes = ctx.attr("axes")
        if axes is None and ctx.x(1).kind == "const":
            axes = [int(a) for a in ctx.const(1).reshape(-1)]
        if sorted(int(a) % 4 for a in (axes or ())) != [2, 3] or not ctx.attr("keepdims", 1):
            return None
    ctx.tensor_inputs = [0]
    return {"output_size": 1}


AdaptiveAvgPool2d = register(LayerType(
    name="AdaptiveAvgPool2d", family="pooling", to_torch=lambda e: module_export(e, f"nn.AdaptiveAvgPool2d({e.lit('output_size')})"),
    from_torch_module=_adaptive_from_torch,
    from_torch_call=lambda c: {"output_size": size_arg(c.arg(1, "output_size"))},
    doc="Average pooling to a fixed output size; output 1 is global average pooling.",
    props=(Prop("output_size", "pair", 1),),
    shape=_adaptive_shape, flops=lambda c, outs: c.inputs[0].numel, memory=_adaptive_mem,
    aliases=("GlobalAvgPool", "GlobalAveragePooling2D", "GlobalAvgPool2d"),
    torch_ops=("AdaptiveAvgPool2d", "adaptive_avg_pool2d"), onnx_ops=("GlobalAveragePool", "ReduceMean"),
    from_onnx=_gap_onnx,
    keeps_for_backward="nothing for a 1x1 output (a mean), else its input",
))


def _upsample_shape(c):
    x = need_rank(c, (2, 3), " (C,L) or (C,H,W)")
    f = c["scale_factor"]
    if c["mode"] == "bilinear" and len(x.shape) != 3:
        raise LayerError("mode", "bilinear needs a (C,H,W) input")
    return [TensorSpec((x.shape[0],) + tuple(int(d * f) for d in x.shape[1:]))]


def _resize_onnx(ctx):
    """Resize / Upsample by one scale factor (from the scales, or the sizes, input)."""
    x = ctx.tensor(0)
    out = ctx.out_shapes[0]
    mode = ctx.attr("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("nearest", "linear"):
        raise LayerError("mode", f"Resize mode {mode!r}")
    factors = {out[i] / x.shape[i] for i in range(2, len(x.shape))}
    if len(factors) != 1 or out[:2] != x.shape[:2]:
        raise LayerError("scale_factor", "a different scale per dim")
    ctx.tensor_inputs = [0]
    return {"scale_factor": float(factors.pop()), "mode": "bilinear" if mode == "linear" else "nearest"}


Upsample = register(LayerType(
    name="Upsample", family="pooling", to_torch=lambda e: module_export(e, f"nn.Upsample(scale_factor={e.lit('scale_factor')}, mode={e.lit('mode')})"), doc="Nearest or bilinear upsampling by a scale factor.",
    props=(Prop("scale_factor", "float", 2.0, min=0.01), Prop("mode", "choice", "nearest",
                                                                 choices=("nearest", "bilinear"))),
    shape=_upsample_shape, flops=lambda c, outs: outs[0].numel * (1 if c["mode"] == "nearest" else 8),
    memory=lambda m: amp_fp32(m, simple(m)), aliases=("UpSampling2D",), torch_ops=("Upsample", "interpolate"),
    onnx_ops=("Resize", "Upsample"), from_onnx=_resize_onnx,
    keeps_for_backward="nothing (only sizes)",
))

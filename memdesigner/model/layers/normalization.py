"""Normalization and dropout."""

from memdesigner.model.exportspec import module_export
from memdesigner.model.layers._common import amp_fp32, fmt, need_rank
from memdesigner.model.layers._keras_torch import IMPL, keras
from memdesigner.model.onnxmap import f32
from memdesigner.model.oprules import In, OpMem, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register
from memdesigner.model.torchmap import PASS


def _stat_dtype(m):
    # CPU kernels keep statistics in the parameter dtype (fp32 under AMP), else the input dtype;
    # CUDA kernels accumulate and keep them in fp32.
    return "float32" if (m.amp or m.backend == "cuda") else m.float_in


def _bn_shape(n):
    def rule(c):
        x = need_rank(c, (1, 2) if n == 1 else (n + 1,))
        return [TensorSpec(x.shape, x.kind)]
    return rule


def _bn_params(c):
    ch = c.inputs[0].shape[0]
    ps = []
    if c["affine"]:
        ps += [ParamSpec("weight", (ch,)), ParamSpec("bias", (ch,), "bias")]
    if c["track_running_stats"]:
        ps += [ParamSpec("running_mean", (ch,), "buffer"), ParamSpec("running_var", (ch,), "buffer")]
        if c["impl"] != "keras_torch":  # Keras keeps moving mean and variance only
            ps.append(ParamSpec("num_batches_tracked", (), "buffer", "int64"))
    return ps


def _bn_mem(m):
    """Training: native_batch_norm returns output, save_mean and save_invstd (C each) and keeps
    them with the input. Eval: only the output."""
    ch = m.in_shapes[0][1]
    out = T(m.in_elems(0), m.float_in, "output")
    if not m.training:
        return OpMem(outputs=[out], out_dtypes=[out.dtype], grad_in=["new"])
    if keras(m) and m.records:
        # Keras: square(x) saves x; (x - mean).mul_(scale) keeps a clone of x - mean; the backward
        # of the moments and of the product makes a second full-size gradient
        full = m.in_elems(0)
        saved = [In(0), T(full, m.float_in, "clone of x - mean"), T(ch, m.float_in, "rsqrt(variance + eps)")]
        return OpMem(outputs=[out], out_dtypes=[out.dtype], saved=saved,
                     grad_in=["new"], bwd_temps=[T(full, m.float_in, "moments' gradient")])
    sd = _stat_dtype(m)
    stats = [T(ch, sd, "save_mean"), T(ch, sd, "save_invstd")]
    if m.records:
        return OpMem(outputs=[out], out_dtypes=[out.dtype], saved=[In(0)] + stats, grad_in=["new"])
    return OpMem(outputs=[out], out_dtypes=[out.dtype], temps=stats, grad_in=["new"])


def _bn_onnx(n):
    """BatchNormalization(x, scale, B, mean, var) as exported for inference; ONNX's momentum is
    the running statistics' weight (1 - PyTorch's momentum)."""
    def rule(ctx):
        r = len(ctx.x(0).shape)
        if r not in ((2, 3) if n == 1 else (n + 2,)):
            return None
        if ctx.attr("training_mode", 0):
            raise LayerError("track_running_stats", "a training-mode BatchNormalization")
        ctx.tensor_inputs = [0]
        return {"eps": f32(ctx.attr("epsilon", 1e-5)), "momentum": f32(1.0 - f32(ctx.attr("momentum", 0.9))),
                "affine": ctx.param(1) is not None, "track_running_stats": ctx.param(3) is not None}
    return rule


_BN_PROPS = (Prop("eps", "float", 1e-5, min=0.0), Prop("momentum", "float", 0.1, min=0.0, max=1.0),
             Prop("affine", "bool", True), Prop("track_running_stats", "bool", True), IMPL)

def _bn_from_torch(c):
    if not c.from_torch_nn:
        return None
    mod = c.module
    mom = mod.momentum
    if mom is None:
        c.warn("momentum None (cumulative average) imported as 0.1")
        mom = 0.1
    return {"eps": float(mod.eps), "momentum": float(mom), "affine": mod.affine,
            "track_running_stats": mod.track_running_stats}


def _ln_from_torch(c):
    if not c.from_torch_nn:
        return None
    mod = c.module
    if mod.elementwise_affine and getattr(mod, "bias", True) is None:
        c.warn("LayerNorm(bias=False) is imported with a bias")
    ns = tuple(mod.normalized_shape)
    return {"normalized_shape": ns if len(ns) > 1 else (), "eps": float(mod.eps),
            "elementwise_affine": mod.elementwise_affine}


def _bn_export(e):
    return module_export(e, f"nn.BatchNorm{len(e.in_shapes[0]) - 1 or 1}d({e.in_shapes[0][0]}, eps={e.lit('eps')}, "
                            f"momentum={e.lit('momentum')}, affine={e.lit('affine')}, "
                            f"track_running_stats={e.lit('track_running_stats')})")


def _ln_export(e):
    ns = tuple(e.props["normalized_shape"]) or (e.in_shapes[0][-1],)
    return module_export(e, f"nn.LayerNorm({e.value(ns[0] if len(ns) == 1 else ns)}, eps={e.lit('eps')}, "
                            f"elementwise_affine={e.lit('elementwise_affine')})")


def _gn_export(e):
    return module_export(e, f"nn.GroupNorm({e.lit('num_groups')}, {e.in_shapes[0][0]}, eps={e.lit('eps')}, "
                            f"affine={e.lit('affine')})")


BatchNorm1d = register(LayerType(
    name="BatchNorm1d", family="normalization", to_torch=_bn_export, from_torch_module=_bn_from_torch, doc="Batch normalization over (C) or (C,L) inputs.",
    search_words=("bn", "batch norm", "batchnorm"),
    props=_BN_PROPS, shape=_bn_shape(1), params=_bn_params, flops=lambda c, o: 4 * c.inputs[0].numel,
    memory=_bn_mem, torch_ops=("BatchNorm1d",), onnx_ops=("BatchNormalization",), from_onnx=_bn_onnx(1),
    keeps_for_backward="its input, plus per-channel mean and inverse std",
))
BatchNorm2d = register(LayerType(
    name="BatchNorm2d", family="normalization", to_torch=_bn_export, from_torch_module=_bn_from_torch, doc="Batch normalization over (C,H,W) inputs.",
    search_words=("bn", "batch norm", "batchnorm"),
    props=_BN_PROPS, shape=_bn_shape(2), params=_bn_params, flops=lambda c, o: 4 * c.inputs[0].numel,
    memory=_bn_mem, aliases=("BatchNormalization",), torch_ops=("BatchNorm2d",), onnx_ops=("BatchNormalization",),
    from_onnx=_bn_onnx(2),
    keeps_for_backward="its input, plus per-channel mean and inverse std",
))
BatchNorm3d = register(LayerType(
    name="BatchNorm3d", family="normalization", to_torch=_bn_export, from_torch_module=_bn_from_torch, doc="Batch normalization over (C,D,H,W) inputs (volumes, video).",
    search_words=("bn", "batch norm", "batchnorm", "3d", "video", "volume"),
    props=_BN_PROPS, shape=_bn_shape(3), params=_bn_params, flops=lambda c, o: 4 * c.inputs[0].numel,
    memory=_bn_mem, torch_ops=("BatchNorm3d",), onnx_ops=("BatchNormalization",), from_onnx=_bn_onnx(3),
    keeps_for_backward="its input, plus per-channel mean and inverse std",
))


def _ln_shape(c):
    x = c.inputs[0]
    ns = tuple(c["normalized_shape"]) if c["normalized_shape"] else (x.shape[-1],)
    if x.shape[-len(ns):] != ns:
        raise LayerError("normalized_shape", f"{fmt(ns)} does not match the end of the input {fmt(x.shape)}")
    return [TensorSpec(x.shape)]


def _ln_ns(c):
    return tuple(c["normalized_shape"]) if c["normalized_shape"] else (c.inputs[0].shape[-1],)


def _ln_params(c):
    if not c["elementwise_affine"]:
        return []
    ns = _ln_ns(c)
    return [ParamSpec("weight", ns), ParamSpec("bias", ns, "bias")]


def _rows(m, ndims):
    n = 1
    for d in m.in_shapes[0][: len(m.in_shapes[0]) - ndims]:
        n *= d
    return n


def _ln_mem(m):
    """native_layer_norm returns output, mean and rstd (one per normalized row); training keeps
    input, mean and rstd."""
    return _with_row_stats(m, _rows(m, len(m.props["normalized_shape"]) or 1))


def _with_row_stats(m, rows):
    """Output plus a mean and rstd per normalized row: kept with the input for backward, or
    dropped at once without grad."""
    sd = _stat_dtype(m)
    stats = [T(rows, sd, "mean"), T(rows, sd, "rstd")]
    out = T(m.in_elems(0), m.float_in, "output")
    if m.records:
        return amp_fp32(m, OpMem(outputs=[out], out_dtypes=[out.dtype], saved=[In(0)] + stats, grad_in=["new"]))
    return amp_fp32(m, OpMem(outputs=[out], out_dtypes=[out.dtype], temps=stats, grad_in=["new"]))


def _ln_onnx(ctx):
    """LayerNormalization(x, scale[, B]) over the dims from ``axis`` on."""
    x = ctx.tensor(0)
    a = int(ctx.attr("axis", -1)) % len(x.shape)
    if a == 0 or x.dmap[a:] != tuple(range(x.drank - (len(x.shape) - a), x.drank)):
        raise LayerError("normalized_shape", "normalizes over the batch or dims the design lays out differently")
    ns = tuple(x.shape[a:])
    ctx.tensor_inputs = [0]
    return {"normalized_shape": ns if len(ns) > 1 else (), "eps": f32(ctx.attr("epsilon", 1e-5)),
            "elementwise_affine": ctx.param(1) is not None}


LayerNorm = register(LayerType(
    name="LayerNorm", family="normalization", to_torch=_ln_export, from_torch_module=_ln_from_torch,
    keeps_layout=True, doc="Layer normalization over the last dimension(s).",
    search_words=("ln", "layer norm", "transformer"),
    props=(Prop("normalized_shape", "ints", (), doc="empty = the last dimension"),
           Prop("eps", "float", 1e-5, min=0.0), Prop("elementwise_affine", "bool", True)),
    shape=_ln_shape, params=_ln_params, flops=lambda c, o: 5 * c.inputs[0].numel, memory=_ln_mem,
    aliases=("LayerNormalization",), torch_ops=("LayerNorm", "layer_norm"), onnx_ops=("LayerNormalization",),
    from_onnx=_ln_onnx,
    keeps_for_backward="its input, plus a mean and rstd per row",
))


def _gn_shape(c):
    x = need_rank(c, (2, 3, 4))
    if x.shape[0] % c["num_groups"]:
        raise LayerError("num_groups", f"{c['num_groups']} does not divide the {x.shape[0]} channels")
    return [TensorSpec(x.shape)]


def _gn_mem(m):
    return _with_row_stats(m, m.in_shapes[0][0] * m.props["num_groups"])


GroupNorm = register(LayerType(
    name="GroupNorm", family="normalization", to_torch=_gn_export,
    from_torch_module=lambda c: {"num_groups": c.module.num_groups, "eps": float(c.module.eps),
                                 "affine": c.module.affine} if c.from_torch_nn else None, doc="Group normalization over channel groups.",
    search_words=("gn", "group norm"),
    props=(Prop("num_groups", "int", 8, min=1), Prop("eps", "float", 1e-5, min=0.0), Prop("affine", "bool", True)),
    shape=_gn_shape,
    params=lambda c: ([ParamSpec("weight", (c.inputs[0].shape[0],)),
                       ParamSpec("bias", (c.inputs[0].shape[0],), "bias")] if c["affine"] else []),
    flops=lambda c, o: 5 * c.inputs[0].numel, memory=_gn_mem, torch_ops=("GroupNorm",),
    onnx_ops=("GroupNormalization", "Add(Mul(Reshape(InstanceNormalization(Reshape(x))),w),b)"),
    from_onnx=lambda ctx: {"num_groups": int(ctx.attr("num_groups")), "eps": f32(ctx.attr("epsilon", 1e-5)),
                           "affine": ctx.param(1) is not None} if ctx.attr("num_groups") else None,
    keeps_for_backward="its input, plus a mean and rstd per (sample, group)",
))


def _dropout_mem(m):
    """CPU: noise = empty_like(x).bernoulli_().div_(1-p); out = x * noise (noise kept, input dtype).
    CUDA: fused native_dropout returns the output and a bool mask (1 byte per element)."""
    p = m.props["p"]
    dt = m.float_in
    if not m.training or p == 0:
        return OpMem(outputs=[In(0)], out_dtypes=[dt], grad_in=["alias"])
    n = m.in_elems(0)
    if m.backend == "cpu" or p >= 1:
        mask = T(n, dt, "dropout noise")
    else:
        mask = T(n, "bool", "dropout mask")
    out = In(0) if m.props["inplace"] else T(n, dt, "output")
    if m.records:
        return OpMem(outputs=[out], out_dtypes=[dt], saved=[mask], grad_in=["new"], elementwise=True)
    return OpMem(outputs=[out], out_dtypes=[dt], temps=[mask], grad_in=["new"], elementwise=True)


def _dropout_call(c):
    """F.dropout(x, p, training, inplace): training=False (traced in eval) is no node."""
    if c.arg(2, "training", True) is False:
        return PASS
    return {"p": float(c.arg(1, "p", 0.5)), "inplace": bool(c.arg(3, "inplace", False)) or c.op.endswith("_")}


Dropout = register(LayerType(
    name="Dropout", family="normalization",
    search_words=("dropout", "regularization"),
    doc="Zeroes elements with probability p in training; identity in inference.",
    props=(Prop("p", "float", 0.5, min=0.0, max=1.0), Prop("inplace", "bool", False)),
    shape=lambda c: [TensorSpec(c.inputs[0].shape, c.inputs[0].kind)], memory=_dropout_mem,
    torch_ops=("Dropout", "dropout", "dropout_", "feature_dropout"), onnx_ops=("Dropout",),
    from_torch_module=lambda c: {"p": float(c.module.p), "inplace": bool(c.module.inplace)} if c.from_torch_nn
    else None, from_torch_call=_dropout_call, keeps_layout=True,
    to_torch=lambda e: module_export(e, f"nn.Dropout(p={e.lit('p')}" + (", inplace=True)" if e.props["inplace"] else ")")),
    from_onnx=lambda ctx: {"p": f32(ctx.scalar(1, float(ctx.attr("ratio", 0.5))))},
    keeps_for_backward="a mask: input-dtype noise on CPU, bool on CUDA",
))

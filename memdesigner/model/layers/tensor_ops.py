"""Tensor operations that models call directly (matmul, transpose, split, indexing, scaling,
learned tokens and position embeddings). Each has its own exact memory rule."""

from memdesigner.model.exportspec import TorchExport
from memdesigner.model.layers._common import amp_casts, f_dtype, fmt
from memdesigner.model.onnxmap import Alias
from memdesigner.model.oprules import In, OpMem, Out, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register


def _dim(c, name, nd):
    d = c[name]
    if d < 0:
        d += nd
    if d <= 0 or d >= nd:
        raise LayerError(name, f"{c[name]} is not a non-batch dimension of a {nd}-D tensor")
    return d


def _transpose_shape(c):
    x = c.inputs[0]
    nd = len(x.shape) + 1
    a, b = _dim(c, "dim0", nd), _dim(c, "dim1", nd)
    s = list(x.shape)
    s[a - 1], s[b - 1] = s[b - 1], s[a - 1]
    return [TensorSpec(tuple(s), x.kind)]


def _view_with(m, strides):
    return OpMem(outputs=[In(0)], out_dtypes=[m.in_dtypes[0]], grad_in=["alias"], out_strides=[strides])


def _transpose_mem(m):
    st = list(m.in_strides[0]) if m.in_strides else None
    if st is None:
        return _view_with(m, None)
    nd = len(st)
    a, b = m.props["dim0"] % nd, m.props["dim1"] % nd
    st[a], st[b] = st[b], st[a]
    return _view_with(m, tuple(st))


def _permute_mem(m):
    if not m.in_strides:
        return _view_with(m, None)
    return _view_with(m, tuple(m.in_strides[0][d] for d in m.props["dims"]))


def design_perm(ctx):
    """A real Transpose in the design's terms: the batch stays first, singleton dims the real
    tensor squeezed stay right after it. Returns (design order, output dmap)."""
    x = ctx.tensor(0)
    rank = len(x.shape)
    perm = [int(p) for p in (ctx.attr("perm") or reversed(range(rank)))]
    if sorted(perm) != list(range(rank)):
        raise LayerError("dims", f"bad permutation {perm}")
    src = [x.dmap[p] for p in perm]  # design dims in the real output order
    squeezed = [d for d in range(x.drank) if d not in x.dmap]
    order = [0] + squeezed + [d for d in src if d != 0]
    return order, tuple(order.index(d) for d in src)


def _transpose_onnx(ctx):
    order, dmap = design_perm(ctx)
    if order == list(range(len(order))):
        return Alias(dmap)
    swaps = [i for i in range(len(order)) if order[i] != i]
    if len(swaps) != 2:
        return None  # a Permute
    ctx.out_dmap = dmap
    return {"dim0": swaps[0], "dim1": swaps[1]}


def _permute_onnx(ctx):
    order, dmap = design_perm(ctx)
    if order == list(range(len(order))):
        return Alias(dmap)
    ctx.out_dmap = dmap
    return {"dims": tuple(order)}


def _slice_export(e):
    p = e.props
    lead = [":"] * p["dim"] if p["dim"] >= 0 else ["..."]
    trail = [] if p["dim"] >= 0 else [":"] * (-p["dim"] - 1)
    return TorchExport(f"{e.x}[{', '.join(lead + [_slice_text(p)] + trail)}]")


def _split_export(e):
    """torch.chunk's tuple; one chunk is its element."""
    call = f"torch.chunk({e.x}, {e.lit('chunks')}, dim={e.lit('dim')})"
    return TorchExport(call, outputs=e.props["chunks"]) if e.props["chunks"] > 1 else TorchExport(call + "[0]")


Transpose = register(LayerType(
    name="Transpose", family="tensor", to_torch=lambda e: TorchExport(f"{e.x}.transpose({e.lit('dim0')}, {e.lit('dim1')})"), doc="Swap two dimensions (a view; later reshapes may copy).",
    props=(Prop("dim0", "int", 1), Prop("dim1", "int", 2)), shape=_transpose_shape, memory=_transpose_mem,
    torch_ops=("transpose",), onnx_ops=("Transpose",), from_onnx=_transpose_onnx, keeps_for_backward="nothing",
))


def _permute_shape(c):
    x = c.inputs[0]
    p = tuple(c["dims"])
    nd = len(x.shape) + 1
    if sorted(p) != list(range(nd)) or p[0] != 0:
        raise LayerError("dims", f"{fmt(p)} must be a permutation of 0..{nd - 1} keeping the batch (0) first")
    full = (0,) + x.shape
    return [TensorSpec(tuple(full[i] for i in p[1:]), x.kind)]


Permute = register(LayerType(
    name="Permute", family="tensor", to_torch=lambda e: TorchExport(f"{e.x}.permute({', '.join(str(d) for d in e.props['dims'])})"), doc="Reorder dimensions (a view), batch stays first.",
    props=(Prop("dims", "ints", (0, 2, 1), doc="a permutation including the batch dimension 0"),),
    shape=_permute_shape, memory=_permute_mem, torch_ops=("permute",), onnx_ops=("Transpose",),
    from_onnx=_permute_onnx, keeps_for_backward="nothing",
))


def _split_shape(c):
    x = c.inputs[0]
    nd = len(x.shape) + 1
    d = _dim(c, "dim", nd)
    n = c["chunks"]
    size = x.shape[d - 1]
    if size % n:
        raise LayerError("chunks", f"{n} does not divide dimension {d} of size {size}")
    s = list(x.shape)
    s[d - 1] = size // n
    return [TensorSpec(tuple(s), x.kind) for _ in range(n)]


def _split_mem(m):
    """Views of the input; backward stacks the pieces' gradients into one new input-sized tensor."""
    n = len(m.out_shapes)
    st = m.in_strides[0] if m.in_strides else None
    return OpMem(outputs=[In(0)] * n, out_dtypes=[m.in_dtypes[0]] * n, grad_in=["new"], out_strides=[st] * n)


def _split_onnx(ctx):
    """Split into equal pieces (the split sizes as an input, an attribute or num_outputs)."""
    x = ctx.tensor(0)
    axis = int(ctx.attr("axis", 0))
    n = len(ctx.out_shapes)
    sizes = ctx.attr("split")
    if sizes is None and ctx.x(1).kind == "const":
        sizes = [int(s) for s in ctx.const(1).reshape(-1)]
    if sizes is not None and len(set(sizes)) != 1:
        raise LayerError("chunks", f"split into unequal sizes {list(sizes)}")
    ctx.tensor_inputs = [0]
    ctx.out_dmap = tuple(x.dmap)
    return {"chunks": n, "dim": ctx.ddim(axis)}


Split = register(LayerType(
    name="Split", family="tensor", to_torch=_split_export, doc="Split into equal chunks along a dimension (chunk / unbind).",
    props=(Prop("chunks", "int", 3, min=1, max=64), Prop("dim", "int", -1)),
    shape=_split_shape, memory=_split_mem, torch_ops=("chunk", "split", "unbind"), onnx_ops=("Split",),
    from_onnx=_split_onnx,
    keeps_for_backward="nothing", n_outputs=-1,
))


def _drop(strides, d):
    d %= len(strides)
    return tuple(x for i, x in enumerate(strides) if i != d)


def _select_shape(c):
    x = c.inputs[0]
    nd = len(x.shape) + 1
    d = _dim(c, "dim", nd)
    i = c["index"]
    size = x.shape[d - 1]
    if not -size <= i < size:
        raise LayerError("index", f"{i} is out of range for dimension {d} of size {size}")
    return [TensorSpec(x.shape[: d - 1] + x.shape[d:], x.kind)]


def _select_onnx(ctx):
    """Gather(x, i) with one constant index on a tensor: x[:, i] (a view)."""
    x = ctx.x(0)
    if x.kind != "tensor" or ctx.x(1).kind != "const" or ctx.const(1).size != 1 or ctx.const(1).ndim != 0:
        return None
    axis = int(ctx.attr("axis", 0)) % len(x.shape)
    ctx.tensor_inputs = [0]
    ctx.out_dmap = _drop_real(x.dmap, axis)
    return {"dim": ctx.ddim(axis), "index": int(ctx.const(1).reshape(-1)[0])}


def _drop_real(dmap, real_d):
    """dmap after real dim ``real_d`` and its design dim are removed."""
    gone = dmap[real_d]
    return tuple(d - (1 if d > gone else 0) for i, d in enumerate(dmap) if i != real_d)


Select = register(LayerType(
    name="Select", family="tensor", to_torch=lambda e: TorchExport(f"{e.x}[{', '.join([':'] * e.props['dim'] + [str(e.props['index'])])}]"), doc="Pick one index along a dimension, e.g. x[:, 0] (a view).",
    props=(Prop("dim", "int", 1), Prop("index", "int", 0)), shape=_select_shape,
    memory=lambda m: OpMem(outputs=[In(0)], out_dtypes=[m.in_dtypes[0]], grad_in=["new"],
                           out_strides=[_drop(m.in_strides[0], m.props["dim"]) if m.in_strides else None]),
    torch_ops=("select", "getitem"), onnx_ops=("Gather",), from_onnx=_select_onnx, keeps_for_backward="nothing (backward scatters into a zero tensor)",
))


def _contiguous_mem(m):
    """x.contiguous() copies only a non-contiguous tensor; x.clone() (always_copy) always does.
    Either way the gradient passes through."""
    if m.props["always_copy"] or not m.contiguous(0):
        return OpMem(outputs=[T(m.in_elems(0), m.in_dtypes[0], "copy")], out_dtypes=[m.in_dtypes[0]],
                     grad_in=["alias"], elementwise=m.props["always_copy"] and m.contiguous(0))
    return OpMem(outputs=[In(0)], out_dtypes=[m.in_dtypes[0]], grad_in=["alias"])


def _clone_onnx(ctx):
    """Concat of a single tensor (torch.cat([x])) still copies it."""
    if len(ctx.inputs) != 1 or ctx.x(0).kind != "tensor":
        return None
    return {"always_copy": True}


Contiguous = register(LayerType(
    name="Contiguous", family="tensor",
    doc="x.contiguous(): a copy when the input is laid out non-contiguously (after a transpose); "
        "always_copy = x.clone() or torch.cat of a single tensor.",
    props=(Prop("always_copy", "bool", False, doc="copy even a contiguous input (clone)"),),
    shape=lambda c: [c.inputs[0]], memory=_contiguous_mem, torch_ops=("contiguous", "clone"),
    onnx_ops=("Concat",), from_onnx=_clone_onnx,
    to_torch=lambda e: TorchExport(f"{e.x}.clone()" if e.props["always_copy"] else f"{e.x}.contiguous()"),
    aliases=("Clone",), keeps_for_backward="nothing",
))


def _slice_shape(c):
    x = c.inputs[0]
    nd = len(x.shape) + 1
    d = _dim(c, "dim", nd)
    size = x.shape[d - 1]
    start, end = c["start"], c["end"]
    start = max(0, start + size if start < 0 else start)
    end = size if end is None else min(size, end + size if end < 0 else end)
    if end <= start:
        raise LayerError("end", f"slice {c['start']}:{c['end']} of a dimension of size {size} is empty")
    s = list(x.shape)
    s[d - 1] = end - start
    return [TensorSpec(tuple(s), x.kind)]


def _slice_mem(m):
    """x[:, a:b]: a view with the input's strides (no copy); backward scatters into zeros."""
    return OpMem(outputs=[In(0)], out_dtypes=[m.in_dtypes[0]], grad_in=["new"],
                 out_strides=[m.in_strides[0] if m.in_strides else None])


def _slice_onnx(ctx):
    """Slice with constant starts/ends on one axis, step 1: x[:, a:b] (a view)."""
    x = ctx.tensor(0)
    starts = [int(v) for v in ctx.const(1).reshape(-1)]
    ends = [int(v) for v in ctx.const(2).reshape(-1)]
    axes = [int(v) for v in ctx.const(3).reshape(-1)] if ctx.x(3).kind != "none" else list(range(len(starts)))
    steps = [int(v) for v in ctx.const(4).reshape(-1)] if ctx.x(4).kind != "none" else [1] * len(starts)
    real = []
    for a, s, e, st in zip(axes, starts, ends, steps):
        size = x.shape[a]
        if st == 1 and s in (0, -size) and e >= size:
            continue  # the whole axis
        real.append((a, s, e, st))
    if not real:
        return Alias(tuple(x.dmap))
    if len(real) > 1 or real[0][3] != 1:
        raise LayerError("dim", "a slice over several axes or with a step")
    a, s, e, _ = real[0]
    ctx.tensor_inputs = [0]
    return {"dim": ctx.ddim(a), "start": s, "end": None if e >= x.shape[a] else e}


def _slice_text(p) -> str:
    return f"{p['start']}:{'' if p['end'] is None else p['end']}"


Slice = register(LayerType(
    name="Slice", family="tensor", doc="A range along one dimension, e.g. x[:, :3] (a view).",
    props=(Prop("dim", "int", 1), Prop("start", "int", 0), Prop("end", "int", None, optional=True,
                                                                 doc="empty = to the end")),
    shape=_slice_shape, memory=_slice_mem, torch_ops=("slice",), onnx_ops=("Slice",), from_onnx=_slice_onnx,
    to_torch=_slice_export,
    keeps_for_backward="nothing (backward scatters into a zero tensor)",
))


def _scale_mem(m):
    return OpMem(outputs=[T(m.in_elems(0), m.float_in, "scaled")], out_dtypes=[m.float_in], grad_in=["new"],
                 elementwise=True)


def _scale_onnx(ctx):
    """x * c or x / c with a constant scalar c."""
    pos = [i for i in range(2) if ctx.x(i).kind == "tensor"]
    if len(pos) != 1 or ctx.x(1 - pos[0]).kind != "const" or ctx.const(1 - pos[0]).size != 1:
        return None
    c = float(ctx.const(1 - pos[0]).reshape(-1)[0])
    if ctx.op == "Div":
        if pos[0] != 0 or c == 0:
            return None
        c = 1.0 / c
    ctx.tensor_inputs = [pos[0]]
    ctx.out_dmap = tuple(ctx.x(pos[0]).dmap)
    return {"factor": c}


Scale = register(LayerType(
    name="Scale", family="tensor", to_torch=lambda e: TorchExport(f"{e.x} * {e.lit('factor')}"), doc="Multiply by a constant (e.g. q * head_dim**-0.5).",
    props=(Prop("factor", "float", 1.0),), shape=lambda c: [c.inputs[0]], memory=_scale_mem,
    flops=lambda c, o: o[0].numel, torch_ops=("mul_scalar",), onnx_ops=("Mul", "Div"), from_onnx=_scale_onnx,
    keeps_for_backward="nothing",
))


def _matmul_shape(c):
    a, b = c.inputs[0].shape, c.inputs[1].shape
    if len(a) < 2 or len(b) < 2:
        raise LayerError("inputs", f"needs two inputs of at least 2-D per sample, got {fmt(a)} and {fmt(b)}")
    if a[-1] != b[-2]:
        raise LayerError("inputs", f"{fmt(a)} @ {fmt(b)}: inner sizes {a[-1]} and {b[-2]} differ")
    if a[:-2] != b[:-2]:
        raise LayerError("inputs", f"{fmt(a)} @ {fmt(b)}: leading dimensions differ")
    return [TensorSpec(a[:-1] + (b[-1],))]


def _matmul_mem(m):
    """bmm on operands reshaped to 3-D: an operand whose strides do not allow that view is copied,
    and the copy is what backward keeps. Each operand is kept for the other's gradient."""
    dt = f_dtype(m)
    ops = []
    for i in range(2):
        shp = m.in_shapes[i]
        # 4-D and up are folded to 3-D for bmm (a copy unless viewable); 2-D/3-D run as they are
        if len(shp) <= 3 or m.viewable(i, (-1,) + tuple(shp[-2:])):
            ops.append(In(i))
        else:
            # under autocast the fp32 operand is cast first (keeping its layout), then copied
            cdt = m.amp if (m.amp and m.in_dtypes[i] == "float32") else m.in_dtypes[i]
            ops.append(T(m.in_elems(i), cdt, f"contiguous copy of operand {i}"))
    saved = []
    if m.records:
        if m.in_rg[1]:
            saved.append(ops[0])
        if m.in_rg[0]:
            saved.append(ops[1])
    temps = [t for t in ops if isinstance(t, T) and t not in saved]
    mem = OpMem(outputs=[T(m.out_elems(0), dt, "product")], out_dtypes=[dt], saved=saved, temps=temps,
                grad_in=["new", "new"])
    return amp_casts(m, mem, n_inputs=2)


def _matmul_onnx(ctx):
    """A product of two activations whose matrix dims are the design's last two."""
    a, b = ctx.x(0), ctx.x(1)
    if a.kind != "tensor" or b.kind != "tensor":
        return None
    if len(a.shape) != len(b.shape) or len(a.shape) < 3:
        raise LayerError("inputs", "operands of different rank")
    for v in (a, b):
        if tuple(v.dmap[-2:]) != (v.drank - 2, v.drank - 1):
            raise LayerError("inputs", "matrix dims are not the last two")
    return {}


MatMul = register(LayerType(
    name="MatMul", family="tensor", to_torch=lambda e: TorchExport(f"{e.x} @ {e.inputs[1]}"), doc="Batched matrix product a @ b (attention scores, attn @ v).",
    min_inputs=2, max_inputs=2, shape=_matmul_shape, memory=_matmul_mem,
    flops=lambda c, o: 2 * o[0].numel * c.inputs[0].shape[-1], input_names=("a", "b"),
    torch_ops=("matmul", "bmm"), onnx_ops=("MatMul",), from_onnx=_matmul_onnx, keeps_for_backward="both operands (copies if they were non-contiguous)",
))


def _mean_shape(c):
    x = c.inputs[0]
    nd = len(x.shape) + 1
    d = _dim(c, "dim", nd)
    s = list(x.shape)
    if c["keepdim"]:
        s[d - 1] = 1
    else:
        del s[d - 1]
    return [TensorSpec(tuple(s))]


def _max_shape(c):
    out = _mean_shape(c)[0]
    return [out, TensorSpec(out.shape, "int64")]


def _max_mem(m):
    """torch.max(x, dim) returns values and int64 argmax indices; backward scatters the gradient
    into an input-sized zero tensor through the indices, so the indices are kept."""
    vals = T(m.out_elems(0), m.float_in, "max values")
    idx = T(m.out_elems(1), "int64", "argmax indices")
    if m.records:
        return OpMem(outputs=[vals, idx], out_dtypes=[m.float_in, "int64"], saved=[Out(1)], grad_in=["new"])
    return OpMem(outputs=[vals, idx], out_dtypes=[m.float_in, "int64"], grad_in=["new"])


def _reduce_axis(ctx):
    axes = ctx.attr("axes")
    if axes is None and ctx.x(1).kind == "const":
        axes = [int(a) for a in ctx.const(1).reshape(-1)]
    if not axes or len(axes) != 1:
        return None
    return int(axes[0]) % len(ctx.x(0).shape)


def _reduce_onnx(ctx):
    """ReduceMean / ReduceMax over one axis (max keeps argmax indices, as torch.max(x, dim))."""
    a = _reduce_axis(ctx)
    if a is None:
        return None
    x = ctx.tensor(0)
    keep = bool(ctx.attr("keepdims", 1))
    ctx.tensor_inputs = [0]
    ctx.out_dmap = tuple(x.dmap) if keep else _drop_real(x.dmap, a)
    return {"dim": ctx.ddim(a), "keepdim": keep}


Max = register(LayerType(
    name="Max", family="tensor", doc="Maximum over one dimension with its indices (torch.max(x, dim)).",
    props=(Prop("dim", "int", 1), Prop("keepdim", "bool", False)), shape=_max_shape, memory=_max_mem,
    flops=lambda c, o: c.inputs[0].numel, n_outputs=2, torch_ops=("max", "min"), onnx_ops=("ReduceMax",),
    from_onnx=_reduce_onnx,
    to_torch=lambda e: TorchExport(f"torch.max({e.x}, dim={e.lit('dim')}, keepdim={e.lit('keepdim')})", outputs=2),
    keeps_for_backward="the int64 argmax indices", input_names=(),
))


Mean = register(LayerType(
    name="Mean", family="tensor", to_torch=lambda e: TorchExport(f"{e.x}.mean(dim={e.lit('dim')}" + (", keepdim=True)" if e.props["keepdim"] else ")")), doc="Mean over one dimension (token pooling).",
    props=(Prop("dim", "int", 1), Prop("keepdim", "bool", False)), shape=_mean_shape,
    memory=lambda m: OpMem(outputs=[T(m.out_elems(0), m.float_in, "mean")], out_dtypes=[m.float_in],
                           grad_in=["new"]),
    flops=lambda c, o: c.inputs[0].numel, torch_ops=("mean",), onnx_ops=("ReduceMean",), from_onnx=_reduce_onnx,
    keeps_for_backward="nothing",
))


def _cls_shape(c):
    x = c.inputs[0]
    if len(x.shape) != 2:
        raise LayerError("inputs", f"expects (tokens, dim) per sample, got {fmt(x.shape)}")
    return [TensorSpec((x.shape[0] + c["tokens"], x.shape[1]))]


def _promoted(m):
    """x op parameter follows type promotion: an fp32 parameter (AMP) makes the result fp32."""
    return "float32" if m.amp else m.float_in


def _cls_mem(m):
    dt = _promoted(m)
    d = m.in_shapes[0][-1]
    return OpMem(outputs=[T(m.out_elems(0), dt, "tokens with class token")], out_dtypes=[dt],
                 grad_in=["alias"], bwd_temps=[T(m.batch * m.props["tokens"] * d, dt, "expanded token gradient")])


def _cls_onnx(ctx):
    """Concat([token parameter expanded over the batch, x], axis=1)."""
    p = ctx.param(0)
    x = ctx.x(1)
    if p is None or len(ctx.inputs) != 2 or x.kind != "tensor" or len(x.shape) != 3 or len(p) != 3:
        return None
    if int(ctx.attr("axis", 0)) % 3 != 1 or tuple(x.dmap) != (0, 1, 2):
        return None
    ctx.tensor_inputs = [1]
    return {"tokens": int(p[1])}


ClassToken = register(LayerType(
    name="ClassToken", family="tensor", to_torch=lambda e: TorchExport(
        f"torch.cat([self.{e.attr}.expand({e.x}.shape[0], -1, -1), {e.x}], dim=1)",
        init=[f"self.{e.attr} = nn.Parameter(torch.zeros(1, {e.lit('tokens')}, {e.in_shapes[0][-1]}))"]), doc="Prepends learned tokens: cat([cls.expand(B,-1,-1), x], 1).",
    props=(Prop("tokens", "int", 1, min=1),), shape=_cls_shape,
    params=lambda c: [ParamSpec("cls_token", (1, c["tokens"], c.inputs[0].shape[1]))],
    memory=_cls_mem, torch_ops=("cls_token",), onnx_ops=("Concat",), from_onnx=_cls_onnx, keeps_for_backward="nothing",
))


def _pos_mem(m):
    dt = _promoted(m)
    return OpMem(outputs=[T(m.out_elems(0), dt, "x + pos_embed")], out_dtypes=[dt], grad_in=["alias"])


def _pos_onnx(ctx):
    """x + a parameter of x's per-sample shape (a learned position embedding)."""
    pos = [i for i in range(2) if ctx.x(i).kind == "tensor"]
    if len(pos) != 1 or ctx.param(1 - pos[0]) is None:
        return None
    x, p = ctx.x(pos[0]), ctx.param(1 - pos[0])
    if p not in ((1,) + tuple(x.shape[1:]), tuple(x.shape[1:])):
        return None
    n = 1
    for d in p:
        n *= d
    if ctx.x(1 - pos[0]).src_numel != n:
        # rows of a larger table (wpe(arange(t)) folded): the table is the parameter, not x's shape
        raise LayerError("inputs", f"adds {p} rows of a larger parameter table")
    ctx.tensor_inputs = [pos[0]]
    return {}


PositionEmbedding = register(LayerType(
    name="PositionEmbedding", family="tensor", to_torch=lambda e: TorchExport(
        f"{e.x} + self.{e.attr}", init=[f"self.{e.attr} = nn.Parameter(torch.zeros(1, {', '.join(str(d) for d in e.in_shapes[0])}))"]), doc="Adds a learned (tokens, dim) embedding: x + pos.",
    search_words=("positional encoding", "position embedding", "transformer", "vit"),
    shape=lambda c: [c.inputs[0]],
    params=lambda c: [ParamSpec("pos_embed", (1,) + c.inputs[0].shape)],
    memory=_pos_mem, flops=lambda c, o: o[0].numel, torch_ops=("pos_embed",), onnx_ops=("Add",), from_onnx=_pos_onnx,
    keeps_for_backward="nothing",
))


def _generic_shape(c):
    kind = "int64" if c["dtype"] == "int64" else ("bool" if c["dtype"] == "bool" else "float")
    return [TensorSpec(tuple(c["out_shape"]), kind)]


FROZEN_SCALE_OPS = ("mul",)  # traced ops of a parameter and one input whose input only its weight needs


def _generic_mem(m):
    """Untraced: the output is new and (saves_input) every input is kept. Traced (the importer ran
    the op on fake tensors): the output is a view of ``alias_input`` or new (of a fixed size when
    ``batch_free``), and backward keeps exactly the inputs, output and new bytes autograd saved."""
    kind = m.out_kinds[0]
    dt = m.float_in if kind == "float" else kind
    p = m.props
    grad_in = ["new"] * len(m.in_shapes)
    if not p["traced"]:
        saved = [In(i) for i in range(len(m.in_shapes))] if (m.records and p["saves_input"]) else []
        return OpMem(outputs=[T(m.out_elems(0), dt, "output")], out_dtypes=[dt], saved=saved, grad_in=grad_in)
    a = p["alias_input"] if m.training else p["eval_alias_input"]
    if 0 <= a < len(m.in_shapes):
        out = In(a)
        dt = m.in_dtypes[a]
    else:
        n = p["out_elems"] if p["batch_free"] else m.out_elems(0)
        out = T(n, dt, "output")
    saved = []
    # ``weight * x`` (an RMSNorm's scale) saved x for the weight's gradient only: a frozen weight
    # (fine-tuning) keeps nothing, as MulBackward0 saves an operand only when the other needs grad
    frozen_scale = p["params"] and not m.has_trainable and p["op"] in FROZEN_SCALE_OPS
    if m.records:
        for tok in str(p["saved_inputs"]).split(","):
            tok = tok.strip()
            if tok.lstrip("-").isdigit():
                i = int(tok)
                if i == -1:
                    saved.append(Out(0))
                elif i < len(m.in_shapes) and not frozen_scale:
                    saved.append(In(i))
        extra = p["saved_bytes_per_sample"] * m.batch + p["saved_bytes_fixed"]
        if extra:
            saved.append(T(extra, "uint8", "tensors its backward saves (traced)"))
    # a parameter broadcast over the batch (layer scale, a weight passed to a fused function)
    # gets its gradient by reducing an output-sized product
    bwd = [T(m.out_elems(0), dt, "parameter gradient before the reduction")] if m.has_trainable else []
    if p["bwd_traced"] and m.records:
        # traced: what its backward held beyond the gradients it returned (that reduction too)
        tb_bwd = p["bwd_temp_bytes_per_sample"] * m.batch + p["bwd_temp_bytes_fixed"]
        bwd = [T(tb_bwd, "uint8", "storages that live and die inside its backward (traced)")] if tb_bwd > 0 else []
    ev = p.get("eval_out_strides")
    st = tuple(p["out_strides"] if m.training or ev is None else ev)
    # a new output laid out otherwise, or a view whose strides are not the input's (an expand's 0s)
    strides = [st] if (st and len(st) == len(m.out_shapes[0])) else None
    if m.training:
        tb = p["temp_bytes_per_sample"] * m.batch + p["temp_bytes_fixed"]
        if not m.records:  # what the recording run saved is made and dropped without autograd
            tb += p["saved_bytes_per_sample"] * m.batch + p["saved_bytes_fixed"]
    else:  # module.eval(): traced again in eval mode without autograd
        tb = p["eval_temp_bytes_per_sample"] * m.batch + p["eval_temp_bytes_fixed"]
    temps = [T(tb, "uint8", "storages that live and die inside the op (traced)")] if tb else []
    mem = OpMem(outputs=[out], out_dtypes=[dt], saved=saved, grad_in=grad_in, bwd_temps=bwd, temps=temps)
    if strides:
        mem.out_strides = strides
    return mem


CALL_DOC = """the PyTorch call this node stands for, as JSON (empty: unknown; the export writes a zeros
placeholder): {"kind": "function" | "method" | "module", "target": import path ("torch.einsum",
"torch.nn.functional.max_pool1d", "torch.ops.aten.ne.Scalar", "operator.mul"), a method name
("squeeze") or a torch.nn class ("torch.nn.LayerNorm"), "args": [element...], "kwargs": {name:
element}, "init": {name: constant} (module: its constructor arguments), "tensors": [{"shape": [...],
"dtype": "torch.float32", "param": bool (an nn.Parameter, else a buffer), "grad": bool}] (the
tensors the node owns)}. An element is a constant (number, string, bool, null, a JSON list),
{"tuple": [element...]}, {"slice": [start, stop, step]}, {"ellipsis": true}, {"torch": "torch.float32"}
(a dtype, layout or memory format), {"float": "inf"}, {"device": true} (the input's device),
{"in": k} (the node's k-th input; "dmap": [design dim of each real dim] when the design lays it out
otherwise), {"input": 0} (the model's input), {"tensor": j} (owned tensor j), {"shared": node id,
"tensor": j} (tensor j of another Generic node) or {"call": {kind, target, args, kwargs}} (a nested
call computing a size or a view of a tensor)."""


Generic = register(LayerType(
    name="Generic", family="generic",
    doc="An op memdesigner has no rule for: its output (traced shape and dtype) still counts.",
    props=(Prop("op", "str", "unknown"), Prop("out_shape", "shape", (1,)),
           Prop("dtype", "choice", "float", choices=("float", "int64", "bool")),
           Prop("saves_input", "bool", True, doc="assume backward keeps the inputs (conservative)"),
           Prop("params", "int", 0, min=0, doc="trainable parameters of the op (weights, gradients and "
                                               "optimizer state count them)"),
           Prop("traced", "bool", False, doc="the rule below was measured by running the op in PyTorch"),
           Prop("alias_input", "int", -1, min=-1, doc="traced: the output is a view of this input (-1: new)"),
           Prop("batch_free", "bool", False, doc="traced: the output has out_elems elements whatever the batch"),
           Prop("out_elems", "int", 0, min=0, doc="traced, batch_free: the output's elements"),
           Prop("out_strides", "ints", (), doc="traced: the output's strides when it is not contiguous "
                                                "(a view's too: an expand's are 0 on the broadcast dims)"),
           Prop("temp_bytes_per_sample", "int", 0, min=0, doc="traced: bytes alive only inside the op, per sample"),
           Prop("temp_bytes_fixed", "int", 0, min=0, doc="traced: bytes alive only inside the op, whatever the batch"),
           Prop("eval_alias_input", "int", -1, min=-1, doc="traced in eval mode: the output is a view of this input"),
           Prop("eval_temp_bytes_per_sample", "int", 0, min=0, doc="traced in eval mode: transient bytes per sample"),
           Prop("eval_temp_bytes_fixed", "int", 0, min=0, doc="traced in eval mode: transient bytes, fixed"),
           Prop("eval_out_strides", "ints", None, optional=True,
                doc="traced in eval mode: the output's strides there (empty: contiguous; unset: out_strides)"),
           Prop("saved_inputs", "str", "", doc="traced: inputs autograd saves (comma-separated, -1 = output)"),
           Prop("saved_bytes_per_sample", "int", 0, min=0, doc="traced: new bytes saved per sample"),
           Prop("saved_bytes_fixed", "int", 0, min=0, doc="traced: new bytes saved whatever the batch"),
           Prop("bwd_traced", "bool", False, doc="traced: its backward ran too (the two fields below)"),
           Prop("bwd_temp_bytes_per_sample", "int", 0,
                doc="traced: bytes its backward holds beyond the gradients it returns, per sample"),
           Prop("bwd_temp_bytes_fixed", "int", 0,
                doc="traced: bytes its backward holds beyond the gradients it returns, fixed (may be < 0)"),
           Prop("call", "str", "", doc=CALL_DOC)),
    min_inputs=0, max_inputs=None, shape=_generic_shape, memory=_generic_mem,
    params=lambda c: [ParamSpec("weight", (c["params"],))] if c["params"] else [],
    keeps_for_backward="assumed: its inputs",
    no_import="the importers' fallback for ops no registration maps (exported as its recorded call, or a zeros "
              "placeholder without one)",
))

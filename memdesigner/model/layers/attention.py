"""Attention. MultiHeadAttention follows nn.MultiheadAttention(batch_first=True) for
self-attention; ScaledDotProductAttention takes q, k, v of shape (heads, tokens, head_dim)."""

from memdesigner.model.exportspec import TorchExport
from memdesigner.model.layers._common import amp_casts, fmt
from memdesigner.model.layers._keras_torch import IMPL, keras
from memdesigner.model.oprules import In, OpMem, Out, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register


def _mha_shape(c):
    x = c.inputs[0]
    if len(x.shape) != 2:
        raise LayerError("inputs", f"expects (tokens, embed_dim) per sample, got {fmt(x.shape)}")
    if not c["head_dim"] and x.shape[1] % c["num_heads"]:
        raise LayerError("num_heads", f"{c['num_heads']} does not divide embed_dim {x.shape[1]}")
    if len(c.inputs) > 1 and c.inputs[1].shape != (x.shape[0],):
        raise LayerError("inputs", f"key_padding_mask {fmt(c.inputs[1].shape)} does not fit ({x.shape[0]},) "
                                   "per sample")
    return [TensorSpec(x.shape)]


def _inner(c, e: int) -> int:
    """Width of the projected q / k / v: heads x head_dim (Keras's key_dim), else embed_dim."""
    return c["num_heads"] * c["head_dim"] if c["head_dim"] else e


def _mha_params(c):
    e = c.inputs[0].shape[1]
    inner = _inner(c, e)
    ps = [ParamSpec("in_proj_weight", (3 * inner, e))]
    if c["bias"]:
        ps.append(ParamSpec("in_proj_bias", (3 * inner,), "bias"))
    ps.append(ParamSpec("out_proj.weight", (e, inner)))
    if c["bias"]:
        ps.append(ParamSpec("out_proj.bias", (e,), "bias"))
    return ps


def _mha_flops(c, o):
    n, e = c.inputs[0].shape
    i = _inner(c, e)
    return 2 * n * e * 3 * i + 2 * 2 * n * n * i + 2 * n * i * e


def _keras_mha_mem(m):
    """Keras's MultiHeadAttention on the torch backend (no dropout: ``ops.dot_product_attention``):
    three EinsumDense projections, each a raw einsum and a separate bias add (the biased q, k, v
    are locals of ``call``: alive to its end); contiguous (B, heads, T, D) copies of q, k, v for
    SDPA (kept by it with its output and a float32 logsumexp); the output projection reads a
    copy of the transposed attention output, then adds its bias. Without grad the copies die with
    SDPA, before the output projection."""
    b, n, e = m.in_shapes[0]
    h = m.props["num_heads"]
    dt = m.amp or m.float_in
    bi = b * n * _inner(m.props, e)
    out = T(b * n * e, dt, "output (bias added)")
    qkv = T(3 * bi, dt, "biased q, k, v (EinsumDense outputs)")
    attn = T(bi, dt, "attention output")
    lse = T(b * h * n, "float32", "logsumexp")
    copies = T(3 * bi, dt, "q, k, v transposed to (B, heads, T, D) (contiguous copies)")
    o_copy = T(bi, dt, "attention output transposed back (einsum's copy)")
    raw = T(b * n * e, dt, "output einsum before the bias add")
    if m.records:
        return OpMem(outputs=[out], out_dtypes=[dt], saved=[In(0), copies, attn, lse, o_copy], temps=[qkv, raw],
                     grad_in=["new"], bwd_temps=[T(bi, dt, "q, k, v gradients (beyond the input's)")])
    # two moments: SDPA (copies, its output and logsumexp) and the output projection (its copy,
    # raw and biased outputs); the biased q, k, v and the attention output live through both
    first = copies.nbytes + lse.nbytes
    second = o_copy.nbytes + raw.nbytes + out.nbytes
    extra = T(max(first, second) - out.nbytes, "uint8", "the larger of SDPA's copies and the output projection's")
    return OpMem(outputs=[out], out_dtypes=[dt], temps=[qkv, attn, extra], grad_in=["new"])


def _mha_stages(m, s, saved_ix, pix, gq_made, dropout):
    """Backward of multi_head_attention_forward as autograd runs it, node by node (torch/nn/
    functional.py; measured op by op with the truth harness). The incoming gradient stands first
    for the reshaped copy of itself that out_proj's backward reads, then for the v gradient, which
    waits for its select_backward to the end. ``gq_made``: the q/k gradient temps of the stage
    before select_backward (they die as their scattered copies are made)."""
    dt = m.amp or m.float_in
    b, n, e = m.in_shapes[0]
    bhnn = b * m.props["num_heads"] * n * n
    out_p = [pix[k] for k in ("out_proj.weight", "out_proj.bias") if k in pix]
    in_p = [pix[k] for k in ("in_proj_weight", "in_proj_bias") if k in pix]
    st = [([T(s, dt, "out_proj input gradient")], out_p, saved_ix.get("o_copy", []))]
    if "probs" in saved_ix:  # math: bmm(probs, v), [dropout], softmax, bmm(q_scaled, k^T), mul
        # bmm's saved dropped-out weights die with its backward, the mask with dropout's
        st.append(([T(bhnn, dt, "attention-weights gradient")], [], saved_ix.get("dropped", [])))
        if dropout:
            st.append(([T(bhnn, dt, "dropout backward (gradient x mask)")], [], saved_ix["mask"]))
        st.append(([T(bhnn, dt, "softmax backward (score gradients)")], [], saved_ix["probs"]))
        st.append(([T(s, dt, "scaled-q gradient"), T(s, dt, "k gradient")], [], saved_ix["qkv"]))
        st.append(([T(s, dt, "q gradient (mul backward)")], [], []))
    else:  # SDPA backward: q, k, v gradients at once
        st.append(([T(s, dt, "q gradient"), T(s, dt, "k gradient")], [], saved_ix["qkv"]))
    # proj[0], proj[1], proj[2] of the packed projection: each gradient is scattered into a zero
    # (3, L, B, E) tensor (select_backward) and summed: two of them and their sum at once
    st.append(([T(9 * s - gq_made * s, dt, "select_backward: q, k gradients scattered into (3, L, B, E) zeros, "
                                           "and their sum")], [], []))
    st.append(([], [], []))
    # the v gradient the incoming one stood for is consumed by now: its size off this copy
    st.append(([T(2 * s, dt, "packed q, k, v gradient made contiguous for in_proj (less the consumed v "
                             "gradient)")], in_p, []))
    return st


def _mha_grads(m):
    """The query gets a gradient; a key_padding_mask none."""
    return ["new"] + [None] * (len(m.in_shapes) - 1)


def _seq_first_eval_mem(m, out, avg, s, probs, fm=0, merged=0):
    """Eval without grad, batch_first=False or a float attn_mask: the fast path
    _native_multi_head_attention needs batch_first and a bool (or no) mask, so
    multi_head_attention_forward runs op by op on the (L, B, E) transposed view either way
    (measured: benchmarks/mha_sweep.py; the (L, L) mask joins baddbmm as a broadcast view).
    in_proj's mm and its out-of-place bias add (each 3 x the input) exist at once, then the packed
    .contiguous() copy beside the projection; the packed q, k, v are locals alive to the end. Math
    kernel: the scores beside their softmax, then the probabilities with the bmm output and its
    (L*B, E) copy for out_proj; fused: SDPA's output. The output projection writes beside them.
    A key_padding_mask adds its float copy ``fm`` throughout, its merged copy after in_proj."""
    moments = [6 * s]
    if m.props["kernel"] == "math":
        moments += [3 * s + 2 * probs, 3 * s + probs + 2 * s, 3 * s + probs + s + out.nbytes]
    else:
        moments += [3 * s + 2 * s, 3 * s + s + out.nbytes]
    final = 3 * s + out.nbytes + (probs if m.props["kernel"] == "math" else 0) + sum(t.nbytes for t in avg)
    peak = max(moments[0], max(moments[1:]) + merged, final + merged) + fm
    return OpMem(outputs=[out], out_dtypes=[out.dtype], temps=[T(peak - out.nbytes, "uint8", "multi_head_attention_"
                 "forward's largest moment (no fast path: batch_first=False)")], grad_in=_mha_grads(m))


def _mha_mem(m):
    """nn.MultiheadAttention(batch_first=True) self-attention as multi_head_attention_forward
    runs it (torch/nn/functional.py). Training: the batch-first input is a transposed view, so
    in_proj's linear copies it (kept for the weight gradient) and adds its bias out of place; the
    packed q, k, v are one contiguous (3, L, B, E) copy (_in_projection_packed) whose views the
    attention keeps. Math kernel (need_weights, the default): scaled q, softmax output (and the
    dropout mask and dropped weights), the re-laid-out attention output for out_proj; the scores
    die with the softmax, the head-averaged weights are made last. Fused (need_weights=False):
    SDPA keeps its output and a float32 logsumexp; on the CPU its output has q's layout, so
    out_proj reads it without a copy. The backward runs node by node (``_mha_stages``).
    Eval without grad: the fast path _native_multi_head_attention makes only its output (and the
    averaged weights); batch_first=False or a float attn_mask runs op by op instead."""
    if keras(m) and not (m.training and m.props["dropout"]):
        return _keras_mha_mem(m)
    b, n, e = m.in_shapes[0]
    h = m.props["num_heads"]
    dt = m.amp or m.float_in
    bne, bhnn = b * n * e, b * h * n * n
    s = T(bne, dt).nbytes
    out = T(bne, dt, "output")
    avg = [T(b * n * n, dt, "head-averaged weights")] if m.props["need_weights"] else []
    # key_padding_mask: _canonical_mask makes a float (B, S) copy at the start; after in_proj it is
    # merged into attn_mask as a (B * heads, 1, S) copy (reshape of an expand), a local to the end
    kpm = len(m.in_shapes) > 1
    fmask = [T(b * n, dt, "key_padding_mask as float (_canonical_mask)")] if kpm else []
    merged = T(b * h * n, dt, "key_padding_mask merged into attn_mask (B * heads, 1, S)") if kpm else None
    # a bool (L, L) attn_mask: MultiheadAttention.forward's _canonical_mask makes a float copy of it
    # (zeros_like in the query's dtype, masked_fill_ -inf), a local alive to the end of the call;
    # the fast path takes it (merge_masks: an expanded view), the op-by-op path adds it to the scores
    bmask = T(n * n, dt, "bool attn_mask as float (_canonical_mask)") if m.props.get("bool_mask", False) else None
    fmask += [bmask] if bmask else []
    fm = sum(t.nbytes for t in fmask)
    if not m.records and not m.training:
        # the fast path takes the float (B, S) mask itself; a float attn_mask turns it off
        # (MultiheadAttention.forward: "floating-point masks are not supported for fast path")
        if m.props.get("batch_first", True) and not m.props.get("float_mask", False):
            return OpMem(outputs=[out], out_dtypes=[dt], temps=avg + fmask, grad_in=_mha_grads(m))
        return _seq_first_eval_mem(m, out, avg, s, bhnn * T(1, dt).nbytes, fm, merged.nbytes if kpm else 0)
    # (B, L, E).transpose(1, 0) is not contiguous (unless B or L is 1: there linear reads the view
    # itself and this rule is one input copy high; modelled alike so the step stays affine in the
    # batch, engine/batch_curve.py)
    x_saved = T(bne, dt, "input laid out (L, B, E) (linear's copy of the transposed view)")
    qkv = T(3 * bne, dt, "packed q, k, v (contiguous (3, L, B, E))")
    # in_proj: the matmul of the copied input (then its bias added out of place: mm + add, or
    # addmm), then the packed .contiguous() copy beside it
    in_proj = s + 6 * s + fm
    p = m.props["dropout"] if m.training else 0.0
    # on the CPU the fused kernel takes no dropout: with dropout in training SDPA falls back to
    # its math path (q and k both scaled, scores, softmax, noise, dropped probabilities)
    sdpa_math = m.props["kernel"] == "fused" and p > 0 and m.backend == "cpu"
    math = m.props["kernel"] == "math" or sdpa_math
    if math:
        probs = T(bhnn, dt, "softmax(scores)")
        saved = [x_saved, qkv, T(bne, dt, "scaled q"), probs]
        ix = {"qkv": [1, 2], "probs": [3]}
        if sdpa_math:
            saved.append(T(bne, dt, "scaled k"))
            ix["qkv"].append(len(saved) - 1)
        if p:
            saved += [T(bhnn, "bool" if m.backend != "cpu" else dt, "attention dropout mask"),
                      T(bhnn, dt, "dropped-out probabilities")]
            ix["mask"], ix["dropped"] = [len(saved) - 2], [len(saved) - 1]
        saved.append(T(bne, dt, "attention output laid out for out_proj"))
        ix["o_copy"] = [len(saved) - 1]
        # softmax reads the scores while its output is made: before o_copy and the output exist
        moments = [in_proj, 5 * s + 2 * bhnn * T(1, dt).nbytes]
        avg = [] if sdpa_math else avg
    else:
        saved = [x_saved, qkv, T(bne, dt, "attention output"), T(b * h * n, "float32", "logsumexp")]
        ix = {"qkv": [1, 2, 3]}
        if m.backend != "cpu":  # CUDA kernels lay their output out (B, L, H, D): out_proj copies it
            saved.append(T(bne, dt, "attention output laid out for out_proj"))
            ix["o_copy"] = [len(saved) - 1]
        moments = [in_proj]
    fwd_only = fm
    if kpm and math:  # baddbmm / the math path does not keep the mask
        fwd_only += merged.nbytes
    elif kpm:  # SDPA keeps its attn_mask with q, k, v
        saved.append(merged)
        ix["qkv"].append(len(saved) - 1)
    elif bmask and not math:  # measured: SDPA keeps the float copy (a view) until its backward
        fwd_only -= bmask.nbytes
        saved.append(bmask)
        ix["qkv"].append(len(saved) - 1)
    final = sum(t.nbytes for t in saved if isinstance(t, T)) + out.nbytes
    # the head-averaged weights are made last, beside everything kept; the other moments are earlier
    peak = max(max(moments), final + fwd_only + sum(t.nbytes for t in avg))
    if not m.records:  # train-mode module under no_grad: nothing is kept, the largest moment counts
        return OpMem(outputs=[out], out_dtypes=[dt], temps=[T(peak - out.nbytes, "uint8", "the op's largest moment")],
                     grad_in=_mha_grads(m))
    temps = [T(peak - final, "uint8", "in_proj's matmul and bias add, the scores beside softmax, or the "
                                      "head-averaged weights")] if peak > final else []
    pix = {ps.name: k for k, ps in enumerate(m.params)}
    stages = _mha_stages(m, bne, ix, pix, 1 if math else 2, bool(p))
    return OpMem(outputs=[out], out_dtypes=[dt], saved=saved, temps=temps, grad_in=_mha_grads(m),
                 bwd_stages=stages, grad_out_stands_in=True)


def _mha_onnx(ctx):
    """The ops of an nn.MultiheadAttention module, gathered by the importer (self-attention)."""
    x = ctx.tensor(0)
    if len(x.shape) != 3 or tuple(x.dmap) != (0, 1, 2):
        raise LayerError("inputs", "expects a batch-first (batch, tokens, embed_dim) input")
    ctx.tensor_inputs = [0]
    need = bool(ctx.attr("need_weights", 1))
    return {"num_heads": int(ctx.attr("num_heads")), "dropout": 0.0, "bias": ctx.param(2) is not None,
            "kernel": "math" if need else "fused", "need_weights": need}


MultiHeadAttention = register(LayerType(
    name="MultiHeadAttention", family="attention",
    doc="Multi-head self-attention (nn.MultiheadAttention, batch_first). kernel=math materialises "
        "the tokens x tokens attention matrix; fused does not.",
    props=(Prop("num_heads", "int", 8, min=1), Prop("dropout", "float", 0.0, min=0.0, max=1.0),
           Prop("bias", "bool", True), Prop("kernel", "choice", "math", choices=("math", "fused")),
           Prop("need_weights", "bool", True, doc="also return head-averaged attention weights"),
           Prop("batch_first", "bool", True, doc="False: PyTorch's default sequence-first (L, B, E) layout; "
                "the eval fast path then does not run"),
           Prop("float_mask", "bool", False, doc="a floating-point attn_mask is passed: the eval fast path "
                "does not run"),
           Prop("bool_mask", "bool", False, doc="a boolean (tokens, tokens) attn_mask is passed: PyTorch makes a "
                "float copy of it"),
           Prop("head_dim", "int", 0, min=0, doc="width of each head's q / k / v (Keras key_dim); 0: embed_dim / heads"),
           IMPL),
    min_inputs=1, max_inputs=2, input_names=("query", "key_padding_mask"),
    shape=_mha_shape, params=_mha_params, flops=_mha_flops, memory=_mha_mem,
    torch_ops=("MultiheadAttention",), aliases=("MultiheadAttention", "MHA"),
    search_words=("attention", "self-attention", "cross-attention", "transformer", "mha", "heads"),
    onnx_ops=("nn.MultiheadAttention (the ops of a module holding <path>.in_proj_weight)",), from_onnx=_mha_onnx,
    keeps_for_backward="math: the attention probabilities (B x heads x L x L); fused: output + logsumexp",
))


def _sdpa_shape(c):
    q, k, v = (x.shape for x in c.inputs[:3])
    if len(q) != 3 or len(k) != 3 or len(v) != 3:
        raise LayerError("inputs", "q, k, v must be (heads, tokens, head_dim) per sample")
    heads_ok = q[0] == k[0] or (c.props.get("enable_gqa") and k[0] and q[0] % k[0] == 0)
    if q[-1] != k[-1] or k[-2] != v[-2] or not heads_ok or k[0] != v[0]:
        raise LayerError("inputs", f"q {fmt(q)}, k {fmt(k)}, v {fmt(v)} do not match")
    if len(c.inputs) > 3:
        mk = c.inputs[3].shape
        # broadcast over heads and queries: a padding mask (1, 1, keys), a causal one (1, L, S)
        if len(mk) != 3 or mk[2] != k[1] or mk[1] not in (1, q[1]) or mk[0] not in (1, q[0]):
            raise LayerError("inputs", f"attn_mask {fmt(mk)} does not fit (heads or 1, {q[1]} or 1, {k[1]})")
    return [TensorSpec(q[:-1] + (v[-1],))]


def _sdpa_math_dropout(m):
    """CPU training with dropout_p > 0: no CPU fused kernel takes dropout
    (sdp_utils_cpp.cpp: check_for_dropout), so _scaled_dot_product_attention_math runs
    (measured op by op, torch 2.13 and 2.14.1 alike): q and k^T scaled by sqrt(scale) (each a
    copy; bmm copies again an operand whose heads cannot be merged with the batch, and keeps what
    it reads), bmm scores (freed by softmax; a causal or given mask is added out of place first),
    softmax (kept), dropout (noise = empty_like.bernoulli_, kept with its product), bmm with v.
    The output is (B, H, L, D) contiguous. Of two copied scaled operands one dies after the
    scores, the other (and the float causal mask) when the op returns."""
    b, h, n, d = m.in_shapes[0]
    s = m.in_shapes[1][2]
    dv = m.in_shapes[2][3]
    out_dt = m.amp or m.float_in
    # the math path computes reduced-precision q, k, v in float32 (query.to(at::kFloat) in
    # _scaled_dot_product_attention_math) and casts the result back: under CPU autocast (bf16)
    # every intermediate is fp32, the casts of k and v are what bmm keeps
    up = out_dt in ("bfloat16", "float16")
    dt = "float32" if up else out_dt
    q, k, v, sc = b * h * n * d, b * h * s * d, b * h * s * dv, b * h * n * s
    if up:
        temps = [T(q, dt, "q.to(float32)"), T(k, dt, "k^T * sqrt(scale)"), T(sc, dt, "scores")]
        saved = [T(sc, dt, "softmax(scores)"), T(sc, dt, "dropout noise"), T(sc, dt, "dropped probabilities")]
        if m.props["causal"]:
            temps.append(T(n * s, dt, "causal mask (float)"))
        if m.viewable(0, (b * h, n, d)):
            saved.append(T(q, dt, "q * sqrt(scale)"))
        else:
            temps.append(T(q, dt, "q * sqrt(scale)"))
            saved.append(T(q, dt, "q * sqrt(scale), contiguous for bmm"))
        saved += [T(k, dt, "k.to(float32)"), T(v, dt, "v.to(float32)")]
        temps.append(T(b * h * n * dv, dt, "float32 output before the cast back"))
        return OpMem(outputs=[T(b * h * n * dv, out_dt, "output")], out_dtypes=[out_dt], temps=temps, saved=saved,
                     grad_in=_grads(m), bwd_temps=[T(sc, dt, "score gradients")] * 2)
    q_copy, k_copy = not m.viewable(0, (b * h, n, d)), not m.viewable(1, (b * h, s, d))
    saved = [T(q, dt, "q * sqrt(scale)" + (", contiguous for bmm" if q_copy else "")),
             T(k, dt, "k^T * sqrt(scale)" + (", contiguous for bmm" if k_copy else "")),
             T(sc, dt, "softmax(scores)"), T(sc, dt, "dropout noise"), T(sc, dt, "dropped probabilities"),
             In(2) if m.viewable(2, (b * h, s, dv)) else T(v, dt, "v, contiguous for bmm")]
    # at the end (the op's peak): the scaled operand that lives on, the float causal mask
    temps = [T(k if k_copy else q, dt, "scaled operand before its copy for bmm")] if q_copy or k_copy else []
    if m.props["causal"]:
        temps.append(T(n * s, dt, "causal mask (float)"))
    if len(m.in_shapes) > 3 and m.in_dtypes[3] == "bool":  # convert_boolean_attn_mask: where(mask, 0, -inf)
        temps.append(T(m.in_elems(3), dt, "float mask made from the bool one"))
    return OpMem(outputs=[T(b * h * n * dv, out_dt, "output")], out_dtypes=[out_dt], temps=temps, saved=saved,
                 grad_in=["stage", "new", "new"] + [None] * (len(m.in_shapes) - 3),
                 bwd_stages=_sdpa_math_stages(m, dt, q, k, v, sc),
                 grad_out_stands_in=True)


def _sdpa_math_dropout_no_grad(m):
    """The math path with dropout on inputs that need no gradient (a frozen encoder in train
    mode), measured: each tensor dies once read. Its moments: the scaled q and k (and their
    copies for bmm) beside the scores; the probabilities, noise and dropped probabilities (with
    the scaled operand that lives on); the dropped probabilities, v's copy and the output."""
    b, h, n, d = m.in_shapes[0]
    s = m.in_shapes[1][2]
    dv = m.in_shapes[2][3]
    dt = m.amp or m.float_in
    nb = lambda x: T(x, dt).nbytes  # noqa: E731
    q, k, sc, out = nb(b * h * n * d), nb(b * h * s * d), nb(b * h * n * s), nb(b * h * n * dv)
    q_copy, k_copy = not m.viewable(0, (b * h, n, d)), not m.viewable(1, (b * h, s, d))
    lives_on = k  # one scaled operand (or its copy) lives to the end either way
    v_copy = 0 if m.viewable(2, (b * h, s, dv)) else nb(b * h * s * dv)
    moments = [q + k + (q if q_copy else 0) + (k if k_copy else 0) + sc, 3 * sc + lives_on,
               sc + lives_on + v_copy + out]
    temps = [T(max(max(moments) - out, 0), "uint8", "the math path's largest moment (nothing kept)")]
    if m.props["causal"]:
        temps.append(T(n * s, dt, "causal mask (float)"))
    if len(m.in_shapes) > 3 and m.in_dtypes[3] == "bool":
        temps.append(T(m.in_elems(3), dt, "float mask made from the bool one"))
    return OpMem(outputs=[T(b * h * n * dv, dt, "output")], out_dtypes=[dt], temps=temps, grad_in=_grads(m))


def _sdpa_math_stages(m, dt, q, k, v, sc):
    """The math path's backward node by node (measured): bmm makes the v and dropped-probability
    gradients (the incoming gradient and the dropped probabilities die), dropout's backward (the
    noise dies), softmax's (the probabilities die), bmm the scaled-q and -k gradients (the scaled
    operands die); the q gradient is the last stage's. From the second stage on the incoming
    gradient's bytes stand for the v gradient: adjacent stages' temps are alive together, so the
    correction alternates in sign."""
    g = T(m.numel(m.out_shapes[0]), dt).nbytes
    nb = lambda x: T(x, dt).nbytes  # noqa: E731
    gv, s_ = nb(v), nb(sc)
    return [([T(v, dt, "v gradient"), T(sc, dt, "dropped-probabilities gradient")], [], [4, 5]),
            ([T(max(s_ - g, 0), "uint8", "dropout backward (less the freed incoming gradient)")], [], [3]),
            ([T(s_ + gv, "uint8", "softmax backward (and the v gradient the incoming one stood for)")], [], [2]),
            ([T(q, dt, "scaled-q gradient"), T(max(nb(k) - g, 0), "uint8", "scaled-k gradient (less the "
              "incoming gradient's bytes)")], [], [0, 1])]


def _sdpa_dropout_math_mem(m, out, dt):
    """CPU SDPA with dropout in training falls back to its math path: q and k scaled (each a
    copy, then a contiguous copy for bmm), scores, softmax, dropout noise (input dtype) and the
    dropped probabilities, a contiguous copy of v; bmm keeps the copies, the probabilities, the
    noise and the dropped probabilities. One scaled operand lives until the op returns."""
    b, h, n, d = m.in_shapes[0]
    s = m.in_shapes[1][2]
    dv = m.in_shapes[2][3]
    hs = b * h * n * s
    saved = [T(b * h * n * d, dt, "scaled q (contiguous copy)"), T(b * h * s * d, dt, "scaled k (contiguous copy)"),
             T(hs, dt, "softmax(scores)"), T(hs, dt, "dropout noise"), T(hs, dt, "dropped probabilities"),
             T(b * h * s * dv, dt, "v (contiguous copy)")]
    return OpMem(outputs=[out], out_dtypes=[dt], saved=saved, temps=[T(b * h * s * d, dt, "scaled k")],
                 grad_in=["new"] * 3, bwd_temps=[T(hs, dt, "gradient of the dropped probabilities"),
                                                 T(hs, dt, "gradient of the probabilities")])


def _sdpa_mem(m):
    if m.training and m.props.get("dropout", 0.0) > 0 and m.backend == "cpu":
        if m.records:
            return _sdpa_math_dropout(m)
        if (m.amp or m.float_in) not in ("bfloat16", "float16"):
            return _sdpa_math_dropout_no_grad(m)
    b, h, n, d = m.in_shapes[0]
    s = m.in_shapes[1][2]
    dt = m.amp or m.float_in
    out = T(b * h * n * m.in_shapes[2][3], dt, "output")
    if m.training and m.props["dropout"] > 0 and m.records and (m.backend == "cpu" or m.props["kernel"] == "math"):
        return _sdpa_dropout_math_mem(m, out, dt)
    if m.props["kernel"] == "math":
        scores = T(b * h * n * s, dt, "scores")
        probs = T(b * h * n * s, dt, "softmax(scores)")
        q = T(b * h * n * d, dt, "scaled q")
        if m.records:
            return OpMem(outputs=[out], out_dtypes=[dt], saved=[q, In(1), probs, In(2)], temps=[scores],
                         grad_in=_grads(m), bwd_temps=[T(b * h * n * s, dt, "score gradients")] * 2)
        return OpMem(outputs=[out], out_dtypes=[dt], temps=[q, scores, probs], grad_in=_grads(m))
    lse = T(b * h * n, "float32", "logsumexp")
    # a bool attn_mask is turned into an additive float one of q's dtype (convert_boolean_attn_mask),
    # which the kernel keeps for backward
    fmask = []
    if len(m.in_shapes) > 3:
        fmask = [T(m.in_elems(3), dt, "float mask made from the bool one")] if m.in_dtypes[3] == "bool" else [In(3)]
    # flash kernels write the output as (B, L, H, D) in memory and return a (B, H, L, D) view, so a
    # later transpose(1, 2).contiguous() costs nothing
    dv = m.in_shapes[2][3]
    st = [(n * h * dv, dv, h * dv, 1)]
    if m.backend == "cpu" and m.contiguous(0):
        # the CPU flash kernel lays its output out like q: a contiguous q (Phi-3's rotary ends in
        # a cat) gives a contiguous output, which the transpose(1, 2).contiguous() after it copies
        st = [None]
    if m.records:
        saved = [In(0), In(1), In(2), Out(0), lse] + fmask
        mem = OpMem(outputs=[out], out_dtypes=[dt], saved=saved, grad_in=_grads(m), out_strides=st)
    else:
        temps = [t for t in fmask if isinstance(t, T)] + [lse]
        mem = OpMem(outputs=[out], out_dtypes=[dt], temps=temps, grad_in=_grads(m), out_strides=st)
    # autocast runs SDPA in low precision: fp32 q / k / v (rotary output meeting fp32 tables) are
    # cast, and the casts are what the kernel keeps
    return amp_casts(m, mem, n_inputs=3) if any(d == "float32" for d in m.in_dtypes[:3]) else mem


def _grads(m):
    """q, k, v get new gradients; a bool mask none."""
    return ["new"] * 3 + [None] * (len(m.in_shapes) - 3)


def _sdpa_onnx(ctx):
    """The exporter's chain for F.scaled_dot_product_attention, fused back by the importer."""
    if any(v.kind != "tensor" or len(v.shape) != 4 or tuple(v.dmap) != (0, 1, 2, 3) for v in ctx.inputs[:3]):
        raise LayerError("inputs", "q, k, v are not (batch, heads, tokens, head_dim) in the design's layout")
    return {"kernel": "fused", "causal": bool(ctx.attr("causal", 0))}


def _sdpa_export(e):
    p = e.props
    extra = (f", attn_mask={e.inputs[3]}" if len(e.inputs) > 3 else "") + (", is_causal=True" if p["causal"] else "") \
        + (", enable_gqa=True" if p["enable_gqa"] else "") \
        + (f", dropout_p={e.lit('dropout')} if self.training else 0.0" if p.get("dropout") else "")
    return TorchExport(f"F.scaled_dot_product_attention({e.x}, {e.inputs[1]}, {e.inputs[2]}{extra})")


ScaledDotProductAttention = register(LayerType(
    name="ScaledDotProductAttention", family="attention",
    doc="softmax(q k^T / sqrt(d)) v on (heads, tokens, head_dim) inputs; fused = flash kernel.",
    props=(Prop("kernel", "choice", "fused", choices=("fused", "math")), Prop("causal", "bool", False),
           Prop("dropout", "float", 0.0, min=0.0, max=1.0,
                doc="dropout_p in training (on the CPU no fused kernel takes it: the math path runs)"),
           Prop("enable_gqa", "bool", False, doc="k / v may have fewer heads than q (grouped-query attention)")),
    min_inputs=3, max_inputs=4, input_names=("query", "key", "value", "attn_mask"), shape=_sdpa_shape, memory=_sdpa_mem,
    flops=lambda c, o: 4 * o[0].numel * c.inputs[1].shape[1],
    torch_ops=("scaled_dot_product_attention",), aliases=("SDPA",), to_torch=_sdpa_export,
    search_words=("attention", "sdpa", "flash attention", "transformer"),
    onnx_ops=("MatMul(Softmax(MatMul(Mul(q,s),Mul(Transpose(k),s))),v)",), from_onnx=_sdpa_onnx,
    keeps_for_backward="fused: q, k, v, output and a float32 logsumexp; math: the probabilities",
))

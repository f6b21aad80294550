"""The layers of current decoder LLMs, as Hugging Face transformers runs them: RMSNorm, the
rotary cos/sin producer and its application to q / k, repeat_kv for grouped-query attention and
the materialised causal / sliding-window mask. Each rule follows the eager op chain of
transformers' modeling code (models/llama/modeling_llama.py, masking_utils.py,
integrations/sdpa_attention.py), measured with the truth harness (tests/accuracy/test_llm_layers_measured.py)."""

from memdesigner.model.layers._common import fmt
from memdesigner.model.oprules import In, OpMem, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register

FLOAT32 = "float32"


def _promote(a: str, b: str) -> str:
    return a if a == b else FLOAT32


def _rows(m) -> int:
    n = 1
    for d in m.in_shapes[0][:-1]:
        n *= d
    return n


def _lump(nbytes: int, what: str) -> T:
    """One transient of ``nbytes``: the largest moment of an op chain beyond its output."""
    return T(max(0, nbytes), "uint8", what)


def _rms_mem(m):
    """LlamaRMSNorm: x.to(float32), pow(2), mean(-1, keepdim), + eps, rsqrt, x * rsqrt, .to(input
    dtype), weight * (Gemma: (1 + weight.float()) * normed, then .type_as(x)). Autograd keeps the
    fp32 input (the input itself when already fp32), the rsqrt per row and the normalised x.
    Autocast leaves pow / mean / rsqrt alone, so under AMP the fp32 residual stream stays fp32."""
    din = m.float_in
    n, r = m.in_elems(0), _rows(m)
    gemma = m.props["variant"] == "gemma"
    pdt = m.dtype  # the weight's dtype
    x32 = In(0) if din == FLOAT32 else T(n, FLOAT32, "x.to(float32)")
    rs = T(r, FLOAT32, "rsqrt(mean(x^2) + eps)")
    normed = T(n, FLOAT32, "x * rsqrt")
    if gemma:
        out_dt = din
        pre = [] if din == FLOAT32 else [T(n, FLOAT32, "normed * (1 + weight) before .type_as(x)")]
        kept_normed = normed
    elif m.props["variant"] == "torch":  # autocast runs rms_norm in fp32: the result stays fp32
        out_dt = _promote(pdt, FLOAT32)
        pre = []
        kept_normed = normed
    else:
        out_dt = _promote(pdt, din)
        pre = []
        kept_normed = normed if din == FLOAT32 else T(n, din, "normed.to(input dtype)")
    out = T(n, out_dt, "output")
    if m.records:
        # autograd saves only what the gradients it needs use: x * rsqrt keeps x and the rsqrt for
        # x's gradient; weight * normed keeps normed for the weight's (a frozen weight: LoRA, frozen
        # layers) and the weight itself for x's
        w_rg = any(p.requires_grad for p in m.params)
        x_rg = bool(m.in_rg and m.in_rg[0])
        saved = ([x32, rs] if x_rg else []) + ([kept_normed] if w_rg else [])
        temps = [t for t in pre + ([normed] if kept_normed is not normed or not w_rg else []) if t not in saved]
        return OpMem(outputs=[out], out_dtypes=[out_dt], saved=saved, temps=temps, grad_in=["new"],
                     bwd_temps=[T(2 * n, FLOAT32, "the normalised gradient and its product with x")]
                     + ([] if isinstance(x32, In) or m.props["variant"] == "torch"
                        else [T(n, FLOAT32, "x32's gradient before the cast back")]))
    # without grad the chain frees as it goes. Locals of forward live to its end: the row means
    # (``variance``) and the normalised x (``hidden_states``) while its cast and the output are made
    cast = 0 if isinstance(x32, In) else x32.nbytes
    kept = kept_normed.nbytes if kept_normed is not normed else 0
    if gemma:  # no locals: _norm(x.float()) returns x * rsqrt, then * (1 + weight.float()), .type_as(x)
        o32 = pre[0].nbytes if pre else out.nbytes
        moments = [cast + 4 * n + 4 * r, cast + 8 * r + normed.nbytes, normed.nbytes + o32
                   + 4 * m.in_shapes[0][-1], o32 + (out.nbytes if pre else 0)]
    else:
        # torch's composite keeps its rsqrt (and autocast's fp32 copy of x) as C++ locals instead
        held = cast if m.props["variant"] == "torch" else 0
        moments = [cast + 4 * n + 4 * r,  # x32, pow(x, 2), the row means
                   cast + 4 * r + normed.nbytes,  # x32 and x * rsqrt
                   held + 4 * r + normed.nbytes + kept + out.nbytes]
    return OpMem(outputs=[out], out_dtypes=[out_dt], temps=[_lump(max(moments) - out.nbytes, "largest moment")],
                 grad_in=["new"])


def _rms_shape(c):
    x = c.inputs[0]
    if x.kind != "float" or not x.shape:
        raise LayerError("inputs", "needs a float input")
    return [TensorSpec(x.shape)]


RMSNorm = register(LayerType(
    name="RMSNorm", family="normalization",
    doc="Root-mean-square norm over the last dimension (LlamaRMSNorm; variant gemma scales by 1 + weight).",
    props=(Prop("eps", "float", 1e-6, min=0.0),
           Prop("variant", "choice", "llama", choices=("llama", "gemma", "torch"),
                doc="llama: weight * normed (weight starts at 1); gemma: (1 + weight) * normed, in fp32; "
                    "torch: nn.RMSNorm's composite (pow, mean, add_, rsqrt, two muls)")),
    shape=_rms_shape, params=lambda c: [ParamSpec("weight", (c.inputs[0].shape[-1],))],
    flops=lambda c, o: 4 * c.inputs[0].numel, memory=_rms_mem,
    torch_ops=("LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "GemmaRMSNorm", "Gemma2RMSNorm", "Phi3RMSNorm",
               "T5LayerNorm", "RMSNorm", "rms_norm"),
    aliases=("LlamaRMSNorm",), search_words=("rms", "rmsnorm", "rms norm", "llama", "norm"),
    keeps_for_backward="its input (in fp32), the rsqrt per row and the normalised input",
))


def _rope_shape(c):
    x = c.inputs[0]
    if len(x.shape) != 2:
        raise LayerError("inputs", f"expects hidden states (tokens, hidden) per sample, got {fmt(x.shape)}")
    d = c["head_dim"]
    if d % 2:
        raise LayerError("head_dim", f"{d} must be even")
    return [TensorSpec((x.shape[0], d)), TensorSpec((x.shape[0], d))]


def _rope_mem(m):
    """LlamaRotaryEmbedding.forward, once per model forward: position_ids (1, T) int64, freqs =
    position_ids[..., None].float() * inv_freq (T, D/2), emb = cat(freqs, freqs), cos / sin and
    their attention_scaling products (T, D) in fp32. Position ids are shared by the batch, so no
    size here grows with it (a constant is affine in the batch: the batch curve's lines hold).
    Nothing requires grad."""
    t = m.in_shapes[0][1]
    d = m.props["head_dim"]
    dt = m.float_in
    cos = T(t * d, dt, "cos")
    sin = T(t * d, dt, "sin")
    pos = T(t, "int64", "position_ids")
    freqs = T(t * d // 2, FLOAT32, "freqs")
    emb = T(t * d, FLOAT32, "emb = cat(freqs, freqs)")
    raw = T(t * d, FLOAT32, "emb.cos() before * attention_scaling")
    # largest moment beyond cos / sin: emb with the unscaled sin (cos is done), plus the ids
    lump = _lump(pos.nbytes + freqs.nbytes + emb.nbytes + raw.nbytes, "position ids, freqs, emb, unscaled cos/sin")
    return OpMem(outputs=[cos, sin], out_dtypes=[dt, dt], temps=[lump], grad_in=[None], param_grads=False)


RotaryEmbedding = register(LayerType(
    name="RotaryEmbedding", family="attention",
    doc="Rotary position embedding tables (cos, sin), computed once per forward from the positions.",
    props=(Prop("head_dim", "int", 64, min=2), Prop("theta", "float", 10000.0, min=0.0, doc="rope_theta"),
           Prop("scaling", "float", 1.0, doc="attention_scaling (1 for the default rope)")),
    shape=_rope_shape, n_outputs=2,
    params=lambda c: [ParamSpec("inv_freq", (c["head_dim"] // 2,), "buffer", FLOAT32),
                      ParamSpec("original_inv_freq", (c["head_dim"] // 2,), "buffer", FLOAT32)],
    flops=lambda c, o: 3 * o[0].numel, memory=_rope_mem,
    torch_ops=("LlamaRotaryEmbedding", "MistralRotaryEmbedding", "Qwen2RotaryEmbedding", "GemmaRotaryEmbedding",
               "Gemma2RotaryEmbedding", "Phi3RotaryEmbedding"),
    aliases=("RoPE",), search_words=("rope", "rotary", "position", "llama"),
    keeps_for_backward="nothing (no input requires grad)",
))


def _apply_shape(c):
    x, cos, sin = (i.shape for i in c.inputs)
    if len(x) != 3:
        raise LayerError("inputs", f"expects (heads, tokens, head_dim) per sample, got {fmt(x)}")
    if cos != sin or len(cos) != 2 or cos[0] != x[1] or not 2 <= cos[1] <= x[2]:
        raise LayerError("inputs", f"cos {fmt(cos)} / sin {fmt(sin)} do not match (tokens, head_dim) {fmt(x[1:])}")
    if cos[1] < x[2] and not c["concat_pass"]:
        raise LayerError("concat_pass", f"a partial rotary ({cos[1]} of {x[2]} dims) concatenates the pass-through "
                         "part: set concat_pass")
    return [TensorSpec(x)]


def _apply_mem(m):
    """apply_rotary_pos_emb for one of q / k: (x * cos) + (rotate_half(x) * sin), rotate_half =
    cat((-x2, x1), -1) of two views in x's dtype; the products promote to cos's dtype (a bf16 q
    under autocast meets the fp32 tables: the result is fp32). The forward's moments: x * cos with
    the negated half and the cat, then with the cat and its product with sin, then with that
    product and the sum. Autograd keeps only cos and sin (shared, alive anyway)."""
    from memdesigner.units import DTYPE_BYTES

    n = m.in_elems(0)
    hd, rd = m.in_shapes[0][-1], m.in_shapes[1][-1]
    r = n // hd * rd  # the rotated part x[..., :rotary_dim] (Phi-3's partial_rotary_factor < 1)
    dx = m.in_dtypes[0]
    do = _promote(dx, m.in_dtypes[1])
    ix, io = DTYPE_BYTES[dx], DTYPE_BYTES[do]
    out = T(n, do, "output")
    moments = [r * io + r // 2 * ix + r * ix, r * io + r * ix + r * io, 3 * r * io]
    if m.props["concat_pass"]:  # Phi-3: cat([rotated, x[..., rotary_dim:]], -1) copies the sum
        moments.append(r * io + n * io)
    saved = [In(1), In(2)] if m.records else []
    mem = OpMem(outputs=[out], out_dtypes=[do], temps=[_lump(max(moments) - out.nbytes, "largest moment")],
                saved=saved, grad_in=["new", None, None], elementwise=not m.props["concat_pass"])
    if m.records:
        # g * sin in the promoted dtype; rotate_half's slice gradients in x's dtype
        mem.bwd_temps = [T(n, do, "g * sin"), T(n, dx, "slice gradients of rotate_half")]
        if r < n:
            # partial rotary, two moments (measured): rotate_half's (g, g_rot * sin and the two
            # r-sized slice gradients), then x's slice backwards (x-sized zero-filled gradients of
            # the rotated and pass-through parts and their sum) once g is gone
            a = n * io + r * io + 2 * r * ix
            b = 3 * n * ix
            mem.bwd_temps = [_lump(max(a, b) - n * io - n * ix, "rotate_half / slice backward's largest moment")]
    return mem


ApplyRotary = register(LayerType(
    name="ApplyRotary", family="attention",
    doc="Applies rotary embeddings to q or k: x * cos + rotate_half(x) * sin (HF apply_rotary_pos_emb).",
    props=(Prop("concat_pass", "bool", False,
                doc="Phi-3: the rotated part is concatenated with the pass-through part (a copy)"),),
    min_inputs=3, max_inputs=3, input_names=("x", "cos", "sin"), shape=_apply_shape, memory=_apply_mem,
    flops=lambda c, o: 3 * o[0].numel, torch_ops=("apply_rotary_pos_emb", "rotate_half"),
    search_words=("rope", "rotary", "llama"),
    keeps_for_backward="cos and sin only",
))


def _rep_shape(c):
    x = c.inputs[0]
    if len(x.shape) != 3:
        raise LayerError("inputs", f"expects (kv_heads, tokens, head_dim) per sample, got {fmt(x.shape)}")
    return [TensorSpec((x.shape[0] * c["n_rep"],) + x.shape[1:])]


def _rep_mem(m):
    """repeat_kv: x[:, :, None].expand(B, Hkv, n_rep, T, D).reshape(B, Hkv * n_rep, T, D): the
    reshape of the expanded view copies; n_rep = 1 returns x itself. Backward sums the n_rep
    copies' gradients into a new kv-sized one."""
    if m.props["n_rep"] == 1:
        return OpMem(outputs=[In(0)], out_dtypes=[m.float_in], grad_in=["alias"])
    return OpMem(outputs=[T(m.out_elems(0), m.float_in, "repeated k / v")], out_dtypes=[m.float_in],
                 grad_in=["new"])


RepeatKV = register(LayerType(
    name="RepeatKV", family="attention",
    doc="Grouped-query attention's repeat_kv: each k / v head copied n_rep times (a copy unless n_rep is 1).",
    props=(Prop("n_rep", "int", 1, min=1, doc="num_attention_heads / num_key_value_heads"),),
    shape=_rep_shape, memory=_rep_mem, torch_ops=("repeat_kv",),
    search_words=("gqa", "grouped query", "multi-query", "mqa", "kv heads"),
    keeps_for_backward="nothing",
))


def _mask_shape(c):
    x = c.inputs[0]
    if len(x.shape) != 1:
        raise LayerError("inputs", f"expects token ids (tokens,) per sample, got {fmt(x.shape)}")
    t = x.shape[0]
    return [TensorSpec((1, t, t), "bool" if c["dtype"] == "bool" else "float")]


def _mask_mem(m):
    """masking_utils.sdpa_mask: a bool (B, 1, T, T) mask, built from index tensors; transformers
    materialises it for sdpa only when is_causal cannot stand for it (a sliding window shorter
    than the sequence, padding). Its build keeps a few T x T bool tensors for a moment."""
    b, _, t, _ = m.out_shapes[0]
    dt = "bool" if m.props["dtype"] == "bool" else m.dtype
    out = T(b * t * t, dt, "attention mask")
    return OpMem(outputs=[out], out_dtypes=[dt], temps=[T(2 * t * t, "bool", "mask pieces")], grad_in=[None],
                 param_grads=False)


CausalMask = register(LayerType(
    name="CausalMask", family="attention",
    doc="A materialised causal (optionally sliding-window) bool attention mask (batch, 1, tokens, tokens).",
    props=(Prop("sliding_window", "int", 0, min=0, doc="0: full causal"),
           Prop("dtype", "choice", "bool", choices=("bool", "float"),
                doc="bool for sdpa; float (0 / dtype min, added to the scores) for eager attention")),
    shape=_mask_shape, memory=_mask_mem, torch_ops=("create_causal_mask", "create_sliding_window_causal_mask"),
    search_words=("mask", "causal", "sliding window", "attention mask"),
    keeps_for_backward="nothing",
))

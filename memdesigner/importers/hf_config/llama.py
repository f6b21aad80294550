"""Llama-family decoders from a Hugging Face config dict, without transformers: llama, mistral,
qwen2, gemma, gemma2 and phi3. Defaults are those of transformers' config classes; the graph
follows the models' eager forward (modeling_llama.py and its siblings) op by op, with nodes named
by their module paths so that parameter counts, peft targets and --freeze prefixes line up."""

from __future__ import annotations

from memdesigner.importers.hf_config._check import Check, short
from memdesigner.importers.hf_config._graph import Builder, HfConfigError
from memdesigner.importers.hf_config.versions import (
    NEWEST,
    check_major,
    default_attention,
    moe_experts_impl,
    sdpa_mask_materialised,
)

# model_type -> the config class's defaults that matter to the graph
DEFAULTS = {
    "llama": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=None, head_dim=None, hidden_act="silu",
                  rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                  rope_theta=10000.0, sliding_window=None),
    "mistral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=None, hidden_act="silu",
                    rms_norm_eps=1e-6, tie_word_embeddings=False, rope_theta=10000.0, sliding_window=4096),
    "qwen2": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=32, hidden_act="silu", rms_norm_eps=1e-6,
                  tie_word_embeddings=False, rope_theta=10000.0, use_sliding_window=False, sliding_window=4096,
                  max_window_layers=28),
    "gemma": dict(vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=16, head_dim=256, hidden_act="gelu_pytorch_tanh",
                  hidden_activation=None, rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
                  rope_theta=10000.0),
    "gemma2": dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                   num_attention_heads=8, num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh",
                   rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False, rope_theta=10000.0,
                   sliding_window=4096, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                   query_pre_attn_scalar=256, layer_types=None),
    "phi3": dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=None, hidden_act="silu", rms_norm_eps=1e-5,
                 tie_word_embeddings=False, rope_theta=10000.0, sliding_window=None, partial_rotary_factor=1.0),
    "mixtral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=None, hidden_act="silu",
                    rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=1e6, sliding_window=None,
                    num_experts_per_tok=2, num_local_experts=8),
    "qwen2_moe": dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24,
                      num_attention_heads=16, num_key_value_heads=16, hidden_act="silu", rms_norm_eps=1e-6,
                      tie_word_embeddings=False, rope_theta=10000.0, use_sliding_window=False, sliding_window=4096,
                      max_window_layers=28, qkv_bias=True, decoder_sparse_step=1, mlp_only_layers=[],
                      num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
                      shared_expert_intermediate_size=5632, norm_topk_prob=False),
}
MOE = ("mixtral", "qwen2_moe")  # their decoder layers' MLP is a SparseMoE block (model/layers/moe.py)

INT_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")


def resolve(config: dict) -> dict:
    """The config with transformers' defaults filled in, every value the graph uses checked
    (``_check``: the key and what it must be, in one line) and the derived sizes computed."""
    mt = config.get("model_type", "llama")
    c = dict(DEFAULTS[mt])
    c.update({k: v for k, v in config.items() if v is not None or k in ("sliding_window", "layer_types")})
    c["model_type"] = mt
    ck = Check(c)
    for k in INT_KEYS:
        ck.layers(k) if k == "num_hidden_layers" else ck.pos_int(k)
    if c.get("num_key_value_heads") is None:
        c["num_key_value_heads"] = c["num_attention_heads"]
    ck.pos_int("num_key_value_heads")
    if not c.get("head_dim"):
        ck.divides("num_attention_heads", c["num_attention_heads"], "hidden_size", c["hidden_size"])
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    ck.pos_int("head_dim")
    if c["num_attention_heads"] % c["num_key_value_heads"]:
        raise HfConfigError(f"num_key_value_heads: {c['num_key_value_heads']} does not divide "
                            f"num_attention_heads {c['num_attention_heads']}")
    for k in ("hidden_act", "hidden_activation"):
        if c.get(k) is not None:
            ck.text(k)
    ck.number("rms_norm_eps")
    ck.number("rope_theta", lo_open=True)
    rp = c.get("rope_parameters") or c.get("rope_scaling") or {}
    if isinstance(rp, dict) and rp.get("rope_theta"):
        c["rope_theta"] = Check(rp).number("rope_theta", lo_open=True)
    ck.number("partial_rotary_factor", lo_open=True, hi=1.0, optional=True)
    if c.get("sliding_window") is not None and c["sliding_window"] != 0:
        ck.pos_int("sliding_window")
    for k in ("attn_logit_softcapping", "final_logit_softcapping"):
        ck.number(k, optional=True)  # 0 or None: no soft-capping
    if mt == "gemma2":
        ck.number("query_pre_attn_scalar", lo_open=True)
    if mt in ("qwen2", "qwen2_moe"):
        ck.pos_int("max_window_layers", zero=True)
    if mt == "mixtral":
        ck.pos_int("num_local_experts", cap="MAX_HF_EXPERTS")
        if ck.pos_int("num_experts_per_tok") > c["num_local_experts"]:
            raise HfConfigError(f"num_experts_per_tok: {c['num_experts_per_tok']} is more than num_local_experts "
                                f"{c['num_local_experts']}")
    if mt == "qwen2_moe":
        if ck.pos_int("num_experts", zero=True, cap="MAX_HF_EXPERTS"):
            if ck.pos_int("num_experts_per_tok") > c["num_experts"]:
                raise HfConfigError(f"num_experts_per_tok: {c['num_experts_per_tok']} is more than num_experts "
                                    f"{c['num_experts']}")
        for k in ("moe_intermediate_size", "shared_expert_intermediate_size", "decoder_sparse_step"):
            ck.pos_int(k)
        ck.int_list("mlp_only_layers")
    if c.get("num_labels") is not None:
        ck.pos_int("num_labels")
    if mt == "gemma" and c.get("hidden_activation"):
        c["hidden_act"] = c["hidden_activation"]
    if mt == "gemma2":
        c["hidden_act"] = c.get("hidden_activation") or "gelu_pytorch_tanh"
        if not c.get("layer_types"):
            c["layer_types"] = ["sliding_attention" if (i + 1) % 2 else "full_attention"
                                for i in range(c["num_hidden_layers"])]
    elif mt in ("qwen2", "qwen2_moe"):
        if not c.get("layer_types"):
            c["layer_types"] = ["sliding_attention" if c.get("use_sliding_window") and c.get("sliding_window")
                                and i >= c["max_window_layers"] else "full_attention"
                                for i in range(c["num_hidden_layers"])]
        if not c.get("use_sliding_window"):
            c["sliding_window"] = None
    else:
        c["layer_types"] = ["sliding_attention" if c.get("sliding_window") else "full_attention"] * c["num_hidden_layers"]
    lts = c["layer_types"]
    if not isinstance(lts, list) or len(lts) != c["num_hidden_layers"] or not all(
            lt in ("full_attention", "sliding_attention") for lt in lts if isinstance(lt, str)) or not all(
            isinstance(lt, str) for lt in lts):
        raise HfConfigError(f"layer_types: {short(lts)} is not a list of num_hidden_layers "
                            f"({c['num_hidden_layers']}) 'full_attention' / 'sliding_attention' entries")
    return c


def _act(name: str) -> tuple[str, dict]:
    if name in ("silu", "swish"):
        return "SiLU", {}
    if name in ("gelu_pytorch_tanh", "gelu_new", "gelu_fast"):
        return "GELU", {"approximate": "tanh"}
    if name == "gelu":
        return "GELU", {}
    if name == "relu":
        return "ReLU", {}
    raise HfConfigError(f"hidden_act: {name!r} is not supported (silu, gelu, gelu_pytorch_tanh, relu)")


def build(config: dict, *, seq_len: int, task: str, transformers_major: int = NEWEST) -> object:
    """The design transformers ``transformers_major`` (4 or 5) builds from the config (see versions)."""
    major = check_major(transformers_major)
    c = resolve(config)
    mt = c["model_type"]
    h, heads, kvh, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    n_rep = heads // kvh
    b = Builder(f"{mt}-{h}x{c['num_hidden_layers']}", seq_len)
    ids = b.add("input_ids", "Input", {"shape": (seq_len,), "dtype": "int64", "vocab": c["vocab_size"]}, [],
                scope="")
    x = b.add("model.embed_tokens", "Embedding", {"num_embeddings": c["vocab_size"], "embedding_dim": h}, [ids],
              scope="model/model.embed_tokens", keep_until="model.norm")  # inputs_embeds: a local of forward
    if mt in ("gemma", "gemma2"):
        x = b.add("model.embed_scale", "Scale", {"factor": float(h) ** 0.5}, [x], scope="model")
    # transformers 5 builds a bool mask for sdpa only when is_causal cannot stand for it: a sliding
    # window no longer than the sequence (masking_utils._ignore_causal_mask_sdpa); 4.x always (versions.py)
    windows = {lt: (c.get("sliding_window") if lt == "sliding_attention" else None) for lt in set(c["layer_types"])}
    eager = default_attention(mt, major) == "eager"  # Gemma2 under 5.x (softcapping): eager, float masks
    masks = {}
    for lt, w in sorted(windows.items()):
        if eager or sdpa_mask_materialised(major, w, seq_len):
            masks[lt] = b.add(f"model.{lt}_mask", "CausalMask",
                              {"sliding_window": int(w or 0), "dtype": "float" if eager else "bool"}, [ids],
                              scope="model")
    cos_sin = b.add("model.rotary_emb", "RotaryEmbedding",
                    {"head_dim": int(hd * c.get("partial_rotary_factor", 1.0)), "theta": float(c["rope_theta"])},
                    [x], scope="model/model.rotary_emb", n_out=2)
    cos, sin = (cos_sin, 0), (cos_sin, 1)
    if int(hd * c.get("partial_rotary_factor", 1.0)) != hd and c.get("model_type") != "phi3":
        raise HfConfigError(f"partial_rotary_factor: {c['partial_rotary_factor']} (partial rotary) is supported for "
                            "phi3 only")
    bias = bool(c.get("attention_bias", False))
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}"
        sc = f"model/{p}"
        norm = "gemma" if mt.startswith("gemma") else "llama"
        rms = {"eps": float(c["rms_norm_eps"]), "variant": norm}
        resid = x
        y = b.add(f"{p}.input_layernorm", "RMSNorm", rms, [x], scope=f"{sc}/{p}.input_layernorm")
        a = f"{p}.self_attn"
        asc = f"{sc}/{a}"
        if mt == "phi3":
            qkv = b.add(f"{a}.qkv_proj", "Linear", {"out_features": (heads + 2 * kvh) * hd, "bias": False}, [y],
                        scope=f"{asc}/{a}.qkv_proj")
            q = b.add(f"{a}.q_slice", "Slice", {"dim": -1, "start": 0, "end": heads * hd}, [qkv], scope=asc)
            k = b.add(f"{a}.k_slice", "Slice", {"dim": -1, "start": heads * hd, "end": (heads + kvh) * hd}, [qkv],
                      scope=asc)
            v = b.add(f"{a}.v_slice", "Slice", {"dim": -1, "start": (heads + kvh) * hd, "end": (heads + 2 * kvh) * hd},
                      [qkv], scope=asc)
        else:
            qb = bias or mt == "qwen2" or (mt == "qwen2_moe" and bool(c.get("qkv_bias", True)))
            q = b.add(f"{a}.q_proj", "Linear", {"out_features": heads * hd, "bias": qb}, [y], scope=f"{asc}/{a}.q_proj")
            k = b.add(f"{a}.k_proj", "Linear", {"out_features": kvh * hd, "bias": qb}, [y], scope=f"{asc}/{a}.k_proj")
            v = b.add(f"{a}.v_proj", "Linear", {"out_features": kvh * hd, "bias": qb}, [y], scope=f"{asc}/{a}.v_proj")
        qh = _heads(b, a, "q", q, heads, hd, seq_len, asc)
        kh = _heads(b, a, "k", k, kvh, hd, seq_len, asc)
        vh = _heads(b, a, "v", v, kvh, hd, seq_len, asc)
        rot = {"concat_pass": mt == "phi3"}
        qh = b.add(f"{a}.q_rotary", "ApplyRotary", rot, [qh, cos, sin], scope=asc)
        kh = b.add(f"{a}.k_rotary", "ApplyRotary", rot, [kh, cos, sin], scope=asc)
        if b.has("KVCache"):
            kv = b.add(f"{a}.kv_cache", "KVCache", {}, [kh, vh], scope=asc, n_out=2)
            kh, vh = (kv, 0), (kv, 1)
        lt = c["layer_types"][i]
        mask = masks.get(lt)
        if eager:
            att = _eager_attention(b, a, asc, qh, kh, vh, mask, n_rep, c)
        else:
            if mask is not None and n_rep > 1:  # use_gqa_in_sdpa: native GQA only without a mask
                kh = b.add(f"{a}.repeat_k", "RepeatKV", {"n_rep": n_rep}, [kh], scope=asc)
                vh = b.add(f"{a}.repeat_v", "RepeatKV", {"n_rep": n_rep}, [vh], scope=asc)
            ins = [qh, kh, vh] + ([mask] if mask is not None else [])
            att = b.add(f"{a}.sdpa", "ScaledDotProductAttention",
                        {"kernel": "fused", "causal": mask is None, "enable_gqa": mask is None and n_rep > 1},
                        ins, scope=asc)
        att = b.add(f"{a}.attn_transpose", "Transpose", {"dim0": 1, "dim1": 2}, [att], scope=asc)
        att = b.add(f"{a}.attn_contiguous", "Contiguous", {}, [att], scope=asc)
        att = b.add(f"{a}.attn_reshape", "Reshape", {"shape": (-1, heads * hd)}, [att], scope=asc)
        o = b.add(f"{a}.o_proj", "Linear", {"out_features": h, "bias": bias}, [att], scope=f"{asc}/{a}.o_proj")
        if mt == "gemma2":
            o = b.add(f"{p}.post_attention_layernorm", "RMSNorm", rms, [o], scope=f"{sc}/{p}.post_attention_layernorm")
        x = b.add(f"{p}.attn_residual", "Add", {}, [resid, o], scope=sc)
        resid = x
        nname = "pre_feedforward_layernorm" if mt == "gemma2" else "post_attention_layernorm"
        y = b.add(f"{p}.{nname}", "RMSNorm", rms, [x], scope=f"{sc}/{p}.{nname}")
        y = _moe(b, f"{p}.mlp", f"{sc}/{p}.mlp", y, c, major) if _sparse(c, i) else _mlp(b, f"{p}.mlp", f"{sc}/{p}.mlp", y, c)
        if mt == "gemma2":
            y = b.add(f"{p}.post_feedforward_layernorm", "RMSNorm", rms, [y],
                      scope=f"{sc}/{p}.post_feedforward_layernorm")
        x = b.add(f"{p}.mlp_residual", "Add", {}, [resid, y], scope=sc)
        if eager:
            # ``hidden_states, _ = self.self_attn(...)``: the probabilities the eager attention
            # returns stay bound to ``_`` until the decoder layer returns
            b.design.nodes[f"{a}.softmax"].keep_until = x
    x = b.add("model.norm", "RMSNorm", {"eps": float(c["rms_norm_eps"]), "variant": "gemma" if mt.startswith("gemma")
                                        else "llama"}, [x], scope="model/model.norm")
    if task == "base":
        return b.finish()
    if task == "classification":
        n_labels = int(c.get("num_labels") or len(c.get("id2label") or {}) or 2)
        s = b.add("score", "Linear", {"out_features": n_labels, "bias": False}, [x], scope="score")
        b.add("pooled_logits", "Select", {"dim": 1, "index": -1}, [s], scope="")
        return b.finish()
    tied = {"weight": "model.embed_tokens.weight"} if c.get("tie_word_embeddings") else None
    logits = b.add("lm_head", "Linear", {"out_features": c["vocab_size"], "bias": False}, [x], scope="lm_head",
                   tied=tied)
    cap = c.get("final_logit_softcapping") if mt == "gemma2" else None
    if cap:
        logits = b.add("logits_softcap_div", "Scale", {"factor": 1.0 / cap}, [logits], scope="")
        logits = b.add("logits_softcap_tanh", "Tanh", {}, [logits], scope="")
        b.add("logits_softcap_mul", "Scale", {"factor": float(cap)}, [logits], scope="")
        # the causal-LM forward's local hidden_states (the final norm's output) outlives the head
        b.design.nodes["model.norm"].keep_until = "logits_softcap_mul"
    return b.finish()


def _heads(b, a, which, t, n, hd, seq_len, scope):
    """x.view(B, T, n, head_dim).transpose(1, 2): views, (n, T, head_dim) per sample."""
    t = b.add(f"{a}.{which}_view", "Reshape", {"shape": (-1, n, hd)}, [t], scope=scope)
    return b.add(f"{a}.{which}_transpose", "Transpose", {"dim0": 1, "dim1": 2}, [t], scope=scope)


def _mlp(b, p, sc, y, c):
    """Gated MLP: down_proj(act(gate_proj(x)) * up_proj(x)); Phi-3 fuses gate and up into one
    gate_up_proj whose output is chunked in two (up * act(gate))."""
    act, aprops = _act(c["hidden_act"])
    inter, h = c["intermediate_size"], c["hidden_size"]
    mb = bool(c.get("mlp_bias", False))
    if c["model_type"] == "phi3":
        gu = b.add(f"{p}.gate_up_proj", "Linear", {"out_features": 2 * inter, "bias": False}, [y],
                   scope=f"{sc}/{p}.gate_up_proj")
        parts = b.add(f"{p}.chunk", "Split", {"chunks": 2, "dim": -1}, [gu], scope=sc, n_out=2)
        g = b.add(f"{p}.activation_fn", act, aprops, [(parts, 0)], scope=f"{sc}/{p}.activation_fn")
        m = b.add(f"{p}.mul", "Multiply", {}, [(parts, 1), g], scope=sc)
    else:
        g = b.add(f"{p}.gate_proj", "Linear", {"out_features": inter, "bias": mb}, [y], scope=f"{sc}/{p}.gate_proj")
        g = b.add(f"{p}.act_fn", act, aprops, [g], scope=f"{sc}/{p}.act_fn")
        u = b.add(f"{p}.up_proj", "Linear", {"out_features": inter, "bias": mb}, [y], scope=f"{sc}/{p}.up_proj")
        m = b.add(f"{p}.mul", "Multiply", {}, [g, u], scope=sc)
    return b.add(f"{p}.down_proj", "Linear", {"out_features": h, "bias": mb}, [m], scope=f"{sc}/{p}.down_proj")


def _sparse(c, i: int) -> bool:
    """Whether decoder layer i's MLP is a sparse MoE block (Qwen2-MoE: every decoder_sparse_step-th
    layer not in mlp_only_layers)."""
    if c["model_type"] == "mixtral":
        return True
    if c["model_type"] == "qwen2_moe":
        return (i not in (c.get("mlp_only_layers") or []) and c["num_experts"] > 0
                and (i + 1) % c["decoder_sparse_step"] == 0)
    return False


def _moe(b, p, sc, y, c, major):
    """MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock as the transformers major runs them inside a
    PreTrainedModel (5: grouped_mm experts; 4: a ModuleList of expert MLPs; balanced routing)."""
    if c["model_type"] == "mixtral":
        props = {"num_experts": c["num_local_experts"], "top_k": c["num_experts_per_tok"],
                 "intermediate_size": c["intermediate_size"], "norm_topk_prob": True}
    else:
        props = {"num_experts": c["num_experts"], "top_k": c["num_experts_per_tok"],
                 "intermediate_size": c["moe_intermediate_size"], "norm_topk_prob": bool(c["norm_topk_prob"]),
                 "shared_expert_intermediate_size": c["shared_expert_intermediate_size"]}
    return b.add(p, "SparseMoE", dict(props, impl=moe_experts_impl(major)), [y], scope=sc)


def _eager_attention(b, a, asc, q, k, v, mask, n_rep, c):
    """Gemma2's eager_attention_forward: repeat_kv, q @ k^T * scaling, soft-capping (/ cap, tanh,
    * cap), + the float mask, softmax in fp32 (.to(q.dtype)), @ v."""
    if n_rep > 1:
        k = b.add(f"{a}.repeat_k", "RepeatKV", {"n_rep": n_rep}, [k], scope=asc)
        v = b.add(f"{a}.repeat_v", "RepeatKV", {"n_rep": n_rep}, [v], scope=asc)
    kt = b.add(f"{a}.k_t", "Transpose", {"dim0": 2, "dim1": 3}, [k], scope=asc)
    w = b.add(f"{a}.scores", "MatMul", {}, [q, kt], scope=asc)
    w = b.add(f"{a}.scaling", "Scale", {"factor": float(c["query_pre_attn_scalar"]) ** -0.5}, [w], scope=asc)
    cap = c.get("attn_logit_softcapping")
    if cap:
        w = b.add(f"{a}.softcap_div", "Scale", {"factor": 1.0 / cap}, [w], scope=asc)
        w = b.add(f"{a}.softcap_tanh", "Tanh", {}, [w], scope=asc)
        w = b.add(f"{a}.softcap_mul", "Scale", {"factor": float(cap)}, [w], scope=asc)
    if mask is not None:
        w = b.add(f"{a}.add_mask", "Add", {}, [w, mask], scope=asc)
    w = b.add(f"{a}.softmax", "Softmax", {"dim": -1}, [w], scope=asc)
    return b.add(f"{a}.attn_v", "MatMul", {}, [w, v], scope=asc)

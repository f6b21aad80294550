"""GPT-2 from its config.json (transformers' GPT2Config), without transformers.

GPT2Model / GPT2LMHeadModel (lm_head tied to wte) / GPT2ForSequenceClassification, op by op as
transformers 5 runs them with the sdpa attention: node ids and names are the HF module paths
(``transformer.h.3.attn.c_attn``), scopes the chain of module calls, and ``keep_until`` the
Python locals that keep a value alive (``residual``, ``query_states``, ``inputs_embeds``).

Conv1D is ``addmm(bias, x, weight)`` with the weight stored (in, out): a Linear here, whose
weight the registry lists as (out, in); the count and the bytes are the same.
"""

from __future__ import annotations

from memdesigner.importers.hf_config._check import Check, check_seq_len
from memdesigner.model import registry
from memdesigner.model.design import Design

# GPT2Config's own defaults (transformers/models/gpt2/configuration_gpt2.py)
DEFAULTS = {
    "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
    "activation_function": "gelu_new", "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
    "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True, "num_labels": 2,
}
# GPT2Config.attribute_map: the generic names a config may use instead
ALIASES = {"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head",
           "num_hidden_layers": "n_layer"}
ACTIVATIONS = {"gelu_new": ("NewGELU", {}), "gelu": ("GELU", {"approximate": "none"}),
               "gelu_pytorch_tanh": ("GELU", {"approximate": "tanh"}), "relu": ("ReLU", {}),
               "silu": ("SiLU", {}), "swish": ("SiLU", {}), "tanh": ("Tanh", {})}
TASKS = ("causal-lm", "classification", "base")


def config_values(config: dict) -> dict:
    """GPT2Config's values for this config.json: its defaults, the attribute-map aliases, and
    num_labels from id2label as PretrainedConfig does."""
    c = dict(DEFAULTS)
    for k, v in config.items():
        c[ALIASES.get(k, k)] = v
    if "num_labels" not in config and isinstance(config.get("id2label"), dict):
        c["num_labels"] = len(config["id2label"])
    for k in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "num_labels"):
        v = c[k]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"config.{k}: {v!r} must be a positive integer")
    ck = Check(c, ValueError)
    ck.layers("n_layer")
    for k in ("vocab_size", "n_positions", "n_embd", "n_head", "num_labels"):
        ck.pos_int(k)
    ck.opt_pos_int("n_inner")
    ck.number("layer_norm_epsilon")
    for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop"):
        ck.prob(k)
    if c["n_embd"] % c["n_head"]:
        raise ValueError(f"config.n_head: {c['n_head']} does not divide n_embd {c['n_embd']}")
    ck.text("activation_function")
    if c["activation_function"] not in ACTIVATIONS:
        raise ValueError(f"config.activation_function: {c['activation_function']!r} is not one of "
                         f"{', '.join(ACTIVATIONS)}")
    return c


def parameter_count(config: dict, task: str = "causal-lm") -> int:
    """What transformers instantiates for this config (tied lm_head counted once)."""
    c = config_values(config)
    e, v, p, n = c["n_embd"], c["vocab_size"], c["n_positions"], c["n_layer"]
    inner = c["n_inner"] or 4 * e
    layer = 2 * 2 * e + (e * 3 * e + 3 * e) + (e * e + e) + (e * inner + inner) + (inner * e + e)
    total = v * e + p * e + n * layer + 2 * e
    if task == "causal-lm" and not c["tie_word_embeddings"]:
        total += v * e
    if task == "classification":
        total += e * c["num_labels"]
    return total


class _Builder:
    def __init__(self, design: Design):
        self.d = design
        self.last = None

    def add(self, nid: str, type_name: str, props: dict, inputs: list, scope: str, keep_until: str = "",
            tied: dict | None = None):
        self.d.add_node(type_name, props, id=nid, name=nid, scope=scope, keep_until=keep_until, tied=tied)
        for port, src in enumerate(inputs):
            s, sp = src if isinstance(src, tuple) else (src, 0)
            self.d.add_edge(s, nid, sp, port, check_cycle=False)
        return nid


def build(config: dict, *, seq_len: int, task: str) -> Design:
    """The design of GPT-2 for ``config`` at ``seq_len`` tokens per sample."""
    if task not in TASKS:
        raise ValueError(f"task: {task!r} is not one of {', '.join(TASKS)}")
    c = config_values(config)
    check_seq_len(seq_len)
    if seq_len > c["n_positions"]:
        raise ValueError(f"seq_len: {seq_len} exceeds the {c['n_positions']} positions of the config (n_positions)")
    e, h, v = c["n_embd"], c["n_head"], c["vocab_size"]
    d_head = e // h
    inner = c["n_inner"] or 4 * e
    eps = float(c["layer_norm_epsilon"])
    name = config.get("_name_or_path") if isinstance(config.get("_name_or_path"), str) else ""
    name = name or "gpt2"
    design = Design(name=str(name).rsplit("/", 1)[-1] or "gpt2")
    b = _Builder(design)
    pre = "" if task == "base" else "transformer."
    top = [pre[:-1]] if pre else []

    def sc(*parts):
        return "/".join(top + list(parts))

    b.add("input_ids", "Input", {"shape": (seq_len,), "dtype": "int64", "vocab": v}, [], "")
    b.add(pre + "wte", "Embedding", {"num_embeddings": v, "embedding_dim": e}, ["input_ids"], sc(pre + "wte"),
          keep_until=pre + "ln_f")  # inputs_embeds: a local of GPT2Model.forward
    b.add(pre + "wpe", "AbsolutePositions", {"num_embeddings": c["n_positions"], "embedding_dim": e},
          ["input_ids"], sc(pre + "wpe"), keep_until=pre + "ln_f")  # position_embeds, likewise
    x = b.add(pre + "add", "Add", {}, [pre + "wte", pre + "wpe"], sc())
    x = b.add(pre + "drop", "Dropout", {"p": float(c["embd_pdrop"])}, [x], sc(pre + "drop"))
    has_cache = registry.has("KVCache")
    act_type, act_props = ACTIVATIONS[c["activation_function"]]
    for i in range(c["n_layer"]):
        p = f"{pre}h.{i}."
        blk = p[:-1]

        def s(*mods, blk=blk):
            return sc(blk, *mods)

        attn = p + "attn"
        ln1 = b.add(p + "ln_1", "LayerNorm", {"eps": eps}, [x], s(p + "ln_1"), keep_until=p + "add")
        qkv = b.add(attn + ".c_attn", "Linear", {"out_features": 3 * e}, [ln1], s(attn, attn + ".c_attn"))
        split = b.add(attn + ".split", "Split", {"chunks": 3, "dim": -1}, [qkv], s(attn))
        heads = []
        for j, t in enumerate("qkv"):
            r = b.add(f"{attn}.view_{t}", "Reshape", {"shape": (-1, h, d_head)}, [(split, j)], s(attn))
            # query_states (a view of c_attn's output) lives until the attention returns
            heads.append(b.add(f"{attn}.transpose_{t}", "Transpose", {"dim0": 1, "dim1": 2}, [r], s(attn),
                               keep_until=attn + ".resid_dropout"))
        q, k, vv = heads
        if has_cache:
            cache = b.add(attn + ".cache", "KVCache", {}, [k, vv], s(attn))
            k, vv = (cache, 0), (cache, 1)
        # GPT2Attention passes dropout=attn_pdrop to sdpa in training
        o = b.add(attn + ".sdpa", "ScaledDotProductAttention",
                  {"kernel": "fused", "causal": True, "dropout": float(c["attn_pdrop"])},
                  [q, k, vv], s(attn))
        o = b.add(attn + ".transpose_out", "Transpose", {"dim0": 1, "dim1": 2}, [o], s(attn))
        o = b.add(attn + ".contiguous", "Contiguous", {}, [o], s(attn))
        o = b.add(attn + ".reshape", "Reshape", {"shape": (-1, e)}, [o], s(attn))
        o = b.add(attn + ".c_proj", "Linear", {"out_features": e}, [o], s(attn, attn + ".c_proj"))
        o = b.add(attn + ".resid_dropout", "Dropout", {"p": float(c["resid_pdrop"])}, [o],
                  s(attn, attn + ".resid_dropout"), keep_until=p + "add_2")  # attn_output, a local of the block
        res = b.add(p + "add", "Add", {}, [o, x], s())
        ln2 = b.add(p + "ln_2", "LayerNorm", {"eps": eps}, [res], s(p + "ln_2"), keep_until=p + "add_2")
        mlp = p + "mlp"
        f = b.add(mlp + ".c_fc", "Linear", {"out_features": inner}, [ln2], s(mlp, mlp + ".c_fc"))
        f = b.add(mlp + ".act", act_type, dict(act_props), [f], s(mlp, mlp + ".act"))
        f = b.add(mlp + ".c_proj", "Linear", {"out_features": e}, [f], s(mlp, mlp + ".c_proj"))
        f = b.add(mlp + ".dropout", "Dropout", {"p": float(c["resid_pdrop"])}, [f], s(mlp, mlp + ".dropout"))
        x = b.add(p + "add_2", "Add", {}, [res, f], s())
    x = b.add(pre + "ln_f", "LayerNorm", {"eps": eps}, [x], sc(pre + "ln_f"))
    if task == "causal-lm":
        tied = {"weight": pre + "wte.weight"} if c["tie_word_embeddings"] else None
        b.add("lm_head", "Linear", {"out_features": v, "bias": False}, [x], "lm_head", tied=tied)
    elif task == "classification":
        sc_ = b.add("score", "Linear", {"out_features": c["num_labels"], "bias": False}, [x], "score")
        # pooled_logits = logits[arange(batch), last_non_pad_token]
        b.add("pooled_logits", "Slice", {"dim": 1, "start": seq_len - 1, "end": seq_len}, [sc_], "")
    return design


__all__ = ["build", "parameter_count", "config_values", "DEFAULTS"]

"""BERT from a Hugging Face config.json (model_type "bert"), no transformers needed.

Tasks, as transformers builds them:

* ``base``: ``BertModel`` (embeddings, encoder, pooler); its outputs are the last hidden state and
  the pooled first token.
* ``classification``: ``BertForSequenceClassification`` (``bert.`` + pooler, dropout
  (classifier_dropout, else hidden_dropout_prob), ``classifier`` to num_labels).
* ``causal-lm``: BERT's language-model head, ``BertForMaskedLM`` (no pooler; transform dense,
  activation, LayerNorm, ``cls.predictions.decoder`` over the vocabulary, its weight tied to the
  word embeddings when tie_word_embeddings). BERT is not a causal model: ``BertLMHeadModel``
  (is_decoder=True) has the same head and parameters, only a causal mask.

Defaults are BertConfig's (transformers 5.24). Nodes that own parameters are named with their
module path (``encoder.layer.3.attention.self.query``, ``bert.`` in front for the task models);
parameter names and counts are transformers' (tied weights counted once). Attention is
``scaled_dot_product_attention`` (transformers' default "sdpa") with attention_probs_dropout_prob
in training; no padding mask (a full batch of seq_len tokens).
"""

from __future__ import annotations

from memdesigner.importers.hf_config._check import Check, check_seq_len
from memdesigner.importers.hf_config._graph import HfConfigError
from memdesigner.model.design import Design

DEFAULTS = {
    "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
    "layer_norm_eps": 1e-12, "pad_token_id": 0, "classifier_dropout": None, "tie_word_embeddings": True,
}
TASKS = ("base", "classification", "causal-lm")
_ACTS = {"gelu": ("GELU", {"approximate": "none"}), "gelu_new": ("GELU", {"approximate": "tanh"}),
         "gelu_pytorch_tanh": ("GELU", {"approximate": "tanh"}), "relu": ("ReLU", {}),
         "silu": ("SiLU", {}), "swish": ("SiLU", {}), "tanh": ("Tanh", {})}


class BertConfigError(HfConfigError):
    """A config value this builder cannot use; the message names the field."""


def config_with_defaults(config: dict) -> dict:
    cfg = dict(DEFAULTS)
    cfg.update({k: v for k, v in config.items() if k in DEFAULTS or k in ("num_labels", "id2label")})
    if "num_labels" not in cfg:
        # PretrainedConfig: num_labels = len(id2label), 2 by default
        cfg["num_labels"] = len(config["id2label"]) if isinstance(config.get("id2label"), dict) else 2
    return cfg


def check(c: dict) -> None:
    """Every value the graph uses (BertConfigError naming the key): positive bounded sizes,
    eps and dropouts in range, a known activation name."""
    ck = Check(c, BertConfigError)
    ck.layers("num_hidden_layers")
    for k in ("vocab_size", "hidden_size", "num_attention_heads", "intermediate_size", "max_position_embeddings",
              "type_vocab_size", "num_labels"):
        ck.pos_int(k)
    ck.number("layer_norm_eps")
    for k in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        ck.prob(k)
    ck.prob("classifier_dropout", optional=True)
    ck.text("hidden_act")


def num_parameters(config: dict, task: str = "base") -> int:
    """transformers' parameter count for the config and task (tied weights once), by formula."""
    c = config_with_defaults(config)
    h, i, n = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    emb = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    total = emb + n * layer
    if task == "causal-lm":
        return total + (h * h + h) + 2 * h + c["vocab_size"] + (0 if c["tie_word_embeddings"] else c["vocab_size"] * h)
    total += h * h + h  # pooler
    if task == "classification":
        total += h * c["num_labels"] + c["num_labels"]
    return total


def build(config: dict, *, seq_len: int, task: str) -> Design:
    if task not in TASKS:
        raise BertConfigError(f"task {task!r}: bert builds {', '.join(TASKS)}")
    c = config_with_defaults(config)
    check(c)
    check_seq_len(seq_len)
    h, heads = c["hidden_size"], c["num_attention_heads"]
    if h % heads:
        raise BertConfigError(f"hidden_size {h} is not a multiple of num_attention_heads {heads}")
    if c["hidden_act"] not in _ACTS:
        raise BertConfigError(f"hidden_act {c['hidden_act']!r} is not one of {', '.join(_ACTS)}")
    if seq_len > c["max_position_embeddings"]:
        raise BertConfigError(f"seq_len {seq_len} exceeds max_position_embeddings {c['max_position_embeddings']}")
    name = {"base": "BertModel", "classification": "BertForSequenceClassification",
            "causal-lm": "BertForMaskedLM"}[task]
    d = Design(name)
    b = _Builder(d, "" if task == "base" else "bert.")
    d.add_node("Input", {"shape": (seq_len,), "dtype": "int64", "vocab": c["vocab_size"]}, id="input_ids",
               name="input_ids")
    x = b.add("BertEmbeddings", "embeddings", "input_ids",
              {k: c[k] for k in ("vocab_size", "hidden_size", "max_position_embeddings", "type_vocab_size",
                                 "layer_norm_eps", "hidden_dropout_prob")})
    emb = x
    for k in range(c["num_hidden_layers"]):
        x = _layer(b, c, f"encoder.layer.{k}", x, seq_len)
    act_type, act_props = _ACTS[c["hidden_act"]]
    # BertModel.forward's local embedding_output lives until it returns
    b.keep(emb, x if task == "causal-lm" else b.prefix + "pooler.activation")
    if task == "causal-lm":
        b.keep(x, "cls.predictions.decoder")  # sequence_output, while the head runs
        t = b.add("Linear", "cls.predictions.transform.dense", x, {"out_features": h}, top=True)
        t = b.add(act_type, "cls.predictions.transform.transform_act_fn", t, act_props, top=True)
        t = b.add("LayerNorm", "cls.predictions.transform.LayerNorm", t, {"eps": c["layer_norm_eps"]}, top=True)
        tied = {"weight": "bert.embeddings.word_embeddings.weight"} if c["tie_word_embeddings"] else {}
        b.add("Linear", "cls.predictions.decoder", t, {"out_features": c["vocab_size"]}, top=True, tied=tied)
        return _folded(d)
    d.nodes[x].output = True  # last_hidden_state is returned as well as pooled
    first = b.add("Select", "pooler.first_token", x, {"dim": 1, "index": 0}, module="pooler")
    p = b.add("Linear", "pooler.dense", first, {"out_features": h})
    p = b.add("Tanh", "pooler.activation", p, {})
    if task == "classification":
        d.nodes[x].output = False  # the classifier's logits are the output
        drop = c["classifier_dropout"] if c["classifier_dropout"] is not None else c["hidden_dropout_prob"]
        p = b.add("Dropout", "dropout", p, {"p": float(drop)}, top=True)
        b.add("Linear", "classifier", p, {"out_features": int(c["num_labels"])}, top=True)
        b.keep(x, "classifier")  # outputs.last_hidden_state, until forward returns
    return _folded(d)


def _layer(b: _Builder, c: dict, pre: str, x: str, t: int) -> str:
    """One BertLayer: self-attention (q, k, v linears, SDPA, output dense, dropout, residual,
    LayerNorm), then the feed-forward (intermediate dense + activation, output dense, dropout,
    residual, LayerNorm)."""
    h, heads = c["hidden_size"], c["num_attention_heads"]
    hd = h // heads
    sa = f"{pre}.attention.self"
    so, o = f"{pre}.attention.output", f"{pre}.output"
    # Python locals that hold a tensor past its last use: the layer's input (the encoder's loop
    # variable) until the layer returns; BertAttention's self_outputs until its output LayerNorm;
    # BertSelfOutput's / BertOutput's hidden_states (dropout's result) until their LayerNorm;
    # feed_forward_chunk's intermediate_output until BertOutput returns
    b.keep(x, b.prefix + f"{o}.LayerNorm")
    qkv = []
    for part in ("query", "key", "value"):
        y = b.add("Linear", f"{sa}.{part}", x, {"out_features": h})
        y = b.add("Reshape", f"{sa}.{part}_view", y, {"shape": (t, heads, hd)}, module=sa)
        qkv.append(b.add("Transpose", f"{sa}.{part}_transpose", y, {"dim0": 1, "dim1": 2}, module=sa))
    a = b.add("ScaledDotProductAttention", f"{sa}.sdpa", qkv,
              {"kernel": "fused", "dropout": float(c["attention_probs_dropout_prob"])}, module=sa)
    a = b.add("Transpose", f"{sa}.out_transpose", a, {"dim0": 1, "dim1": 2}, module=sa)
    a = b.add("Contiguous", f"{sa}.out_contiguous", a, {}, module=sa)
    a = b.add("Reshape", f"{sa}.out_reshape", a, {"shape": (t, h)}, module=sa)
    b.keep(a, b.prefix + f"{so}.LayerNorm")
    a = b.add("Linear", f"{so}.dense", a, {"out_features": h})
    a = b.add("Dropout", f"{so}.dropout", a, {"p": float(c["hidden_dropout_prob"])})
    b.keep(a, b.prefix + f"{so}.LayerNorm")
    a = b.add("Add", f"{so}.residual", [a, x], {}, module=so)
    a = b.add("LayerNorm", f"{so}.LayerNorm", a, {"eps": c["layer_norm_eps"]})
    act_type, act_props = _ACTS[c["hidden_act"]]
    f = b.add("Linear", f"{pre}.intermediate.dense", a, {"out_features": c["intermediate_size"]})
    f = b.add(act_type, f"{pre}.intermediate.intermediate_act_fn", f, act_props)
    b.keep(f, b.prefix + f"{o}.LayerNorm")
    f = b.add("Linear", f"{o}.dense", f, {"out_features": h})
    f = b.add("Dropout", f"{o}.dropout", f, {"p": float(c["hidden_dropout_prob"])})
    b.keep(f, b.prefix + f"{o}.LayerNorm")
    f = b.add("Add", f"{o}.residual", [f, a], {}, module=o)
    return b.add("LayerNorm", f"{o}.LayerNorm", f, {"eps": c["layer_norm_eps"]})


class _Builder:
    """Adds nodes named by module path (``prefix`` is "bert." inside the task models) with the
    scope transformers' module calls give them."""

    def __init__(self, d: Design, prefix: str):
        self.d = d
        self.prefix = prefix

    def add(self, type_name: str, path: str, inputs, props: dict, *, module: str | None = None,
            top: bool = False, tied: dict | None = None) -> str:
        full = path if top else self.prefix + path
        mod = full if module is None else (module if top else self.prefix + module)
        parts = mod.split(".")
        # the chain of module calls; a ModuleList ("encoder.layer") is not called itself
        scope = "/".join(".".join(parts[:k]) for k in range(1, len(parts) + 1)
                         if k == len(parts) or not parts[k].isdigit())
        self.d.add_node(type_name, props, id=full, name=full, scope=scope, tied=tied)
        for port, src in enumerate([inputs] if isinstance(inputs, str) else inputs):
            self.d.add_edge(src, full, 0, port)
        return full

    def keep(self, nid: str, until: str) -> None:
        """A Python variable holds ``nid``'s output until node ``until`` ran."""
        self.d.nodes[nid].keep_until = until


def _folded(d: Design) -> Design:
    """The repeated encoder layers as one block definition x N, where blocks exist."""
    try:
        from memdesigner.model.block_fold import fold_repeats
    except ImportError:
        return d
    return fold_repeats(d)


__all__ = ["DEFAULTS", "TASKS", "BertConfigError", "build", "config_with_defaults", "num_parameters"]

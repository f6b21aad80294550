"""BERT-style input embeddings (transformers' BertEmbeddings): word + token-type + learned absolute
position embeddings, LayerNorm, dropout, as one node (its module path, ``embeddings``), so that the
position table is (max_position_embeddings, hidden) and the two int64 buffers are counted as
transformers registers them."""

from __future__ import annotations

from memdesigner.model.layers._common import fmt
from memdesigner.model.oprules import In, OpMem, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register


def _shape(c):
    x = c.inputs[0]
    if x.kind != "int64" or len(x.shape) != 1:
        raise LayerError("inputs", f"expects int64 token ids (tokens,) per sample, got {x.kind} {fmt(x.shape)}")
    if x.shape[0] > c["max_position_embeddings"]:
        raise LayerError("max_position_embeddings", f"{x.shape[0]} tokens exceed the {c['max_position_embeddings']} "
                                                    "positions")
    return [TensorSpec(x.shape + (c["hidden_size"],))]


def _params(c):
    h, p = c["hidden_size"], c["max_position_embeddings"]
    return [ParamSpec("word_embeddings.weight", (c["vocab_size"], h)),
            ParamSpec("position_embeddings.weight", (p, h)),
            ParamSpec("token_type_embeddings.weight", (c["type_vocab_size"], h)),
            ParamSpec("LayerNorm.weight", (h,)), ParamSpec("LayerNorm.bias", (h,), "bias"),
            ParamSpec("position_ids", (1, p), "buffer", "int64"),
            ParamSpec("token_type_ids", (1, p), "buffer", "int64")]


def _memory(m):
    """forward: the word and token-type lookups (locals until forward returns), their sum, plus
    a (1, T, H) position lookup (a new sum), LayerNorm (keeps its input, mean and rstd), dropout
    (keeps its noise; the LayerNorm output dies). The token-type ids are a (1, T) gather of the
    buffer, expanded over the batch (embedding backward keeps them)."""
    b, t = m.in_shapes[0]
    h = m.props["hidden_size"]
    dt = m.dtype
    full = b * t * h
    word = T(full, dt, "word embeddings (a local until forward returns)")
    tt = T(full, dt, "token-type embeddings (a local until forward returns)")
    pos = T(t * h, dt, "position embeddings (1, T, H)")
    stats = [T(b * t, "float32" if m.backend == "cuda" else dt, "LayerNorm mean"),
             T(b * t, "float32" if m.backend == "cuda" else dt, "LayerNorm rstd")]
    summed = T(full, dt, "word + token type + position")
    p = m.props["hidden_dropout_prob"] if m.training else 0.0
    if not m.records:
        if p:
            ln = T(full, dt, "LayerNorm output")
            out = T(full, dt, "output (dropout)")
            return OpMem(outputs=[out], out_dtypes=[dt], temps=[word, tt, pos, summed, ln, T(full, dt, "dropout noise")]
                         + stats, grad_in=[None])
        out = T(full, dt, "output (LayerNorm)")
        return OpMem(outputs=[out], out_dtypes=[dt], temps=[word, tt, pos, summed] + stats, grad_in=[None])
    gather = T(t, "int64", "token-type ids gathered from the buffer")
    ln_grad = T(full, dt, "LayerNorm input gradient")
    if p:
        out = T(full, dt, "output (dropout)")
        saved = [In(0), gather, summed] + stats + [T(full, dt, "dropout noise")]
        temps = [word, tt, pos, T(full, dt, "LayerNorm output")]
        first = ([T(full, dt, "dropout gradient"), ln_grad], [3, 4], [2, 3, 4, 5])
    else:
        out = T(full, dt, "output (LayerNorm)")
        saved = [In(0), gather, summed] + stats
        temps = [word, tt, pos]
        first = ([ln_grad], [3, 4], [2, 3, 4])
    # backward in two steps: dropout and LayerNorm (their saved tensors die), then the three
    # table gradients (a tied word table's contribution is summed out of place by the engine)
    stages = [first, ([], [], []), ([], [0, 1, 2], [1])]
    return OpMem(outputs=[out], out_dtypes=[dt], saved=saved, temps=temps, grad_in=[None], bwd_stages=stages)


def _flops(c, outs):
    return 3 * outs[0].numel + 5 * outs[0].numel


# the generated file gets this class: transformers' BertEmbeddings.forward (5.24) without transformers
_TORCH_CLASS = '''
class BertEmbeddings(nn.Module):
    """transformers' BertEmbeddings: word + token type (all 0) + position embeddings, LayerNorm, dropout."""

    def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size, layer_norm_eps,
                 hidden_dropout_prob):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(max_position_embeddings).expand((1, -1)), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids):
        batch_size, seq_length = input_ids.shape
        position_ids = self.position_ids[:, :seq_length]
        token_type_ids = torch.gather(self.token_type_ids.expand(position_ids.shape[0], -1), dim=1,
                                      index=position_ids).expand(batch_size, seq_length)
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings = embeddings + position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings
'''
_ARGS = ("vocab_size", "hidden_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps",
         "hidden_dropout_prob")


def _to_torch(e):
    from memdesigner.model.exportspec import TorchExport

    init = f"self.{e.attr} = BertEmbeddings({', '.join(e.lit(k) for k in _ARGS)})"
    return TorchExport(f"self.{e.attr}({e.x})", init=[init], helpers={"BertEmbeddings": _TORCH_CLASS})


def _from_torch(mod):
    """transformers' BertEmbeddings, or the exported one."""
    try:
        v, h = mod.word_embeddings.weight.shape
        return {"vocab_size": int(v), "hidden_size": int(h),
                "max_position_embeddings": int(mod.position_embeddings.weight.shape[0]),
                "type_vocab_size": int(mod.token_type_embeddings.weight.shape[0]),
                "layer_norm_eps": float(mod.LayerNorm.eps), "hidden_dropout_prob": float(mod.dropout.p)}
    except AttributeError:
        return None


BertEmbeddings = register(LayerType(
    name="BertEmbeddings", family="dense",
    doc="BERT input embeddings: word + token type + learned position embeddings, LayerNorm, dropout "
        "(transformers' BertEmbeddings; token types all 0, positions 0..T-1).",
    props=(Prop("vocab_size", "int", 30522, min=1), Prop("hidden_size", "int", 768, min=1),
           Prop("max_position_embeddings", "int", 512, min=1), Prop("type_vocab_size", "int", 2, min=1),
           Prop("layer_norm_eps", "float", 1e-12, min=0.0),
           Prop("hidden_dropout_prob", "float", 0.1, min=0.0, max=1.0)),
    shape=_shape, params=_params, flops=_flops, memory=_memory,
    search_words=("bert", "embedding", "position", "token type", "transformer"),
    torch_ops=("BertEmbeddings",), to_torch=_to_torch, from_torch=_from_torch,
    keeps_for_backward="the token ids, the summed embeddings, LayerNorm's mean and rstd and the dropout noise",
))

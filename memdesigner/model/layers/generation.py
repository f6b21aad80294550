"""Layers of autoregressive language models as Hugging Face writes them: the KV cache, GPT-2's
Python tanh-GELU and its learned absolute position table.

KVCache is what ``Cache.update(key, value, layer_idx)`` does inside an attention layer. Its state
lives across generation steps, so the engine keeps its outputs alive to the end of the step
(``OpMem.persists``) and the generate driver (engine/generate.py) carries them into the next
step, where this op releases the old cache (``OpMem.releases_carried``).
"""

from memdesigner.model.exportspec import TorchExport
from memdesigner.model.oprules import In, OpMem, Out, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register
from memdesigner.units import DTYPE_ALIASES

CACHES = ("none", "dynamic", "static")
KV_DTYPES = ("auto", "fp32", "fp16", "bf16")


def _kv_len(c, new: int) -> int:
    past, mode, max_len = c["past"], c["cache"], c["max_len"]
    if mode == "none":
        return new
    if mode == "static":
        total = max_len or (past + new)
        if past + new > total:
            raise LayerError("max_len", f"the static cache holds {total} tokens, not {past + new}")
        return total
    return past + new


def _kv_shape(c):
    k, v = (x.shape for x in c.inputs)
    if len(k) != 3 or len(v) != 3 or k[:2] != v[:2]:
        raise LayerError("inputs", "key and value must be (kv_heads, tokens, head_dim) per sample, alike")
    if c["cache"] == "none" and c["past"]:
        raise LayerError("past", "a pass-through cache (none) holds no past tokens")
    n = _kv_len(c, k[1])
    return [TensorSpec((k[0], n, k[2])), TensorSpec((v[0], n, v[2]))]


def _kv_mem(m):
    """dynamic: ``keys = torch.cat([keys, k], -2)`` then the same for values, so the old keys die
    once the new keys exist and before the new values are made; static: ``torch.zeros`` of the
    full length on the first call (lazy init), then ``index_copy_`` in place; none: the inputs."""
    mode = m.props["cache"]
    if mode == "none":
        return OpMem(outputs=[In(0), In(1)], out_dtypes=list(m.in_dtypes[:2]), grad_in=["alias", "alias"])
    kd = m.props.get("dtype", "auto")
    dt = DTYPE_ALIASES[kd] if kd != "auto" else m.in_dtypes[0]
    outs = [T(m.out_elems(j), dt, ("keys", "values")[j] + f" cache ({mode})") for j in range(2)]
    if mode == "static" and m.props["past"] > 0:
        # the buffers exist (carried from the previous step); index_copy_ writes into them
        return OpMem(outputs=[T(0, dt, "keys (static buffer)"), T(0, dt, "values (static buffer)")],
                     out_dtypes=[dt, dt], grad_in=["new", "new"], persists=False, releases_carried=False)
    if mode == "static":
        return OpMem(outputs=outs, out_dtypes=[dt, dt], grad_in=["new", "new"], persists=True)
    return OpMem(outputs=outs, out_dtypes=[dt, dt], grad_in=["new", "new"], late_outputs=(1,), persists=True,
                 releases_carried=True)


KVCache = register(LayerType(
    name="KVCache", family="attention",
    doc="The key/value cache of one attention layer (transformers' Cache.update): past + new tokens.",
    props=(Prop("past", "int", 0, min=0, doc="tokens already cached (the generate driver sets it)"),
           Prop("cache", "choice", "none", choices=CACHES,
                doc="none: pass-through (training, use_cache=False); dynamic: torch.cat per step; "
                    "static: preallocated max_len"),
           Prop("max_len", "int", 0, min=0, doc="static cache length; 0 = past + new"),
           Prop("dtype", "choice", "auto", choices=KV_DTYPES, doc="cache storage dtype; auto = the keys' dtype")),
    min_inputs=2, max_inputs=2, n_outputs=2, input_names=("key", "value"), shape=_kv_shape, memory=_kv_mem,
    torch_ops=("DynamicCache.update", "StaticCache.update"), search_words=("kv cache", "past_key_values", "generate"),
    keeps_for_backward="nothing (generation runs without autograd)",
))


def _new_gelu_mem(m):
    """``0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3.0))))`` op by op: 0.5*x is
    made first and lives to the end; each later step frees its input, so three intermediate
    x-sized tensors coexist with x (at 0.044715*pow and at the final product). Autograd keeps x
    (pow), tanh's result and both factors of the product."""
    dt = m.float_in
    n = m.in_elems(0)
    out = T(n, dt, "output")
    if not m.records:
        return OpMem(outputs=[out], out_dtypes=[dt], temps=[T(n, dt, "0.5 * x"), T(n, dt, "intermediate")],
                     grad_in=["new"], elementwise=True)
    saved = [In(0), T(n, dt, "tanh(...)"), T(n, dt, "0.5 * x"), T(n, dt, "1 + tanh(...)")]
    return OpMem(outputs=[out], out_dtypes=[dt], saved=saved, grad_in=["new"], elementwise=True,
                 bwd_temps=[T(n, dt, "gradient term")])


def _float_same(c):
    x = c.inputs[0]
    if x.kind != "float":
        raise LayerError("inputs", "needs a float input")
    return [TensorSpec(x.shape)]


NewGELU = register(LayerType(
    name="NewGELU", family="activation",
    doc="GPT-2's gelu_new written in Python (transformers' NewGELUActivation): eight element-wise ops.",
    shape=_float_same, memory=_new_gelu_mem, flops=lambda c, o: 9 * o[0].numel,
    torch_ops=("NewGELUActivation", "gelu_new"), search_words=("gelu_new", "gpt2", "tanh gelu"),
    # transformers' gelu_new, as its Python writes it
    to_torch=lambda e: TorchExport(f"0.5 * {e.x} * (1.0 + torch.tanh(0.7978845608028654 * ({e.x} + 0.044715 * "
                                   f"torch.pow({e.x}, 3.0))))"),
    keeps_for_backward="its input, tanh's result and both factors of the last product",
))


def _pos_table_shape(c):
    x = c.inputs[0]
    if not x.shape:
        raise LayerError("inputs", "needs a (tokens, ...) input")
    return [TensorSpec((x.shape[0], c["embedding_dim"]))]


def _pos_table_mem(m):
    """``wpe(position_ids)``: a forward makes position ids of shape (1, tokens), one row per position
    shared by the batch (broadcast in the following add); generate passes them per sequence
    (batch, tokens), from the attention mask's cumsum."""
    rows = m.in_shapes[0][1] * (m.batch if m.props["batched"] else 1)
    return OpMem(outputs=[T(rows * m.props["embedding_dim"], m.dtype, "position embeddings")],
                 out_dtypes=[m.dtype], grad_in=[None])


def _pos_check(c):
    if c.inputs and c.inputs[0].shape and c["offset"] + c.inputs[0].shape[0] > c["num_embeddings"]:
        raise LayerError("num_embeddings", f"{c['offset'] + c.inputs[0].shape[0]} positions exceed the table's "
                                           f"{c['num_embeddings']}")
    return [ParamSpec("weight", (c["num_embeddings"], c["embedding_dim"]))]


AbsolutePositions = register(LayerType(
    name="AbsolutePositions", family="tensor",
    doc="A learned absolute position table looked up at arange(tokens) (GPT-2's wpe): (tokens, dim), batch-free.",
    props=(Prop("num_embeddings", "int", 1024, min=1, doc="maximum positions"),
           Prop("embedding_dim", "int", 768, min=1),
           Prop("offset", "int", 0, min=0, doc="first position (tokens already cached)"),
           Prop("batched", "bool", False, doc="position ids per sequence (batch, tokens), as generate passes them")),
    shape=_pos_table_shape, params=_pos_check, memory=_pos_table_mem,
    torch_ops=("wpe",), search_words=("position embedding", "wpe", "gpt2"),
    # GPT-2's wpe(arange(tokens)): one row per position, broadcast
    to_torch=lambda e: TorchExport(
        f"self.{e.attr}(torch.arange({e.lit('offset')}, {e.lit('offset')} + {e.x}.shape[1], device={e.x}.device))[None]",
        init=[f"self.{e.attr} = nn.Embedding({e.lit('num_embeddings')}, {e.lit('embedding_dim')})"]),
    keeps_for_backward="nothing (the positions are arange)",
))

__all__ = ["KVCache", "NewGELU", "AbsolutePositions", "Out"]

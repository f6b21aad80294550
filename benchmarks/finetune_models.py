"""Small Hugging Face configs for benchmarks/finetune.py, and the fine-tuning setups applied to
them the way people do it (peft's get_peft_model, requires_grad_(False) on parts). Random
weights, no hub download; needs transformers and peft (the benchmark venv).

Every factory returns ``(module, input_shape_without_batch)`` with ``truth_input = ("tokens", V)``
for the truth harness (shared/truth/measure.py).
"""
from __future__ import annotations

SEQ = 128
VOCAB = 2048

_LLAMA = dict(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)

ARCHS = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", _LLAMA),
    "qwen2_tied": ("Qwen2ForCausalLM", "Qwen2Config", dict(_LLAMA, tie_word_embeddings=True)),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(vocab_size=VOCAB, n_positions=256, n_embd=256, n_layer=4,
                                                   n_head=4, bos_token_id=0, eos_token_id=0)),
}

# setup name -> how the model is prepared: ("full",) | ("freeze", prefixes) | ("lora", r, targets, dropout)
SETUPS = {
    "full": ("full",),
    "lora_r8_all": ("lora", 8, None, 0.0),
    "lora_r16_qv": ("lora", 16, ("q_proj", "v_proj"), 0.0),
    "lora_r8_all_drop": ("lora", 8, None, 0.05),
    "freeze_embed_first2": ("freeze", None),
    "full_gc": ("full", "gc"),
    "lora_r8_all_gc": ("lora", 8, None, 0.0, "gc"),
}

GPT2_QV = ("c_attn",)  # GPT-2 has one fused qkv projection: peft's q/v targets do not exist there


def freeze_prefixes(arch: str) -> tuple:
    """The parts frozen in the "frozen parts" setup: the embeddings and the first two layers."""
    if arch == "gpt2":
        return ("transformer.wte", "transformer.wpe", "transformer.h.0", "transformer.h.1")
    return ("model.embed_tokens", "model.layers.0", "model.layers.1")


def targets_for(arch: str, targets):
    if targets is None:
        return None
    return GPT2_QV if arch == "gpt2" else targets


def base_model(arch: str):
    import transformers

    cls_name, cfg_name, cfg = ARCHS[arch]
    c = getattr(transformers, cfg_name)(**cfg)
    c.use_cache = False
    return getattr(transformers, cls_name)(c)


def factory(arch: str, setup: str):
    """A truth-harness factory: the model with the setup applied."""
    def make():
        m = base_model(arch)
        kind = SETUPS[setup]
        if kind[-1] == "gc":  # transformers' default: non-reentrant checkpoint of every decoder layer
            m.gradient_checkpointing_enable()
        if kind[0] == "freeze":
            for name, p in m.named_parameters():
                if any(name == f or name.startswith(f + ".") for f in freeze_prefixes(arch)):
                    p.requires_grad_(False)
        elif kind[0] == "lora":
            from peft import LoraConfig, get_peft_model

            _, r, targets, drop = kind[:4]
            tm = list(targets_for(arch, targets)) if targets else "all-linear"
            m = get_peft_model(m, LoraConfig(r=r, lora_alpha=16, lora_dropout=drop, target_modules=tm))
        m.truth_input = ("tokens", VOCAB)
        return m, (SEQ,)

    make.__name__ = f"{arch}_{setup}"
    return make

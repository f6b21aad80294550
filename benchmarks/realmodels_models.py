"""Real networks nobody here wrote, for benchmarks/realmodels.py: torchvision's classification
models, Hugging Face transformers built from small config objects (random weights, no hub
download), and nanoGPT's model.py as published (benchmarks/nanogpt_model.py).

Every factory returns ``(module, input_shape_without_batch)`` like shared/truth/zoo.py; token
models set ``truth_input = ("tokens", vocab)``. Hugging Face models are built with
``use_cache=False`` (a training step keeps no KV cache); their output is the library's
ModelOutput, whose floating-point leaves the truth harness sums the means of. Sizes are small
so that a train step measures in seconds on 2 CPU cores. Needs torchvision and transformers
(the benchmark venv), not the test environment.
"""
from __future__ import annotations

import torch.nn as nn

IMG = 64  # torchvision image size (every model here accepts 64 x 64)
SEQ = 32  # token models: sequence length
VOCAB = 512


def _tv(name, size=IMG, **kw):
    def make():
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None, **kw), (3, size, size)

    make.__name__ = name
    return make


def _tokens(m, vocab=VOCAB):
    m.truth_input = ("tokens", vocab)
    return m, (SEQ,)


def _hf(cls_name, cfg_name, **cfg):
    def make():
        import transformers

        c = getattr(transformers, cfg_name)(**cfg)
        if hasattr(c, "use_cache"):
            c.use_cache = False
        m = getattr(transformers, cls_name)(c)
        if cls_name.startswith("ViT"):
            return m, (3, cfg["image_size"], cfg["image_size"])
        return _tokens(m, cfg.get("vocab_size", VOCAB))

    make.__name__ = cls_name
    return make


_LLAMA = dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
_BERT = dict(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=256, max_position_embeddings=128)


def nanogpt():
    """nanoGPT's GPT without targets: logits of the last position only."""
    from nanogpt_model import GPT, GPTConfig

    return _tokens(GPT(GPTConfig(block_size=64, vocab_size=VOCAB, n_layer=2, n_head=4, n_embd=128,
                                 dropout=0.1, bias=True)))


class NanoGPTWithTargets(nn.Module):
    """``logits, loss = model(X, Y)`` as nanoGPT's train.py calls it (targets = the ids here)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, idx):
        logits, loss = self.gpt(idx, idx)
        return loss


def nanogpt_targets():
    from nanogpt_model import GPT, GPTConfig

    gpt = GPT(GPTConfig(block_size=64, vocab_size=VOCAB, n_layer=2, n_head=4, n_embd=128, dropout=0.0,
                        bias=False))
    return _tokens(NanoGPTWithTargets(gpt))


MODELS = {
    "resnet18": _tv("resnet18"),
    "resnet50": _tv("resnet50"),
    "regnet_y_400mf": _tv("regnet_y_400mf"),
    "densenet121": _tv("densenet121"),
    "convnext_tiny": _tv("convnext_tiny"),
    "swin_t": _tv("swin_t"),
    "efficientnet_b0": _tv("efficientnet_b0"),
    "mobilenet_v2": _tv("mobilenet_v2"),
    "mobilenet_v3_small": _tv("mobilenet_v3_small"),
    "shufflenet_v2_x0_5": _tv("shufflenet_v2_x0_5"),
    "squeezenet1_0": _tv("squeezenet1_0"),
    "googlenet": _tv("googlenet", aux_logits=False, init_weights=False),
    "mnasnet0_5": _tv("mnasnet0_5"),
    "vit_b_16": _tv("vit_b_16", size=32, image_size=32),
    "regnet_x_400mf": _tv("regnet_x_400mf"),
    "mobilenet_v3_large": _tv("mobilenet_v3_large"),
    "squeezenet1_1": _tv("squeezenet1_1"),
    "resnext50_32x4d": _tv("resnext50_32x4d"),
    "shufflenet_v2_x1_0": _tv("shufflenet_v2_x1_0"),
    "llama": _hf("LlamaForCausalLM", "LlamaConfig", **_LLAMA),
    "qwen2_tied": _hf("Qwen2ForCausalLM", "Qwen2Config", tie_word_embeddings=True, **_LLAMA),
    "mistral_sliding": _hf("MistralForCausalLM", "MistralConfig", sliding_window=16, **_LLAMA),
    "gemma": _hf("GemmaForCausalLM", "GemmaConfig", head_dim=32, **_LLAMA),
    "gpt2": _hf("GPT2LMHeadModel", "GPT2Config", vocab_size=VOCAB, n_positions=128, n_embd=128, n_layer=2,
                n_head=4),
    "bert": _hf("BertModel", "BertConfig", **_BERT),
    "distilbert": _hf("DistilBertModel", "DistilBertConfig", vocab_size=VOCAB, dim=128, n_layers=2, n_heads=4,
                      hidden_dim=256, max_position_embeddings=128),
    "hf_vit": _hf("ViTModel", "ViTConfig", image_size=32, patch_size=8, hidden_size=128, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=256),
    "roberta": _hf("RobertaModel", "RobertaConfig", **_BERT),
    "nanogpt": nanogpt,
    "nanogpt_targets": nanogpt_targets,
}
for _k, _f in MODELS.items():
    _f.__name__ = _k

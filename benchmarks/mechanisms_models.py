"""Cases for the accuracy mechanisms of issue 20 (benchmarks/mechanisms.py): each reproduces one
mechanism PyTorch confirms, on a model nobody here wrote or in plain torch as people write it.

* SDPA backend selection on the CPU: dropout_p > 0 in training takes the math path (scaled q / k,
  probabilities, dropout noise and dropped probabilities kept per layer); a padding mask
  (transformers 4.57 materialises BERT's when traced) maps to the layer.
* Generic nodes of a torch.export graph built on meta: lifted tensor constants on meta made the
  fake CPU characterisation fail (transformers 4.57 BERT), so every Generic node went untraced.
* Weights re-parametrised in every forward: timm's NF-ResNet (ScaledStdConv2d standardises its
  weight through F.batch_norm), the same in plain torch with a hand-written weight norm.

Plain-torch cases run in any venv; the transformers / timm ones need the benchmark venv
(/work/venvs/b457: torch 2.14.1, transformers 4.57.6).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from holdout3_models import Case, _hf_text  # noqa: E402


def _named(make, name):
    make.__name__ = name
    return make


class EncoderAttention(nn.Module):
    """BERT's SDPA self-attention: q, k, v are view(B, T, H, D).transpose(1, 2) of three linears."""

    def __init__(self, e=128, h=4, p=0.1):
        super().__init__()
        self.h, self.p = h, p
        self.q, self.k, self.v, self.o = (nn.Linear(e, e) for _ in range(4))

    def forward(self, x, mask=None):
        b, t, e = x.shape

        def heads(y):
            return y.view(b, t, self.h, e // self.h).transpose(1, 2)

        a = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)), attn_mask=mask,
                                           dropout_p=self.p if self.training else 0.0)
        return self.o(a.transpose(1, 2).reshape(b, t, e))


class Encoder(nn.Module):
    def __init__(self, mask=False, layers=2, e=128):
        super().__init__()
        self.mask = mask
        self.emb = nn.Embedding(512, e)
        self.attn = nn.ModuleList(EncoderAttention(e) for _ in range(layers))
        self.ln = nn.ModuleList(nn.LayerNorm(e) for _ in range(layers))
        self.truth_input = ("tokens", 512)

    def forward(self, ids):
        x = self.emb(ids)
        mask = None
        if self.mask:  # BERT's extended float mask (B, 1, 1, T)
            mask = (1.0 - (ids > 0).float())[:, None, None, :] * torch.finfo(x.dtype).min
        for a, ln in zip(self.attn, self.ln):
            x = ln(x + a(x, mask))
        return x


def sdpa_encoder():
    return Encoder(), (64,)


def sdpa_encoder_mask():
    return Encoder(mask=True), (64,)


def nanogpt_dropout():
    from nanogpt_model import GPT, GPTConfig

    m = GPT(GPTConfig(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=128, dropout=0.1, bias=True))
    m.truth_input = ("tokens", 512)
    return m, (64,)


class StdConv(nn.Conv2d):
    """timm's ScaledStdConv2d as written there."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.gain = nn.Parameter(torch.ones(self.out_channels, 1, 1, 1))
        self.scale = self.weight[0].numel() ** -0.5

    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                         weight=(self.gain * self.scale).view(-1), training=True, momentum=0.0,
                         eps=1e-6).reshape_as(self.weight)
        return F.conv2d(x, w, self.bias, self.stride, self.padding)


class NormedLinear(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.v = nn.Parameter(torch.randn(o, i))
        self.g = nn.Parameter(torch.ones(o, 1))

    def forward(self, x):
        return F.linear(x, self.g * self.v / self.v.norm(dim=1, keepdim=True))


class NFCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([StdConv(3, 32, 3, padding=1), StdConv(32, 64, 3, padding=1),
                                    StdConv(64, 128, 3, padding=1, stride=2)])
        self.head = NormedLinear(128, 100)

    def forward(self, x):
        for c in self.convs:
            x = F.relu(c(x))
        return self.head(x.mean((2, 3)))


def nf_cnn():
    return NFCNN(), (3, 32, 32)


def nf_resnet26():
    import timm

    return timm.create_model("nf_resnet26", num_classes=10), (3, 64, 64)


_BERT = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
             max_position_embeddings=128, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)

CASES = {
    "sdpa_encoder-sgd-b4": Case(sdpa_encoder, batch=4),
    "sdpa_encoder_mask-adam-b4": Case(sdpa_encoder_mask, optimizer="adam", batch=4),
    "nanogpt_dropout-sgd-b4": Case(nanogpt_dropout, batch=4),
    "hf_bert_mlm_nopad-adamw-b4": Case(_named(_hf_text("BertForMaskedLM", "BertConfig", "ids", 0, seq=64, **_BERT),
                                              "bert_mlm_nopad"), optimizer="adamw", batch=4),
    "hf_bert_mlm_nopad-infer-b4": Case(_named(_hf_text("BertForMaskedLM", "BertConfig", "ids", 0, seq=64, **_BERT),
                                              "bert_mlm_nopad"), mode="inference", optimizer=None, batch=4),
    "hf_bert_cls_pad-sgd-b4": Case(_named(_hf_text("BertForSequenceClassification", "BertConfig", "class", 5, seq=64,
                                                   **_BERT), "bert_cls_pad"), batch=4),
    "nf_cnn-sgd-b2": Case(nf_cnn),
    "nf_cnn-infer-b2": Case(nf_cnn, mode="inference", optimizer=None),
    "nf_resnet26-sgd-b2": Case(nf_resnet26),
    "nf_resnet26-infer-b2": Case(nf_resnet26, mode="inference", optimizer=None),
}

"""SDPA backend selection on the CPU, measured: with dropout_p > 0 in training no fused CPU
kernel runs (sdp_utils_cpp.cpp: check_for_dropout), so the math path keeps the scaled q and k,
the probabilities, the dropout noise and the dropped probabilities per layer. The importer must
read ``dropout_p`` (fx bakes ``p if self.training else 0.0`` as traced in train mode) and the
rule must follow the math path's forward and backward node by node (phase peaks, not only the
overall one, equal a measured step)."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import memdesigner  # noqa: E402
from memdesigner.engine.settings import Settings  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402
from memdesigner.measure.torch_measure import _builtin_measure  # noqa: E402


class EncoderAttention(nn.Module):
    """BERT's self-attention as transformers 4.57 writes it without a padding mask: q, k, v are
    ``view(B, T, H, D).transpose(1, 2)`` of separate linears (``contiguous``: copied first)."""

    def __init__(self, e=64, h=4, p=0.1, causal=False, contiguous=False, mask=None, frozen=False):
        super().__init__()
        self.h, self.p, self.causal, self.contiguous = h, p, causal, contiguous
        self.q, self.k, self.v, self.o = (nn.Linear(e, e) for _ in range(4))

    def forward(self, x, mask=None):
        b, t, e = x.shape

        def heads(y):
            y = y.view(b, t, self.h, e // self.h).transpose(1, 2)
            return y.contiguous() if self.contiguous else y

        a = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)),
                                           attn_mask=mask, dropout_p=self.p if self.training else 0.0, is_causal=self.causal)
        return self.o(a.transpose(1, 2).reshape(b, t, e))


class Encoder(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.emb = nn.Embedding(128, 64)
        self.attn = nn.ModuleList(EncoderAttention(**kw) for _ in range(2))
        self.ln = nn.ModuleList(nn.LayerNorm(64) for _ in range(2))
        self.mask = kw.get("mask")
        self.head = nn.Linear(64, 64) if kw.get("frozen") else None
        if self.head is not None:  # a frozen encoder in train mode: only the head learns
            for p in [*self.emb.parameters(), *self.attn.parameters(), *self.ln.parameters()]:
                p.requires_grad_(False)
        self.truth_input = ("tokens", 128)

    def forward(self, ids):
        x = self.emb(ids)
        mask = None
        if self.mask == "float":  # BERT's extended mask: (B, 1, 1, T), 0 or the dtype's minimum
            mask = (1.0 - (ids > 3).float())[:, None, None, :] * torch.finfo(x.dtype).min
        elif self.mask == "bool":
            mask = (ids > 3)[:, None, None, :]
        for a, ln in zip(self.attn, self.ln):
            x = ln(x + a(x, mask))
        return self.head(x) if self.head is not None else x


SEQ = 48  # longer than the head size: the scores outweigh q, k, v


def _check(kw, mode):
    s = Settings(backend="cpu", batch=3, **mode)
    res = _builtin_measure(lambda: (Encoder(**kw), (SEQ,)), s, "cpu", "sgd", 2, 0)
    d = from_module(Encoder(**kw), (SEQ,))
    sdpa = [n for n in d.nodes.values() if n.type == "ScaledDotProductAttention"]
    assert len(sdpa) == 2 and all(n.props["dropout"] == kw.get("p", 0.1) for n in sdpa)
    rep = memdesigner.estimate(d, s)
    assert rep.peak_bytes == res["peak_bytes"]
    for ph, b in res["phase_peaks"].items():
        assert rep.phase_peaks[ph] == b, ph


@pytest.mark.parametrize("kw", [{}, {"causal": True}, {"contiguous": True}, {"contiguous": True, "causal": True},
                                {"frozen": True}, {"frozen": True, "contiguous": True}],
                         ids=["views", "views-causal", "contiguous", "contiguous-causal", "frozen", "frozen-contiguous"])
def test_sdpa_dropout_takes_math_path_on_cpu_measured(kw):
    _check(kw, {"mode": "train", "optimizer": "sgd"})


@pytest.mark.parametrize("mode", [{"mode": "train", "optimizer": "sgd"}, {"mode": "inference", "optimizer": "none"}],
                         ids=["train", "inference"])
def test_sdpa_without_dropout_keeps_flash_path_measured(mode):
    _check({"p": 0.0}, mode)


@pytest.mark.parametrize("mode", [{"mode": "train", "optimizer": "sgd"}, {"mode": "inference", "optimizer": "none"}],
                         ids=["train", "inference"])
@pytest.mark.parametrize("kw", [{"mask": "float"}, {"mask": "bool"}, {"mask": "float", "p": 0.0},
                                {"mask": "bool", "p": 0.0}], ids=["float", "bool", "float-flash", "bool-flash"])
def test_sdpa_with_a_padding_mask_is_the_layer_measured(kw, mode):
    """A (B, 1, 1, T) mask (BERT's; transformers 4.57 materialises it when traced) maps to the
    layer: math path with dropout in training (a bool mask made float first, alive to the end),
    flash otherwise (which keeps the float mask for backward)."""
    _check(kw, mode)

"""Conv1d -> transpose -> nn.MultiheadAttention -> residual Add -> Linear, imported from PyTorch.
The MHA rule's backward stages count the incoming gradient's bytes for the v gradient made after
PyTorch freed it; a residual Add hands the same gradient tensor to the other branch too, which
keeps it alive through the whole attention backward (OpMem.grad_out_stands_in, engine/
backward_pass.py). Without that training was one B x L x E float32 tensor low: 2 * 79 * 32 * 4 =
20,224 B (-7.3 %), whatever the layout or kernel; each part alone was exact.

Measured with the truth harness (CPU, torch 2.13, method a), batch 2, 400 samples -> L = 79,
E = 32, 4 heads, SGD. Varying it (a pre-LayerNorm whose output a conditional expression binds)
found an importer gap too: PreNorm below."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class ConvAttention(nn.Module):
    def __init__(self, batch_first=True, need_weights=False, residual=True):
        super().__init__()
        self.conv = nn.Conv1d(1, 32, 10, stride=5)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=batch_first)
        self.fc = nn.Linear(32, 8)
        self.bf, self.nw, self.res = batch_first, need_weights, residual

    def forward(self, x):
        h = self.conv(x[:, None])
        h = h.transpose(1, 2) if self.bf else h.permute(2, 0, 1)
        a = self.attn(h, h, h, need_weights=self.nw)[0]
        return self.fc(a + h if self.res else a)


def _peak(mode, **kw):
    with torch.device("meta"):
        module = ConvAttention(**kw)
    design = from_module(module, (400,))
    return memdesigner.estimate(design, mode=mode, optimizer="sgd" if mode == "train" else "none", batch=2,
                                backend="cpu").peak_bytes


@pytest.mark.parametrize(("kw", "mode", "measured"), [
    ({}, "train", 275_592),
    ({"batch_first": False}, "train", 275_592),
    ({"need_weights": True}, "train", 773_608),
    ({}, "inference", 88_288),
    ({"residual": False}, "train", 255_368),  # no other reader: the stand-in holds
])
def test_a_residual_keeps_the_attention_output_gradient_alive(kw, mode, measured):
    assert _peak(mode, **kw) == measured



class PreNorm(nn.Module):
    """``y = self.ln(h) if self.pre else h``: the local y holds the LayerNorm output to the end of
    forward, as a plain ``y = self.ln(h)`` does (importers/_torch_locals.py). Without it the
    importer let it die after the attention: eval -14,208 B = 2 * 37 * 48 * 4 (-14 %). Measured
    the same way, batch 2, (37, 4) input, E = 48, 6 heads."""

    def __init__(self, pre=True):
        super().__init__()
        self.emb = nn.Linear(4, 48)
        self.ln = nn.LayerNorm(48)
        self.attn = nn.MultiheadAttention(48, 6, batch_first=True)
        self.fc = nn.Linear(48, 8)
        self.pre = pre

    def forward(self, x):
        h = self.emb(x)
        y = self.ln(h) if self.pre else h
        a = self.attn(y, y, y, need_weights=False)[0]
        return self.fc(a + h)


@pytest.mark.parametrize(("mode", "measured"), [("inference", 100_928), ("train", 240_376)])
def test_a_local_bound_by_a_conditional_expression_is_held(mode, measured):
    with torch.device("meta"):
        module = PreNorm()
    est = memdesigner.estimate(from_module(module, (37, 4)), mode=mode, optimizer="sgd" if mode == "train" else "none",
                               batch=2, backend="cpu")
    assert est.peak_bytes == measured

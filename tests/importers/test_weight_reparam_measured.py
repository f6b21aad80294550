"""Weights re-parametrised in every forward, measured: timm's ScaledStdConv2d standardises its
weight with F.batch_norm and a hand-written weight norm computes ``g * v / ||v||``. The computed
weight is a new tensor of the weight's size that the convolution keeps for backward (and a
transient without grad); folding it into the parameter (the mapping's rule for views and casts)
under-estimated training by a fifth. Such a module becomes a Generic node that PyTorch measures."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import memdesigner  # noqa: E402
from memdesigner.engine.settings import Settings  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402
from memdesigner.measure.torch_measure import _builtin_measure  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from mechanisms_models import NormedLinear, StdConv  # noqa: E402  (timm's ScaledStdConv2d, a hand weight norm)


class NFNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([StdConv(3, 32, 3, padding=1), StdConv(32, 64, 3, padding=1),
                                    StdConv(64, 64, 3, padding=1)])
        self.head = NormedLinear(64, 128)

    def forward(self, x):
        for c in self.convs:
            x = F.relu(c(x))
        return self.head(x.mean((2, 3)))


@pytest.mark.parametrize("mode", [{"mode": "train", "optimizer": "sgd"}, {"mode": "train", "optimizer": "adam"},
                                  {"mode": "inference", "optimizer": "none"}], ids=["sgd", "adam", "inference"])
def test_weights_computed_in_forward_are_counted_measured(mode):
    s = Settings(backend="cpu", batch=2, **mode)
    res = _builtin_measure(lambda: (NFNet(), (3, 16, 16)), s, "cpu", s.optimizer if s.optimizer != "none" else "sgd",
                           2, 0)
    d = from_module(NFNet(), (3, 16, 16))
    gen = sorted(n.props["op"] for n in d.nodes.values() if n.type == "Generic")
    assert gen == ["NormedLinear", "StdConv", "StdConv", "StdConv"]
    rep = memdesigner.estimate(d, s)
    assert rep.params == sum(p.numel() for p in NFNet().parameters())
    # within a few hundred bytes (a per-channel vector of the batch_norm's; the weight copies are
    # 3.5 KB ... 147 KB each): without the rule training is 21 % low, inference 23 %
    assert rep.peak_bytes == pytest.approx(res["peak_bytes"], abs=512)
    for ph in ("forward", "backward"):  # (Adam's step of a Generic node's parameters: see the report)
        if ph in res["phase_peaks"]:
            assert rep.phase_peaks[ph] == pytest.approx(res["phase_peaks"][ph], abs=512), ph


class WideStdConv(nn.Module):
    """One standardised convolution whose weight outweighs its activations: the inference peak is
    the computed weight beside the parameters (a view of the parameter, made below autograd,
    must not count as a second copy)."""

    def __init__(self):
        super().__init__()
        self.conv = StdConv(128, 256, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def test_computed_weight_is_one_transient_in_inference_measured():
    s = Settings(backend="cpu", batch=1, mode="inference", optimizer="none")
    res = _builtin_measure(lambda: (WideStdConv(), (128, 4, 4)), s, "cpu", "sgd", 2, 0)
    rep = memdesigner.estimate(from_module(WideStdConv(), (128, 4, 4)), s)
    w = 256 * 128 * 9 * 4
    # parameters (weight, gain, bias), the input, the standardised weight, the output (without grad
    # batch_norm's mean / invstd and the gain * scale product are gone by the convolution)
    assert res["peak_bytes"] == w + 2 * 256 * 4 + 128 * 16 * 4 + w + 256 * 16 * 4
    assert rep.peak_bytes == pytest.approx(res["peak_bytes"], abs=512)

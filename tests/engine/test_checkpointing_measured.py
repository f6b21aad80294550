"""Activation checkpointing against a real checkpoint_sequential run (needs torch and the truth
harness in ../shared/truth)."""

import math
import sys

import pytest
from helpers import TRUTH

torch = pytest.importorskip("torch")
if not (TRUTH / "measure.py").exists():
    pytest.skip("../shared/truth/measure.py not found", allow_module_level=True)
sys.path.insert(0, str(TRUTH))

import memdesigner as md  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

nn = torch.nn


def _layers():
    out, c = [], 3
    for _ in range(6):
        out += [nn.Conv2d(c, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU()]
        c = 32
    return out


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(*_layers())

    def forward(self, x):
        return self.seq(x)


class Checkpointed(Plain):
    def forward(self, x):
        from torch.utils.checkpoint import checkpoint_sequential

        return checkpoint_sequential(self.seq, math.ceil(math.sqrt(len(self.seq))), x, use_reentrant=False)


@pytest.mark.slow
def test_checkpoint_sequential_cnn_is_exact():
    from measure import measure

    design = from_module(Plain(), (3, 32, 32))
    for cls, ck in ((Plain, False), (Checkpointed, True)):
        rec = measure(lambda cls=cls: (cls(), (3, 32, 32)), batch=16, mode="train", optimizer="sgd", methods="a")
        est = md.estimate(design, mode="train", batch=16, optimizer="sgd", backend="cpu", checkpointing=ck)
        assert est.peak_bytes == rec["method_a"]["peak_overall"], cls.__name__
        assert est.phase_peaks["forward"] == rec["method_a"]["steady"]["peak_forward"], cls.__name__

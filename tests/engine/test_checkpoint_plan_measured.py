"""Selective checkpointing against real torch.utils.checkpoint runs (needs torch and the truth
harness in ../shared/truth): the layers named run as non-reentrant checkpoints, and a planned
set measured in PyTorch fits the budget it was planned for."""

import functools
import sys

import pytest
from helpers import TRUTH

torch = pytest.importorskip("torch")
if not (TRUTH / "measure.py").exists():
    pytest.skip("../shared/truth/measure.py not found", allow_module_level=True)
sys.path.insert(0, str(TRUTH))

import memdesigner as md  # noqa: E402
from memdesigner.engine.checkpoint_plan import plan_checkpoints  # noqa: E402
from memdesigner.engine.devices import Device  # noqa: E402
from memdesigner.engine.settings import Settings  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

nn = torch.nn


class Blocks(nn.Module):
    """Four conv-bn-relu blocks of unlike widths and a head; the blocks named in ``ck`` are
    wrapped in torch.utils.checkpoint.checkpoint(use_reentrant=False)."""

    def __init__(self, ck=(), inplace=False):
        super().__init__()
        c, self.ck = 3, set(ck)
        self.blocks = nn.ModuleList()
        for w in (16, 32, 32, 64):
            # VGG style (no BatchNorm, ReLU(inplace=True)): the ReLU saves its output, which is
            # the conv's: the rerun keeps the conv output through that alias
            layers = [nn.Conv2d(c, w, 3, padding=1), nn.ReLU(inplace=True)] if inplace else \
                [nn.Conv2d(c, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU()]
            self.blocks.append(nn.Sequential(*layers))
            c = w
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * 16 * 16, 10))

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        for i, b in enumerate(self.blocks):
            x = checkpoint(b, x, use_reentrant=False) if f"blocks.{i}" in self.ck else b(x)
        return self.head(x)


@functools.cache
def _measured(ck: tuple, inplace: bool = False) -> int:
    from measure import measure

    rec = measure(lambda: (Blocks(ck, inplace), (3, 16, 16)), batch=32, mode="train", optimizer="sgd", methods="a")
    return rec["method_a"]["peak_overall"]


S = Settings(mode="train", batch=32, optimizer="sgd", backend="cpu")


@pytest.mark.slow
@pytest.mark.parametrize("ck", [(), ("blocks.1", "blocks.3"), ("blocks.0", "blocks.1", "blocks.2", "blocks.3")])
def test_named_layers_are_exact(ck):
    design = from_module(Blocks(), (3, 16, 16))
    assert md.estimate(design, S.with_(checkpoint_units=ck)).peak_bytes == _measured(ck)


@pytest.mark.slow
def test_an_in_place_relu_saves_the_rerun_conv_output():
    """Without the alias rule (a value saved through a view or an in-place op keeps the storage
    it shares) the rerun keeps nothing of each conv: 20 % under."""
    ck = ("blocks.0", "blocks.1", "blocks.2", "blocks.3")
    design = from_module(Blocks(inplace=True), (3, 16, 16))
    assert md.estimate(design, S.with_(checkpoint_units=ck)).peak_bytes == _measured(ck, True)


@pytest.mark.slow
def test_a_planned_set_fits_when_measured():
    design = from_module(Blocks(), (3, 16, 16))
    none, every = _measured(()), _measured(("blocks.0", "blocks.1", "blocks.2", "blocks.3"))
    budget = Device("budget", "budget", "cpu", (none + every) // 2, allocator_rounding=1)
    plan = plan_checkpoints(design, S, budget)
    assert plan.fits and 0 < len(plan.units) < 4
    assert _measured(plan.units) == plan.report.peak_bytes <= budget.memory_bytes

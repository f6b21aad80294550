"""The forward and backward fast paths run the live set's alloc() and event() inline for a plain
LiveSet; a subclass (the snapshot writer's logging one) gets the calls. Both must agree to the
byte: every event, the peaks with and without allocator rounding, every storage. (The rounding
slack is kept for a trace only, whose runs take the calls: engine/batch_curve.py.)"""

from pathlib import Path

import pytest

import memdesigner as md
from memdesigner.engine.live_set import LiveSet
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import Simulation
from memdesigner.model.analysis import analyze

EX = Path(__file__).resolve().parents[2] / "resources" / "examples"


class _Called(LiveSet):
    __slots__ = ()


class _CalledSimulation(Simulation):
    def _new_mem(self):
        return _Called(self.rounding)


def _facts(sim) -> tuple:
    m = sim.mem
    return (list(sim.events), m.peak, m.rpeak, m.peak_by, m.peak_at, m.cur, m.rcur, list(m.nb),
            list(m.rnb), list(m.cat), list(m.rc), m.what, dict(sim.rows))


@pytest.mark.parametrize("kw", [dict(mode="inference", batch=3), dict(mode="train", batch=2, optimizer="adam")])
@pytest.mark.parametrize("rounding", [1, 512])
@pytest.mark.parametrize("name", ["resnet18", "transformer_encoder", "mobilenet_v2"])
def test_inline_fast_path_matches_the_calls(kw, rounding, name):
    d = md.load_design(EX / f"{name}.json")
    an = analyze(d)
    s = Settings(**kw)
    lean = Simulation(d, an, s, rounding).run()
    called = _CalledSimulation(d, an, s, rounding).run()
    assert len(lean.events) > 20
    assert _facts(lean) == _facts(called)

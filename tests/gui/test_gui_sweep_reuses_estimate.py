"""The window's batch sweep checks the batch curve against the estimate it just showed (its own
run at the batch, Report.batch_check) instead of simulating that batch again."""

from pathlib import Path

import memdesigner
from memdesigner._qt.jobs import estimator
from memdesigner.engine import batch_curve
from memdesigner.engine.batch_sweep import batch_sweep
from memdesigner.engine.devices import get_device
from memdesigner.engine.settings import Settings

EX = Path(__file__).parent.parent.parent / "resources" / "examples"


def test_the_sweep_runs_the_step_once_beside_the_estimate(monkeypatch):
    design = memdesigner.load_design(EX / "resnet18.json")
    dev = get_device("rtx3080-10gb")
    s = Settings(mode="train", optimizer="adam", backend="cuda")
    batches = []

    class Counting(batch_curve.Simulation):
        def run(self):
            batches.append(self.s.batch)
            return super().run()

    monkeypatch.setattr(batch_curve, "Simulation", Counting)
    svc = estimator.EstimateService(lambda: (design, s, dev))
    swept = []
    svc.sweep_ready.connect(swept.append)
    res = svc.run_sync()
    assert batches == [batch_curve.PROBE]  # only the one probe: batch 1 is the estimate's
    assert swept and swept[0].max_batch == 454
    want = batch_sweep(res.design, s, dev, res.analysis)
    assert (swept[0].batches, swept[0].peaks) == (want.batches, want.peaks)

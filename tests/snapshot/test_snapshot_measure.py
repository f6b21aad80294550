"""Tools -> Measure with PyTorch keeps a memory snapshot of CUDA runs. No GPU here: the CUDA-only
calls live in CudaSnapshotRecorder and are exercised with a fake torch."""

import importlib.util
import pickle
from types import SimpleNamespace

import pytest
from helpers import sequential

from memdesigner.engine.settings import Settings
from memdesigner.measure import torch_measure as tm
from memdesigner.snapshot import load_snapshot, replay

HAS_TORCH = importlib.util.find_spec("torch") is not None


class FakeMemory:
    def __init__(self):
        self.calls = []

    def _record_memory_history(self, enabled="all", **kw):
        self.calls.append(("record", enabled, kw))

    def _snapshot(self):
        self.calls.append(("snapshot",))
        return {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 512, "frames": []}]]}


def fake_torch():
    return SimpleNamespace(cuda=SimpleNamespace(memory=FakeMemory()))


def test_recorder_only_on_cuda():
    assert tm.snapshot_recorder(fake_torch(), "cpu") is None
    assert tm.snapshot_recorder(fake_torch(), "mps") is None
    assert isinstance(tm.snapshot_recorder(fake_torch(), "cuda"), tm.CudaSnapshotRecorder)


def test_recorder_records_history_then_snapshots_and_stops():
    t = fake_torch()
    rec = tm.snapshot_recorder(t, "cuda")
    rec.start()
    snap = rec.stop()
    assert t.cuda.memory.calls == [("record", "all", {"max_entries": tm.SNAPSHOT_MAX_ENTRIES}), ("snapshot",),
                                   ("record", None, {})]
    assert replay(snap).peak_allocated == 512


def test_save_snapshot_writes_what_the_reader_opens(tmp_path):
    t = fake_torch()
    res = {"snapshot": t.cuda.memory._snapshot()}
    tm.save_snapshot(res, tmp_path / "m.pickle")
    assert replay(load_snapshot(tmp_path / "m.pickle")).peak_allocated == 512
    with pytest.raises(ValueError, match="need CUDA"):
        tm.save_snapshot({"snapshot": None, "snapshot_note": tm.SNAPSHOT_UNAVAILABLE.format(device="cpu")},
                         tmp_path / "x.pickle")
    assert pickle.loads((tmp_path / "m.pickle").read_bytes())["segments"] == []


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_measure_keeps_the_snapshot_when_a_recorder_runs(monkeypatch):
    design = sequential((16,), [("Linear", {"out_features": 8})])
    s = Settings(mode="train", batch=2, optimizer="sgd", backend="cpu")
    plain = tm.measure_design(design, s, method="builtin")
    assert plain["snapshot"] is None and plain["snapshot_note"] == "memory snapshots need CUDA: this run was on cpu"
    t = fake_torch()
    monkeypatch.setattr(tm, "snapshot_recorder", lambda torch, device: tm.CudaSnapshotRecorder(t))
    res = tm.measure_design(design, s, method="builtin")
    assert res["snapshot"]["device_traces"][0][0]["size"] == 512 and res["snapshot_note"] is None
    assert res["peak_bytes"] == plain["peak_bytes"]
    assert [c[0] for c in t.cuda.memory.calls] == ["record", "snapshot", "record"]

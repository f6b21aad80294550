"""PyTorch memory snapshots: safe reading, replay (allocated, reserved, phases, blocks from before
recording), `memdesigner snapshot show|compare`, and the estimate written as a snapshot.

The fixtures in tests/fixtures/snapshots are SYNTHETIC (make_snapshots.py writes them in torch's
format; no GPU was available): one Adam step of mlp.json, 512 -> Linear 1024 -> ReLU -> Linear 10,
batch 64, fp32. Expected values below are derived by hand from those tensors (block sizes
rounded up to 512 B as the caching allocator does)."""

import importlib.util
import json
import os
import pickle
import runpy
import sys

import numpy as np
import pytest
from helpers import ROOT

from memdesigner.cli import main
from memdesigner.io.design_file import load_design
from memdesigner.snapshot import SnapshotError, load_snapshot, loads_snapshot, replay
from memdesigner.snapshot.align import align
from memdesigner.snapshot.phases import BACKWARD, FORWARD, OPTIMIZER, UNKNOWN, classify
from memdesigner.snapshot.replay import downsample
from memdesigner.snapshot.writer import estimate_snapshot

FIX = ROOT / "tests" / "fixtures" / "snapshots"
STEP = FIX / "mlp_step.pickle"
TWO = FIX / "mlp_two_steps.pickle"
DESIGN = FIX / "mlp.json"
HAS_TORCH = importlib.util.find_spec("torch") is not None

# tensors of the MLP (bytes; allocator blocks)
W1, B1, W2, B2 = 1024 * 512 * 4, 1024 * 4, 10 * 1024 * 4, 512  # b2: 40 B -> one 512 B block
P = W1 + B1 + W2 + B2  # 2,142,720: the weights; also their gradients, Adam's exp_avg, exp_avg_sq
X = 64 * 512 * 4  # the batch
H = 64 * 1024 * 4  # fc1 output, ReLU output, their gradients
OUT = 64 * 10 * 4  # fc2 output and its gradient
SMALL = 512  # the 0-dim loss and autograd's seed ones_like(loss)

BEFORE = 4 * P + X  # step 2 starts with weights, Adam state, step 1's gradients and x
FORWARD_PEAK = 3 * P + X + 2 * H  # after zero_grad: fc1's output and the ReLU's output together
BACKWARD_PEAK = 3 * P + X + OUT + SMALL + H + W2 + B2 + W1 + B1  # out, loss, ReLU's grad, p.grads
STEP_PEAK = 3 * P + X + OUT + SMALL + P + P  # + the grads + Adam's _foreach_sqrt temporaries
RESERVED = (2 << 20) + (20 << 20)  # one small-pool segment, one large-pool segment (W1 > 1 MiB)


def test_hand_values_are_what_they_say():
    assert (BEFORE, FORWARD_PEAK, BACKWARD_PEAK, STEP_PEAK) == (8_701_952, 7_083_520, 8_967_168, 10_847_744)


# -- reading ---------------------------------------------------------------------------------
class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_without_running(tmp_path, capsys):
    marker = tmp_path / "pwned"
    bad = tmp_path / "evil.pickle"
    bad.write_bytes(pickle.dumps({"segments": [], "device_traces": [[_Evil(marker)]]}, protocol=4))
    with pytest.raises(SnapshotError, match="refuses to load (posix|os|nt).system"):
        load_snapshot(bad)
    assert main(["snapshot", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "evil.pickle" in err and "run code" in err
    assert not marker.exists()
    # the control: a plain pickle.load of the same file does run the command
    pickle.loads(bad.read_bytes())
    assert marker.exists()


@pytest.mark.parametrize("data,msg", [
    (b"not a pickle", "not a PyTorch memory snapshot pickle"),
    (pickle.dumps({"a": 1}), "no 'segments' or 'device_traces'"),
    (pickle.dumps({"segments": [], "device_traces": [[{"action": "explode", "size": 1}]]}), "unknown action"),
    (pickle.dumps({"segments": [{"address": 0}], "device_traces": []}), "segment 0 has no integer 'total_size'"),
    (pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "addr": 1}]]}), "no integer 'size'"),
])
def test_malformed_snapshots_one_line(tmp_path, capsys, data, msg):
    f = tmp_path / "bad.pickle"
    f.write_bytes(data)
    assert main(["snapshot", "show", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err and "bad.pickle" in err


def test_segments_only_list_is_accepted():
    snap = loads_snapshot(pickle.dumps(load_snapshot(STEP)["segments"]))
    rp = replay(snap)
    assert rp.n_events == 0 and rp.peak_allocated == 3 * P + X + OUT + SMALL + P and rp.peak_reserved == RESERVED


# -- replay ----------------------------------------------------------------------------------
def test_step_fixture_replay_counts_blocks_from_before_recording():
    rp = replay(load_snapshot(STEP))
    assert rp.n_events == 44
    assert rp.initial_allocated == BEFORE  # no alloc event for them: live from the start
    assert rp.initial_reserved == RESERVED
    assert rp.peak_allocated == STEP_PEAK
    assert rp.peak_reserved == RESERVED
    assert rp.end_allocated == 3 * P + X + OUT + SMALL + P
    pp = rp.phase_peaks()
    assert {k: v["allocated"] for k, v in pp.items()} == {
        "forward": FORWARD_PEAK, "backward": BACKWARD_PEAK, "optimizer_step": STEP_PEAK}
    # zero_grad's 4 frees (8 events) end the previous step; forward = fc1, relu, free, fc2, loss;
    # backward from ones_like(loss) on; Adam's 4 temporaries and their frees
    assert [(s.phase, s.start, s.end) for s in rp.spans] == [
        ("optimizer_step", 0, 8), ("forward", 8, 14), ("backward", 14, 32), ("optimizer_step", 32, 44)]
    top = dict(rp.top_at_peak)
    assert top["train.py:31 <module> (optim.adam)"] == 3 * P  # exp_avg, exp_avg_sq (before recording), sqrt
    assert top["train.py:20 <module>"] == P  # model.cuda(): allocated before recording, named by the segments
    assert top["<backward, no frames>"] == P  # the gradients, made on autograd's thread
    assert top["mlp.py:13 forward (nn.linear)"] == OUT


def test_two_step_fixture_reserved_grows_with_segment_allocs():
    rp = replay(load_snapshot(TWO))
    assert rp.initial_allocated == 0 and rp.initial_reserved == 0
    assert rp.reserved[0] == 20 << 20  # W1 (2 MiB > 1 MiB): a 20 MiB large-pool segment
    assert rp.reserved[2] == RESERVED  # then b1: a 2 MiB small-pool segment
    assert rp.peak_allocated == STEP_PEAK and rp.peak_reserved == RESERVED
    assert [s.phase for s in rp.spans] == ["forward", "backward", "optimizer_step"] * 2
    pp = rp.phase_peaks()
    assert pp["forward"]["allocated"] == FORWARD_PEAK  # the highest of both steps' forwards: step 2's
    s1 = rp.spans[0]  # step 1: no Adam state, no gradients yet
    assert rp.allocated[s1.start:s1.end].max() == P + X + 2 * H
    assert pp["backward"]["allocated"] == BACKWARD_PEAK


def test_frames_classify_phases():
    t = "/x/site-packages/torch"
    assert classify([]) == UNKNOWN
    assert classify([{"filename": f"{t}/nn/modules/linear.py", "line": 1, "name": "forward"},
                     {"filename": "/me/model.py", "line": 3, "name": "forward"}]) == FORWARD
    assert classify([{"filename": f"{t}/_tensor.py", "line": 1, "name": "backward"},
                     {"filename": "/me/train.py", "line": 3, "name": "<module>"}]) == BACKWARD
    assert classify([{"filename": "??", "line": 0, "name": "torch::autograd::Engine::thread_main"}]) == BACKWARD
    assert classify([{"filename": f"{t}/optim/adamw.py", "line": 1, "name": "_multi_tensor_adamw"}]) == OPTIMIZER
    # torch.no_grad's decorator lives in torch/autograd but is not backward
    assert classify([{"filename": f"{t}/autograd/grad_mode.py", "line": 1, "name": "decorate_context"},
                     {"filename": "/me/eval.py", "line": 3, "name": "run"}]) == FORWARD


def test_downsample_keeps_extremes():
    x = np.arange(1_000_000, dtype=float)
    y = np.zeros(1_000_000)
    y[123_457] = 5.0
    y[777_777] = -3.0
    xs, ys = downsample(x, y, 1000)
    assert len(xs) <= 2000 and ys.max() == 5.0 and ys.min() == -3.0


def test_align_maps_each_phase_onto_the_estimate():
    from memdesigner.engine.estimate import estimate

    rep = estimate(load_design(DESIGN), mode="train", optimizer="adam", batch=64)
    phases = [e.phase for e in rep.timeline]
    ov = align(replay(load_snapshot(TWO)), phases, buckets=None)
    # the last step only: its forward, backward and optimizer spans onto the estimate's
    assert [m[0] for m in ov.matched] == ["forward", "backward", "optimizer_step"]
    assert [m[1] for m in ov.matched] == [(63, 68), (69, 86), (87, 98)]
    fwd_ops = [i for i, p in enumerate(phases) if p == "forward"]
    assert ov.matched[0][2] == (fwd_ops[0], fwd_ops[-1] + 1)
    assert ov.peak_allocated == STEP_PEAK
    assert ov.x[-1] == len(phases)


# -- CLI ------------------------------------------------------------------------------------
def test_cli_show_json(capsys):
    assert main(["snapshot", "show", str(STEP), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["peak_allocated_bytes"] == STEP_PEAK and d["peak_reserved_bytes"] == RESERVED
    assert d["allocated_before_recording_bytes"] == BEFORE
    assert d["phase_peaks"]["backward"]["allocated"] == BACKWARD_PEAK
    assert d["phases"][1] == {"phase": "forward", "first_event": 8, "last_event": 13}


def test_cli_show_table(capsys):
    assert main(["snapshot", "show", str(STEP)]) == 0
    out = capsys.readouterr().out
    assert "peak allocated    10.35 MiB (10,847,744 B) at event 35 (optimizer step)" in out
    assert "phases            optimizer step 0-7, forward 8-13, backward 14-31, optimizer step 32-43" in out


def test_cli_compare_beside_the_estimate(capsys):
    assert main(["snapshot", "compare", str(STEP), str(DESIGN), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = {r["phase"]: r for r in d["rows"]}
    assert rows["forward"]["snapshot_bytes"] == FORWARD_PEAK
    assert rows["peak"]["snapshot_bytes"] == STEP_PEAK
    # the engine, with the allocator's 512 B rounding, on this (synthetic) step
    assert rows["peak"]["estimate_bytes"] == STEP_PEAK and rows["peak"]["error_pct"] == 0.0
    assert rows["forward"]["estimate_bytes"] == FORWARD_PEAK
    assert abs(rows["backward"]["error_pct"]) < 0.05
    assert main(["snapshot", "compare", str(STEP), str(DESIGN)]) == 0
    assert "optimizer step         10.35 MiB       10.35 MiB   +0.00 %" in capsys.readouterr().out


def test_cli_compare_bad_design(tmp_path, capsys):
    assert main(["snapshot", "compare", str(STEP), str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


# -- export ---------------------------------------------------------------------------------
def _examples():
    return sorted((ROOT / "resources" / "examples").glob("*.json"))


@pytest.mark.parametrize("kw", [dict(mode="train", optimizer="adam", batch=4),
                                dict(mode="train", optimizer="adam", batch=2, backend="cpu"),
                                dict(mode="inference", batch=2)])
def test_exported_snapshot_round_trips_the_estimate(kw):
    for path in _examples():
        snap, rep = estimate_snapshot(load_design(path), **kw)
        data = pickle.dumps(snap, protocol=4)
        assert data[1] <= 4  # pickle protocol byte
        rp = replay(loads_snapshot(data))
        assert rp.peak_allocated == rep.peak_bytes, path.name
        assert {k: v["allocated"] for k, v in rp.phase_peaks().items()} == {
            k: v for k, v in rep.phase_peaks.items() if v}, path.name
        assert rp.end_allocated == rp.allocated[-1] and rp.initial_allocated == 0


def test_exported_snapshot_names_layers_and_categories(tmp_path, capsys):
    out = tmp_path / "est.pickle"
    assert main(["export", "snapshot", str(DESIGN), "-o", str(out)]) == 0
    rp = replay(load_snapshot(out))
    rep_peak = 10_844_876  # `memdesigner estimate mlp.json`: live tensor bytes
    assert rp.peak_allocated == rep_peak
    top = dict(rp.top_at_peak)
    assert top["fc1 (Linear)"] == W1 + B1 + W1 + B1  # its weights and their gradients
    assert rp.categories_at_peak["optimizer_state"] == 2 * (W1 + B1 + W2 + 40)
    capsys.readouterr()
    assert main(["export", "snapshot", str(tmp_path / "no.json"), "-o", str(out)]) == 2


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_exported_snapshot_opens_in_torch_memory_viz(tmp_path, capsys, monkeypatch):
    import torch.cuda._memory_viz as mv

    out = tmp_path / "est.pickle"
    assert main(["export", "snapshot", str(DESIGN), "-o", str(out)]) == 0
    with open(out, "rb") as f:
        data = pickle.load(f)  # our own file
    assert "cudaMalloc" in mv.trace(data)
    assert "total_reserved" in mv.segsum(data)  # asserts its own block accounting
    for html in (mv.trace_plot(data), mv.segment_plot(data), mv.trace_plot(data, plot_segments=True)):
        assert "add_local_files" in html
    lines = []
    mv.memory(data, format_flamegraph=lambda s: lines.append(s) or "")
    assert "fc1 (Linear)" in lines[0]
    # its command line, `python -m torch.cuda._memory_viz trace est.pickle`, run in this process
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["_memory_viz", "trace", str(out)])
    monkeypatch.delitem(sys.modules, "torch.cuda._memory_viz")
    runpy.run_module("torch.cuda._memory_viz", run_name="__main__")
    assert "entries" in capsys.readouterr().out


def test_device_choice(tmp_path, capsys):
    one = load_snapshot(STEP)
    snap = {"segments": [dict(s, device=1) for s in one["segments"]], "device_traces": [[], one["device_traces"][0]]}
    f = tmp_path / "two_devices.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    assert main(["snapshot", "show", str(f), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["device"] == 1 and d["peak_allocated_bytes"] == STEP_PEAK  # the device with events
    assert main(["snapshot", "show", str(f), "--device", "0", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["peak_allocated_bytes"] == 0  # device 0: no segments, no events
    assert main(["snapshot", "show", str(f), "--device", "5"]) == 2
    assert "no device 5" in capsys.readouterr().err

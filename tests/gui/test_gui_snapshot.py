"""File -> Open Memory Snapshot draws the (synthetic) MLP snapshot beside the estimate, phase by
phase; a crafted pickle is refused without running; Clear removes it; a measured run's snapshot
is drawn too. Values: tests/snapshot/test_snapshot.py derives them by hand."""

import os
import pickle

import numpy as np
from gui_helpers import load
from helpers import ROOT

from memdesigner._qt.memory import snapshot_view
from memdesigner.io.design_file import load_design
from memdesigner.snapshot import load_snapshot
from memdesigner.snapshot.align import phase_runs

FIX = ROOT / "tests" / "fixtures" / "snapshots"
STEP_PEAK = 10_847_744  # allocated at Adam's step
RESERVED = 22 << 20


def _open(window, qtbot, path):
    snapshot_view.load(window, str(path))
    qtbot.waitUntil(lambda: bool(window.timeline.overlay is not None or window.snapshot_error), timeout=10000)


def test_open_snapshot_draws_allocated_and_reserved_aligned_by_phase(window, qtbot):
    rep = load(window, qtbot, load_design(FIX / "mlp.json"))
    assert rep.settings["mode"] == "train" and rep.settings["batch"] == 64
    _open(window, qtbot, FIX / "mlp_two_steps.pickle")
    tl = window.timeline
    ov = tl.overlay
    assert ov.peak_allocated == STEP_PEAK and ov.peak_reserved == RESERVED
    y = tl._snap_alloc.yData * tl.scale
    assert np.isclose(y.max(), STEP_PEAK) and tl._snap_alloc.isVisible()
    assert np.isclose((tl._snap_reserved.yData * tl.scale).max(), RESERVED)
    # each snapshot phase of the last step lands on the estimate's ops of that phase
    runs = phase_runs([e.phase for e in rep.timeline])
    assert [(m[0], m[2]) for m in ov.matched] == [(p, (a, b)) for p, a, b in runs]
    peak_x = tl._snap_alloc.xData[int(np.argmax(y))]
    opt_a, opt_b = runs[-1][1], runs[-1][2]
    assert opt_a <= peak_x <= opt_b  # the snapshot's peak sits in the estimate's optimizer step
    assert "snapshot mlp_two_steps.pickle" in window.legend.text()
    assert "snapshot: allocated 10.3 MiB, reserved 22.0 MiB" in tl.describe(len(rep.timeline) - 1)  # Adam step
    assert window.act_clear_snapshot.isEnabled()
    # an edit re-estimates: the overlay stays
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.estimate_now()
    assert tl.overlay is not None and tl._snap_alloc.isVisible()
    window.act_clear_snapshot.trigger()  # File -> Clear Memory Snapshot
    assert tl.overlay is None and not tl._snap_alloc.isVisible() and "snapshot" not in window.legend.text()
    assert not window.act_clear_snapshot.isEnabled()


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_snapshot_is_refused_in_the_window(window, qtbot, tmp_path):
    load(window, qtbot, load_design(FIX / "mlp.json"))
    marker = tmp_path / "pwned"
    bad = tmp_path / "evil.pickle"
    bad.write_bytes(pickle.dumps({"segments": [_Evil(marker)], "device_traces": []}))
    _open(window, qtbot, bad)
    assert "refuses to load" in window.snapshot_error and "evil.pickle" in window.snapshot_error
    assert window.timeline.overlay is None
    assert not marker.exists()


def test_measured_run_with_a_snapshot_is_drawn(window, qtbot):
    load(window, qtbot, load_design(FIX / "mlp.json"))
    snap = load_snapshot(FIX / "mlp_step.pickle")
    assert snapshot_view.show_measured(window, {"peak_bytes": STEP_PEAK, "timeline": [], "snapshot": snap})
    qtbot.waitUntil(lambda: window.timeline.overlay is not None, timeout=10000)
    assert window.timeline.overlay.peak_allocated == STEP_PEAK
    assert snapshot_view.show_measured(window, {"peak_bytes": 1, "snapshot": None,
                                                "snapshot_note": "memory snapshots need CUDA: this run was on cpu"}) is None
    assert "need CUDA" in window.statusBar().currentMessage()

"""File -> Open Memory Snapshot on hostile or slow files (issue 22): a memo bomb is refused in one
line naming the limit; a long read has a progress dialog whose Cancel stops the worker's
reading (it ran 33 s with no Cancel) and leaves the timeline as it was."""

import pickle
import sys
import time

from gui_helpers import load
from helpers import ROOT

from memdesigner._qt.memory import snapshot_view
from memdesigner.io.design_file import load_design

sys.path.insert(0, str(ROOT / "benchmarks"))
import fuzz_snapshot  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "snapshots"


def test_memo_bomb_is_one_line_in_the_window(window, qtbot, tmp_path):
    load(window, qtbot, load_design(FIX / "mlp.json"))
    trace = [fuzz_snapshot._ev(i) for i in range(10_000)]
    p = tmp_path / "bomb.pickle"
    p.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace] * 4000}, protocol=4))
    task = snapshot_view.load(window, str(p))
    qtbot.waitUntil(lambda: window.snapshot_error is not None, timeout=10000)
    assert "\n" not in window.snapshot_error and "MEMDESIGNER_MAX_SNAPSHOT_EVENTS" in window.snapshot_error
    assert task.outcome == "failed" and window.timeline.overlay is None


def test_cancel_stops_a_long_snapshot_read(window, qtbot, tmp_path):
    load(window, qtbot, load_design(FIX / "mlp.json"))
    trace = [fuzz_snapshot._ev(i) for i in range(10_000)]
    p = tmp_path / "long.pickle"
    p.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace] * 400}, protocol=4))  # 4 * 10^6 events
    task = snapshot_view.load(window, str(p))
    assert task.dialog is not None  # the progress dialog with Cancel
    qtbot.wait(200)
    assert task.running
    t = time.perf_counter()
    with qtbot.waitSignal(task.thread_done, timeout=5000):
        task.dialog.canceled.emit()  # the dialog's Cancel button
    assert time.perf_counter() - t < 2.0  # the worker saw the event within 65,536 events
    assert task.outcome == "cancelled" and window.snapshot_error is None and window.timeline.overlay is None
    assert "cancelled" in window.statusBar().currentMessage()

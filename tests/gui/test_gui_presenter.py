"""The views render the engine's report fields and compute no memory of their own."""

import dataclasses

import numpy as np

import memdesigner as md
from memdesigner._qt.memory.summary import SummaryPanel
from memdesigner._qt.memory.timeline import TimelinePlot
from memdesigner.units import format_bytes


def test_summary_names_rounding_and_runtime_apart(qtbot):
    """The gap between the device peak and the tensors is allocator rounding plus the CUDA
    runtime; it was all labelled "CUDA runtime"."""
    from gui_helpers import small_cnn

    rep = md.estimate(small_cnn(), device="a100-40gb", batch=3)
    assert rep.rounding_bytes > 0 and rep.runtime_overhead_bytes > 0
    assert rep.rounding_bytes + rep.runtime_overhead_bytes == rep.device_peak_bytes - rep.peak_bytes
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_report(rep)
    assert panel.peak.sub.text() == (f"{format_bytes(rep.peak_bytes)} tensors + {format_bytes(rep.rounding_bytes)} "
                                     f"allocator rounding + {format_bytes(rep.runtime_overhead_bytes)} CUDA runtime")


def test_timeline_marks_the_reports_peak_not_its_own(qtbot):
    """The timeline used to take the highest of its events as the peak; it shows the report's
    peak_bytes at report.peak_event."""
    from gui_helpers import small_cnn

    rep = md.estimate(small_cnn(), mode="train", optimizer="adam", batch=2)
    assert rep.timeline[rep.peak_event].bytes == rep.peak_bytes == max(e.bytes for e in rep.timeline)
    k = 2  # pretend the engine placed its peak at an earlier event: the view must follow
    fake = dataclasses.replace(rep, peak_bytes=rep.timeline[k].bytes)
    assert fake.peak_event == k != rep.peak_event
    plot = TimelinePlot()
    qtbot.addWidget(plot)
    plot.set_report(fake)
    xs, ys = plot._peak_mark.getData()
    assert list(xs) == [k + 0.5] and np.isclose(ys[0] * plot.scale, rep.timeline[k].bytes)
    assert format_bytes(fake.peak_bytes, 2) in plot.peak_label.toPlainText()


def test_measured_runs_align_phase_by_phase():
    from memdesigner.snapshot.align import align_measured

    est = ["forward"] * 4 + ["backward"] * 4 + ["optimizer_step"] * 2
    values = [10, 20, 30, 40, 50, 60, 70]
    phases = [None, "forward", "forward", "backward", "backward", "optimizer_step", None]
    x, y = align_measured(est, values, phases)
    assert list(x) == [2.0, 4.0, 6.0, 8.0, 10.0] and list(y) == [20, 30, 40, 50, 60]
    x, y = align_measured(est, values, None)  # an old measurement without phases: stretched
    assert len(x) == 7 and x[0] == 0 and x[-1] == 10


def test_an_estimate_shows_the_timeline_first_and_the_canvas_a_turn_later(window, qtbot, monkeypatch):
    """The verdict and the timeline (what an edit is made to see change) are shown in the
    result's first event-loop turn; the canvas labels, inspector and table in the next, with the
    event loop (input, timers) running between. The canvas used to go first, the timeline a
    turn later."""
    import time

    from gui_helpers import load, small_cnn
    from PySide6.QtCore import QTimer

    load(window, qtbot, small_cnn())
    window.split_paint = True
    log = []
    real_show, real_apply = window.rank_picker.show_report, window.scene.apply_result

    def show(*a):
        real_show(*a)
        log.append("timeline")
        time.sleep(0.003)  # a turn long enough for the heartbeat to be due when it ends

    monkeypatch.setattr(window.rank_picker, "show_report", show)
    monkeypatch.setattr(window.scene, "apply_result", lambda *a: (log.append("canvas"), real_apply(*a)))
    beat = QTimer()
    beat.setInterval(1)
    beat.timeout.connect(lambda: log and log[-1] == "timeline" and log.append("beat"))
    beat.start()
    shown = []
    window.presenter.timeline_shown.connect(shown.append)
    with qtbot.waitSignal(window.result_applied, timeout=5000) as got:
        window.settings_bar.apply_dict({"batch": 5})
    beat.stop()
    assert log == ["timeline", "beat", "canvas"]
    assert shown == [got.args[0]] and window.timeline.report is window.result.report


def test_a_new_estimate_restyles_the_inspectors_banner_only_when_its_look_changes(window, qtbot, monkeypatch):
    """Each estimate re-set the banner's style sheet (a re-polish, 3-15 ms of the UI thread) even
    when nothing about it changed; now only a change of its look or text touches it."""
    from gui_helpers import load, small_cnn

    load(window, qtbot, small_cnn())
    ins = window.inspector
    window.select_node("fc")
    ins.apply_analysis(window.result.analysis)
    calls = []
    monkeypatch.setattr(ins.issue_label, "setStyleSheet", lambda s: calls.append(s))
    ins.apply_analysis(window.result.analysis)  # the next estimate: the same verdict for this layer
    assert calls == []
    ins._node_issue = ("Not connected yet", True)
    ins._update_banner()  # a calm note instead of nothing: another look
    assert len(calls) == 1

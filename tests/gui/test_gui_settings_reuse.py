"""A run-setting change re-estimates the design's last snapshot with its analysis: nothing is
copied or re-analysed on the way (a big design's snapshot and shape analysis cost tens of ms);
a graph edit takes a fresh snapshot."""

from gui_helpers import load, small_cnn

import memdesigner
from memdesigner._qt.jobs import estimator


def test_settings_change_reuses_the_snapshot_and_its_analysis(window, qtbot, monkeypatch):
    load(window, qtbot, small_cnn())
    calls = []
    real = estimator.analyze
    monkeypatch.setattr(estimator, "analyze", lambda d: calls.append(d) or real(d))
    monkeypatch.setattr(estimator, "snapshot", lambda *a, real=estimator.snapshot: calls.append("snapshot") or real(*a))
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.settings_bar.apply_dict({"batch": 16})
    assert calls == []  # neither copied nor analysed again
    rep = window.result.report
    assert rep.settings["batch"] == 16
    assert rep.peak_bytes == memdesigner.estimate(window.design, window.settings_bar.settings()).peak_bytes
    # a graph edit: a new snapshot and its analysis, and the estimate follows the edit
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.design.set_prop("fc", "out_features", 20)
    assert "snapshot" in calls and len(calls) == 2
    assert window.result.report.params != rep.params

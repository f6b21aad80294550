"""The live estimate runs on the one background-work mechanism (_qt/scheduling/worker.py) when it is costly:
the snapshot, the estimate and what the views draw are made off the UI thread, one job at a
time, and the latest edit wins (a result older than it is never shown). A short one runs on the
UI thread (_qt/scheduling/estimate_timing.py; tests/gui/test_gui_estimate_timing.py)."""

import threading

from gui_helpers import load, small_cnn

import memdesigner
from memdesigner._qt.jobs import estimator
from memdesigner._qt.memory import timeline_data
from memdesigner._qt.scheduling import worker


def test_the_estimate_and_its_snapshot_run_on_the_worker_mechanism(window, qtbot, monkeypatch):
    load(window, qtbot, small_cnn())
    assert isinstance(window.service.jobs, worker.Latest)
    window.service.timing.last_cost_ms = 100.0  # as if the last estimate had cost 100 ms: the worker's
    threads = {"snapshot": [], "figure": []}
    real_snapshot, real_build = estimator.snapshot, timeline_data.build
    monkeypatch.setattr(estimator, "snapshot",
                        lambda *a: threads["snapshot"].append(threading.current_thread()) or real_snapshot(*a))
    monkeypatch.setattr(timeline_data, "build",
                        lambda *a, **k: threads["figure"].append(threading.current_thread()) or real_build(*a, **k))
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.design.set_prop("fc", "out_features", 20)
    main = threading.main_thread()
    # the copy of the design and the timeline's drawing are made on the worker, not the UI thread
    assert threads["snapshot"] and threads["figure"]
    assert main not in threads["snapshot"] and main not in threads["figure"]
    res = window.result
    assert res.figure is not None and res.figure.events is res.report.timeline
    assert window.timeline.figure is res.figure  # the timeline drew the worker's figure as it is
    assert res.report._layers is not None  # the layer rows too were built on the worker
    assert res.report.params == memdesigner.estimate(window.design, window.settings_bar.settings()).params


def test_a_result_older_than_the_latest_edit_is_dropped(window, qtbot, monkeypatch):
    load(window, qtbot, small_cnn())
    release = threading.Event()
    started, running, overlaps = [], [], []
    real = estimator.compute

    def slow_compute(req, cancel=None):
        if running:
            overlaps.append(req.gen)
        running.append(req.gen)
        started.append(req)
        try:
            if len(started) == 1:  # the first edit's estimate is still running when the second comes
                release.wait(10)
            return real(req, cancel)
        finally:
            running.remove(req.gen)

    monkeypatch.setattr(estimator, "compute", slow_compute)
    monkeypatch.setattr(window.service.timing, "inline_budget_ms", -1.0)  # every estimate on the worker
    applied = []
    window.result_applied.connect(applied.append)
    window.design.set_prop("fc", "out_features", 20)
    qtbot.waitUntil(lambda: len(started) == 1, timeout=10000)
    first = started[0]
    first_task = window.service.jobs.running
    window.design.set_prop("fc", "out_features", 30)  # the latest edit
    assert first_task.cancel_event.is_set()  # the stale job was told to stop
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        qtbot.wait(100)  # the second edit's debounce fires; it waits for the worker to be free
        release.set()
    qtbot.wait(200)
    assert first.gen not in applied and applied == [window.service.gen]
    assert overlaps == []  # one job at a time: the second never ran beside the first
    assert window.result.report.layers[-1].output_shape[-1] == 30  # the latest edit's estimate
    assert window.design.nodes["fc"].props["out_features"] == 30


def test_latest_runs_one_job_at_a_time_and_delivers_only_the_newest(qtbot):
    from PySide6.QtCore import QObject

    owner = QObject()
    jobs = worker.Latest(owner)
    gate = threading.Event()
    active, most, got = [0], [0], []

    def job(value, wait=False):
        def fn(cancel):
            active[0] += 1
            most[0] = max(most[0], active[0])
            if wait:
                gate.wait(10)
            active[0] -= 1
            return value
        return fn

    jobs.submit(job("a", wait=True), got.append)
    qtbot.waitUntil(lambda: active[0] == 1, timeout=10000)
    jobs.submit(job("b"), got.append)  # replaces nothing running yet: waits for "a"'s thread
    jobs.submit(job("c"), got.append)  # replaces "b", which never runs
    assert jobs.busy
    gate.set()
    qtbot.waitUntil(lambda: not jobs.busy and jobs.running is None, timeout=10000)
    assert got == ["c"] and most[0] == 1
    assert jobs.shutdown(1000)


def test_the_worker_estimate_runs_with_the_cyclic_collector_paused(window, qtbot, monkeypatch):
    """A full collection over the window's objects (~100 ms at 1,000 nodes) set off by the
    shape analysis or the timeline's drawing held the GIL and stalled the UI thread as long."""
    import gc

    load(window, qtbot, small_cnn())
    seen = []
    real_analyze, real_build = estimator.analyze, timeline_data.build
    window.service.timing.last_cost_ms = 100.0  # the worker's
    monkeypatch.setattr(estimator, "analyze", lambda d: seen.append(gc.isenabled()) or real_analyze(d))
    monkeypatch.setattr(timeline_data, "build", lambda *a, **k: seen.append(gc.isenabled()) or real_build(*a, **k))
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.design.set_prop("fc", "out_features", 20)
    assert seen == [False, False] and gc.isenabled()  # paused on the worker, back on afterwards


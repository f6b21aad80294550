"""When an edit's estimate starts and where it runs (_qt/scheduling/estimate_timing.py): one edit after a quiet
spell at once, a burst once at its end in its newest state; a short estimate on the UI thread,
shown a turn later (a newer edit in between drops it), a costly one on the worker."""

import threading

import pytest
from gui_helpers import load, small_cnn

from memdesigner._qt.jobs import estimator
from memdesigner._qt.scheduling.estimate_timing import EstimateTiming


def test_one_edit_after_a_quiet_spell_starts_at_once_and_a_burst_waits():
    t = EstimateTiming(min_quiet_ms=40)
    assert t.delay_ms(10.0) == 0  # the first edit: at once
    assert t.delay_ms(10.010) == 40  # 10 ms later: a burst, the quiet spell (40 ms at least)
    assert t.delay_ms(10.030) == 40  # each edit of the burst restarts the wait
    assert t.delay_ms(10.071) == 0  # 41 ms after the last: a new single edit
    t.measured(100.0)  # an estimate that cost 100 ms of CPU: the spell is twice that
    assert t.quiet_ms() == 200
    assert t.delay_ms(10.250) == 200  # 179 ms after the last edit: still the same burst
    assert t.delay_ms(10.451) == 0
    t.measured(1000.0)
    assert t.quiet_ms() == 400  # at most 400 ms


def test_only_a_short_estimate_with_the_worker_free_runs_inline():
    t = EstimateTiming(inline_budget_ms=25)
    assert not t.inline(True)  # no cost measured yet (the first estimate of a file: maybe a big one)
    t.measured(12.0)
    assert t.inline(True) and not t.inline(False)  # (a sweep still finishing: the worker, after it)
    t.measured(30.0)
    assert not t.inline(True)


def test_the_cost_is_predicted_for_the_same_design_and_settings_scaled_by_its_nodes():
    t = EstimateTiming(inline_budget_ms=25)
    t.measured(20.0, key="design A, training", nodes=1000)
    assert t.predicted_ms("design A, training", 1000) == 20.0 and t.inline(True, "design A, training", 1000)
    assert t.predicted_ms("design A, training", 1050) == 21.0  # 5 % more nodes: 5 % more cost
    assert t.predicted_ms("design A, training", 1051) is None  # more: a bulk change (a paste), unknown
    assert t.predicted_ms("design A, training", 1) is None  # deleting all but one: unknown too
    assert t.predicted_ms("design A, 8 pipeline stages", 1000) is None  # other settings: unknown
    assert not t.inline(True, "design A, 8 pipeline stages", 1000) and not t.inline(True, "design A, training", 1)
    t.measured(0.02, key="design A, training", nodes=1)
    assert t.inline(True, "design A, training", 9)  # a few layers added to a small design
    assert not t.inline(True, "design A, training", 1000)  # an undo of the delete: a thousand times the cost


def test_an_undo_that_brings_back_many_layers_is_estimated_on_the_worker(window, qtbot, monkeypatch):
    from memdesigner.model.design import Design

    big = Design("chain")
    prev = big.add_node("Input", {"shape": (8,)}, id="x").id
    for i in range(60):
        cur = big.add_node("Linear", {"out_features": 8}, id=f"l{i}").id
        big.add_edge(prev, cur)
        prev = cur
    load(window, qtbot, big)
    qtbot.wait(60)
    window.select_all()
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.delete_selection()  # one layer's estimate measured: the cheapest there is
    assert window.service.timing.last_nodes == 0
    window.service.timing.last_cost_ms = 0.01  # (so that 61 times it is well within any budget)
    threads = []
    real = estimator.analyze
    monkeypatch.setattr(estimator, "analyze", lambda d: threads.append(threading.current_thread()) or real(d))
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.stack.undo()  # 61 layers back: a bulk change, its cost unknown -> the worker
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
    assert len(window.result.report.layers) == 61


def test_a_single_edit_is_estimated_at_once_and_a_burst_of_edits_once(window, qtbot, monkeypatch):
    load(window, qtbot, small_cnn())
    svc = window.service
    qtbot.wait(round(svc.timing.quiet_ms()) + 20)  # a quiet spell after the load's estimate
    window.design.set_prop("fc", "out_features", 11)
    assert svc._timer.isActive() and svc._timer.interval() == 0  # no debounce for a single edit
    qtbot.waitUntil(lambda: window.result.report.layers[-1].output_shape[-1] == 11, timeout=5000)
    qtbot.wait(60)
    calls = []
    real = estimator.compute
    monkeypatch.setattr(estimator, "compute", lambda req, *a, **k: calls.append(req.gen) or real(req, *a, **k))
    for v in (1, 2, 3, 4, 5):  # a burst (a held spin-box arrow): one estimate, of its newest state
        window.design.set_prop("fc", "out_features", v)
    assert svc._timer.interval() == round(svc.timing.quiet_ms()) >= 40
    qtbot.waitUntil(lambda: window.result.report.layers[-1].output_shape[-1] == 5, timeout=5000)
    qtbot.wait(100)
    assert len(calls) == 1


def test_a_short_estimate_runs_on_the_ui_thread_and_shows_a_turn_later(window, qtbot, monkeypatch):
    import gc

    load(window, qtbot, small_cnn())
    svc = window.service
    assert svc.timing.last_cost_ms < 25  # the small CNN: a few ms
    steps = []
    real_compute, real_views = estimator.compute, estimator.add_views

    def compute(req, cancel=None, views=True):
        res = real_compute(req, cancel, views=views)
        steps.append(("estimate", threading.current_thread(), views, gc.isenabled()))
        return res

    def add_views(res):
        # the timer's turn after the estimate's: the pending result was taken out, none shown yet
        steps.append(("views", threading.current_thread(), svc._inline is None, res.figure is None))
        return real_views(res)

    monkeypatch.setattr(estimator, "compute", compute)
    monkeypatch.setattr(estimator, "add_views", add_views)
    shown = []
    svc.result_ready.connect(lambda res: shown.append((len(steps), res.gen)))
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.design.set_prop("fc", "out_features", 20)
    main = threading.main_thread()
    assert steps == [("estimate", main, False, True), ("views", main, True, True)]
    assert shown == [(2, svc.gen)] and window.result.figure is not None
    assert window.result.report.layers[-1].output_shape[-1] == 20


def test_an_edit_between_the_inline_estimate_and_its_showing_drops_it(window, qtbot, monkeypatch):
    load(window, qtbot, small_cnn())
    svc = window.service
    real = estimator.compute
    edited = []

    def compute(req, cancel=None, views=True):
        res = real(req, cancel, views=views)
        if not edited:  # the next edit arrives before the turn that would show this estimate
            edited.append(req.gen)
            window.design.set_prop("fc", "out_features", 30)
        return res

    monkeypatch.setattr(estimator, "compute", compute)
    shown = []
    svc.result_ready.connect(lambda res: shown.append((res.gen, res.report.layers[-1].output_shape[-1])))
    window.design.set_prop("fc", "out_features", 20)
    qtbot.waitUntil(lambda: bool(shown), timeout=5000)
    qtbot.wait(100)
    assert edited and [v for _, v in shown] == [30] and shown[0][0] > edited[0]


@pytest.mark.parametrize("cost_ms", [None, 100.0])
def test_a_costly_or_unknown_estimate_goes_to_the_worker(window, qtbot, monkeypatch, cost_ms):
    load(window, qtbot, small_cnn())
    window.service.timing.last_cost_ms = cost_ms
    threads = []
    real = estimator.analyze
    monkeypatch.setattr(estimator, "analyze", lambda d: threads.append(threading.current_thread()) or real(d))
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.design.set_prop("fc", "out_features", 20)
    assert len(threads) == 1 and threads[0] is not threading.main_thread()


def test_a_batch_change_stays_inline_and_another_mode_goes_to_the_worker(window, qtbot, monkeypatch):
    load(window, qtbot, small_cnn())
    threads = []
    real = estimator.estimate
    monkeypatch.setattr(estimator, "estimate", lambda *a, **k: threads.append(threading.current_thread())
                        or real(*a, **k))
    sb = window.settings_bar
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        sb.batch.setValue(sb.batch.value() + 3)  # the batch size: the cost is the same
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        sb.mode.setCurrentIndex(sb.mode.findData("train"))  # training: a cost of its own, unknown
    main = threading.main_thread()
    assert len(threads) == 2 and threads[0] is main and threads[1] is not main


def test_a_single_edit_for_the_worker_still_waits_the_short_delay(window, qtbot, monkeypatch):
    """Started at once, the worker fought the edit's own next turns (repaints, canvas slices) for
    the GIL; only an estimate made on the UI thread starts at once."""
    load(window, qtbot, small_cnn())
    svc = window.service
    svc.timing.last_cost_ms = 100.0  # too costly for the UI thread
    qtbot.wait(round(svc.timing.quiet_ms()) + 20)  # a quiet spell (200 ms at that cost)
    calls = []
    real = estimator.compute
    monkeypatch.setattr(estimator, "compute", lambda req, *a, **k: calls.append(req.gen) or real(req, *a, **k))
    window.design.set_prop("fc", "out_features", 12)
    assert svc._timer.interval() == 0
    svc._timer.stop()
    svc.fire()  # the 0 ms timer's turn: not for the worker yet
    assert calls == [] and svc._timer.isActive() and svc._timer.interval() == 40
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        pass
    assert len(calls) == 1 and window.result.report.layers[-1].output_shape[-1] == 12

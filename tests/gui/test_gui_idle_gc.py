"""Full garbage collections wait for an idle window (_qt/scheduling/idle_gc.py): automatic ones (a 50-100 ms
walk of every object at 1,000 layers, at a random allocation) are off while a window lives."""

import gc
import weakref

from memdesigner._qt.scheduling import idle_gc


class _Cycle:
    def __init__(self):
        self.me = self


def _old_cycle():
    """Garbage only a full collection frees: a reference cycle promoted to the oldest generation."""
    obj = _Cycle()
    gc.collect()  # (obj is alive: it moves to generation 2)
    ref = weakref.ref(obj)
    del obj
    return ref


def test_full_collections_wait_for_a_quiet_window(window, qtbot, monkeypatch):
    assert gc.get_threshold()[2] == idle_gc.NEVER  # no automatic full collection while the window lives
    col = window.idle_gc
    col.due = 0
    ref = _old_cycle()
    busy = [True]
    col.busy = lambda: busy[0]
    col.last_activity = 0.0
    assert not col.check()  # the canvas is building / an estimate runs: not now
    assert ref() is not None
    busy[0] = False
    col.activity()  # an edit just now: not quiet yet
    assert not col.check()
    col.last_activity -= idle_gc.QUIET_S
    assert col.check()
    assert ref() is None
    ref = _old_cycle()
    busy[0] = True
    monkeypatch.setattr(gc, "get_count", lambda: (0, 0, idle_gc.OVERDUE))
    assert col.check()  # long overdue: collected even though the window never rests
    assert ref() is None


def test_python_thresholds_come_back_when_the_last_collector_goes(qapp):
    from PySide6.QtCore import QObject

    before = gc.get_threshold()
    owner = QObject()
    idle_gc.IdleCollector(owner, lambda: False)
    assert gc.get_threshold()[2] == idle_gc.NEVER
    del owner  # (its collector goes with it)
    assert gc.get_threshold() == before


def test_the_windows_collector_watches_a_file_being_read_and_the_edits(window, qtbot):
    """The window hands the collector the parts it watches (idle_gc.install): File -> Open's task,
    the canvas, the estimate service, the undo stack."""
    from types import SimpleNamespace

    col = window.idle_gc
    qtbot.waitUntil(lambda: not col.busy(), timeout=5000)  # the first estimate landed
    window.open_task = SimpleNamespace(running=True)  # a big file read on the worker
    assert col.busy()
    window.open_task.running = False
    assert not col.busy()
    col.last_activity = 0.0
    window.stack.indexChanged.emit(0)  # an edit
    assert col.last_activity > 0.0

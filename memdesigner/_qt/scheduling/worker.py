"""Work off the UI thread: one mechanism, on superqt's ``create_worker``, for the live estimate
and its batch sweep, import, measure and explain.

The job runs on a worker thread and gets a ``threading.Event`` that Cancel sets; jobs that run a
child process (a model file, a PyTorch measurement) kill it when they see the event. A cancelled
job's result is dropped, so the document is left as it was. On-demand jobs (``run``) show a
progress dialog with Cancel; the live estimate uses ``Latest``: one job at a time, each edit
cancelling the one before (latest edit wins, stale results dropped).
"""

from __future__ import annotations

import sys
import threading

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QProgressDialog

SHOW_AFTER_MS = 300  # quick jobs finish before the dialog would flash up
# How long a thread that wants the GIL waits before the running one must hand it over (Python's
# default is 5 ms). The UI thread gives the GIL up in nearly every Qt call, and while an estimate
# runs on the worker each call then cost it up to 5 ms to get it back: a 10 ms paint took 100 ms.
SWITCH_INTERVAL_S = 0.0005
_RUNNING: dict = {}  # worker -> its cancel event, while its thread runs (alive after its window is gone)


class Cancelled(Exception):
    """Raised by a job that saw its cancel event (the task drops it quietly)."""


class Task(QObject):
    """One job: ``fn(cancel_event)`` on a worker thread; exactly one of ``succeeded`` /
    ``failed`` / ``cancelled`` is emitted, on the UI thread."""

    succeeded = Signal(object)
    failed = Signal(object)  # the exception
    cancelled = Signal()
    ended = Signal()  # after whichever of the three
    thread_done = Signal()  # the job's function returned or raised (after a cancel too): its thread is free

    def __init__(self, fn, *, parent, title: str, label: str, progress: bool = True):
        super().__init__(parent)
        from superqt.utils import create_worker

        self.title = title
        self.cancel_event = threading.Event()
        self.outcome: str | None = None  # "succeeded" | "failed" | "cancelled"
        self.dialog: QProgressDialog | None = None
        if progress:
            dlg = QProgressDialog(f"{label}\nCancel stops it; the open design stays as it is.", "Cancel", 0, 0, parent)
            dlg.setMinimumWidth(420)
            dlg.setWindowTitle(title)
            dlg.setWindowModality(Qt.WindowModal)  # the document must not change under the job
            # (QProgressDialog's own timer keeps its 4 s default unless its value is at the minimum:
            # a busy range 0..0 never is, so the show is timed here)
            dlg.setMinimumDuration(10**9)
            QTimer.singleShot(SHOW_AFTER_MS, dlg, lambda: self.outcome is None and dlg.show())
            dlg.setAutoClose(False)
            dlg.setAutoReset(False)
            dlg.canceled.connect(self.cancel)
            self.dialog = dlg
        self._worker = create_worker(fn, self.cancel_event, _ignore_errors=True)
        self._worker.returned.connect(self._returned)
        self._worker.errored.connect(self._errored)
        self._worker.finished.connect(self._finished)
        self._worker.finished.connect(self.thread_done)
        parent.destroyed.connect(self.cancel_event.set)  # the window closed: the job stops too

    def start(self) -> Task:
        w = self._worker
        _RUNNING[w] = self.cancel_event
        w.finished.connect(lambda: _RUNNING.pop(w, None))
        w.start()
        return self

    @property
    def running(self) -> bool:
        return self.outcome is None

    def cancel(self) -> None:
        """Stop waiting for the job (its result will be dropped) and tell it to stop."""
        if self.outcome is not None:
            return
        self.cancel_event.set()
        self._end("cancelled")
        self.cancelled.emit()
        self.ended.emit()

    def _returned(self, value):
        if self.outcome is None:
            self._end("succeeded")
            self.succeeded.emit(value)
            self.ended.emit()

    def _errored(self, err):
        if self.outcome is None:
            if isinstance(err, Cancelled):
                self.cancel()
                return
            self._end("failed")
            self.failed.emit(err)
            self.ended.emit()

    def _finished(self):
        if self.outcome is None:  # neither returned nor raised (superqt aborted it)
            self.cancel()

    def _end(self, outcome: str):
        self.outcome = outcome
        if self.dialog is not None:
            self.dialog.canceled.disconnect(self.cancel)
            self.dialog.close()
            self.dialog.deleteLater()
            self.dialog = None


class Latest(QObject):
    """Background work where only the newest request counts (the live estimate and its sweep):
    ``submit`` cancels the job that runs (its cancel event is set, its result dropped) and starts
    the new one when that job's thread is free, so jobs never run side by side competing for the
    GIL; a job still waiting its turn is replaced by a newer one."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.running: Task | None = None  # the job whose thread is busy (maybe cancelled already)
        self._pending: tuple | None = None  # (fn, on_result, on_error) waiting for the thread
        self._idle = threading.Event()
        self._idle.set()
        from PySide6.QtCore import QThreadPool

        pool = QThreadPool.globalInstance()  # an import and an explanation must not starve the estimate
        pool.setMaxThreadCount(max(pool.maxThreadCount(), 4))
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)

    @property
    def busy(self) -> bool:
        """A job is waiting or running whose result will be delivered."""
        return self._pending is not None or (self.running is not None and self.running.running)

    @property
    def idle(self) -> bool:
        """No job waiting and the thread free (a cancelled job may still be finishing on it)."""
        return self._pending is None and self.running is None

    def submit(self, fn, on_result, on_error=None) -> None:
        """``fn(cancel_event)`` on a worker thread; ``on_result(value)`` / ``on_error(exc)`` on the
        UI thread unless a later submit or cancel came first."""
        self.cancel()
        self._pending = (fn, on_result, on_error)
        self._start_next()

    def cancel(self) -> None:
        """Drop the waiting job and tell the running one to stop; no result of theirs arrives."""
        self._pending = None
        if self.running is not None:
            self.running.cancel()

    def _start_next(self) -> None:
        if self.running is not None or self._pending is None:
            return
        fn, on_result, on_error = self._pending
        self._pending = None
        idle = self._idle
        idle.clear()

        def job(cancel, fn=fn):
            try:
                return fn(cancel)
            finally:
                idle.set()

        task = Task(job, parent=self, title="", label="", progress=False)
        task.succeeded.connect(on_result)
        if on_error is not None:
            task.failed.connect(on_error)
        task.thread_done.connect(lambda t=task: self._thread_done(t))
        self.running = task
        task.start()

    def _thread_done(self, task: Task) -> None:
        if self.running is task:
            self.running = None
        task.deleteLater()
        self._start_next()

    def shutdown(self, wait_ms: int = 5000) -> bool:
        """Cancel everything and wait for the running job's thread (its owner is going away)."""
        self.cancel()
        return self._idle.wait(wait_ms / 1000)


def shutdown(wait_ms: int = 3000) -> bool:
    """Cancel every job still running and wait for their threads (the window is closing): a
    thread must not outlive the objects it reports to. True when all ended in time."""
    from PySide6.QtCore import QThreadPool

    for ev in list(_RUNNING.values()):
        ev.set()
    return QThreadPool.globalInstance().waitForDone(wait_ms)


def run(parent, fn, *, title: str, label: str, on_result, on_error=None, progress: bool = True) -> Task:
    """Start ``fn(cancel_event)`` with a progress dialog; ``on_result(value)`` and
    ``on_error(exc)`` run on the UI thread unless the user cancelled."""
    task = Task(fn, parent=parent, title=title, label=label, progress=progress)
    task.succeeded.connect(on_result)
    if on_error is not None:
        task.failed.connect(on_error)
    return task.start()

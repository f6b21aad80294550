"""On-demand work off the UI thread (import, measure, explain): one mechanism, on superqt's
``create_worker``, with a progress dialog and Cancel.

The job runs on a worker thread and gets a ``threading.Event`` that Cancel sets; jobs that run a
child process (a model file, a PyTorch measurement) kill it when they see the event. A cancelled
job's result is dropped, so the document is left as it was. The live estimate keeps its own
generation-numbered thread (estimator.py): it is restarted on every edit, never cancelled by hand.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QProgressDialog

SHOW_AFTER_MS = 300  # quick jobs finish before the dialog would flash up
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

"""The one background-work mechanism (_qt/scheduling/worker.py): its progress dialog."""

import time

from PySide6.QtWidgets import QWidget

from memdesigner._qt.scheduling import worker


def test_the_progress_dialog_shows_while_a_longer_job_runs(qtbot):
    """Shown once the job outlives SHOW_AFTER_MS (300 ms), not after QProgressDialog's 4 s
    default, which a busy range 0..0 kept (its timer restarts only at the minimum value)."""
    parent = QWidget()
    qtbot.addWidget(parent)
    parent.show()
    task = worker.run(parent, lambda cancel: time.sleep(2.5) or 42, title="t", label="working", on_result=lambda v: None)
    qtbot.waitUntil(lambda: task.outcome is not None or (task.dialog is not None and task.dialog.isVisible()),
                    timeout=10000)
    assert task.outcome is None, "the job ended before its dialog was shown"
    qtbot.waitUntil(lambda: task.outcome == "succeeded", timeout=10000)
    assert task.dialog is None

"""Full garbage collections moved to when the window is idle.

Python's collector walks every tracked object in a full (generation 2) collection. With a
1,000-layer canvas built (its items, wrappers, paths and the design: hundreds of thousands of
objects) one takes 50-100 ms with the GIL held, started by whatever allocation crossed the
threshold: an undo, a layout or a file read stalled the window for it at random. While a window
lives, automatic full collections are off (the young generations are still collected as
allocations go, as before); a full collection runs when the window has been quiet for a moment
(no edit, no canvas work, no estimate, no mouse button down), or regardless once it is long
overdue, so memory held by old reference cycles stays bounded. (``gc.freeze`` would skip the
walks too, but frozen objects are never freed: each File -> Open kept the previous design.)
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QGuiApplication

CHECK_MS = 500  # how often it looks whether a full collection is due and the window quiet
QUIET_S = 1.0  # no edit for this long: the window is idle
DUE = 10  # young collections since the last full one before a full one is due (Python's own threshold)
OVERDUE = 400  # collect now even if the window never rests
NEVER = 1 << 30  # a generation-2 threshold no count reaches
_live = 0
_saved: tuple | None = None


class IdleCollector(QObject):
    def __init__(self, parent: QObject, busy: Callable[[], bool], activity_signals=()):
        super().__init__(parent)
        global _live, _saved
        if _live == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(_saved[0], _saved[1], NEVER)
        _live += 1
        self.destroyed.connect(_release)
        self.busy = busy
        self.due = DUE
        self.last_activity = time.monotonic()
        for sig in activity_signals:
            sig.connect(self.activity)
        self._timer = QTimer(self)
        self._timer.setInterval(CHECK_MS)
        self._timer.timeout.connect(self.check)
        self._timer.start()

    def activity(self, *_) -> None:
        self.last_activity = time.monotonic()

    def quiet(self) -> bool:
        return (time.monotonic() - self.last_activity >= QUIET_S and not self.busy()
                and QGuiApplication.mouseButtons() == Qt.MouseButton.NoButton)

    def check(self) -> bool:
        """Run a full collection when one is due and the window is quiet (or it is overdue).
        True when it collected."""
        pending = gc.get_count()[2]
        if pending < self.due or (pending < OVERDUE and not self.quiet()):
            return False
        gc.collect()
        return True


def _release(*_) -> None:
    """The last collector is gone: Python's own thresholds again."""
    global _live
    _live -= 1
    if _live == 0 and _saved is not None:
        gc.set_threshold(*_saved)


def install(parent: QObject, scene, service, stack, open_task: Callable[[], object | None]) -> IdleCollector:
    """The window's collector: busy while the canvas builds, a file is read (``open_task()``, the
    running File -> Open, if any) or an estimate runs; an edit, a selection, a canvas change (a design
    shown, a layout) or an estimate landing counts as activity. Takes the parts it watches, not the
    window: this layer sits below every view."""
    def busy() -> bool:
        task = open_task()
        return scene.jobs.busy or service.busy or (task is not None and task.running)

    return IdleCollector(parent, busy,
                         (stack.indexChanged, scene.selectionChanged, scene.layout_changed, service.result_ready))

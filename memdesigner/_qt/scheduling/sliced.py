"""UI-thread work cut into slices: a generator's steps run until a time budget is spent, then the
event loop gets a turn (paints, input) before the next slice. Building 10,000 canvas items or
re-labelling them after a batch change would otherwise freeze the window for seconds."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator

from PySide6.QtCore import QObject, QTimer

SLICE_MS = 12.0  # well under a 50 ms stall, with room for the paint that follows


class SlicedRunner(QObject):
    """Runs queued generators in order, ``SLICE_MS`` of work per event-loop turn. The first slice
    runs at once (a small job finishes inside the call that queued it)."""

    def __init__(self, parent=None, budget_ms: float = SLICE_MS):
        super().__init__(parent)
        self.budget = budget_ms / 1000.0
        self._jobs: deque[tuple[str, Iterator, Callable | None]] = deque()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._tick)
        self._running = False

    @property
    def busy(self) -> bool:
        return bool(self._jobs)

    def add(self, name: str, steps: Iterator, done: Callable | None = None, now: bool = True) -> None:
        self._jobs.append((name, steps, done))
        if now and not self._running:  # queued from inside a step: the running slice goes on to it
            self._tick()
        elif not self._timer.isActive():
            self._timer.start()

    def cancel(self, name: str | None = None) -> None:
        """Drop queued jobs (all, or those called ``name``) without running their rest."""
        self._jobs = deque(j for j in self._jobs if name is not None and j[0] != name)
        if not self._jobs:
            self._timer.stop()

    def has(self, name: str) -> bool:
        return any(j[0] == name for j in self._jobs)

    def finish(self, name: str | None = None) -> None:
        """Run the queued jobs (all, or those called ``name``) to their end now: a small job is
        done before the call that queued it returns; exports and tests need the whole scene."""
        if self._running:
            return
        self._running = True
        try:
            for job in [j for j in self._jobs if name is None or j[0] == name]:
                for _ in job[1]:
                    pass
                if job in self._jobs:
                    self._jobs.remove(job)
                    if job[2] is not None:
                        job[2]()
        finally:
            self._running = False
        if not self._jobs:
            self._timer.stop()

    def _complete(self) -> None:
        _, _, done = self._jobs.popleft()
        if done is not None:
            done()

    def _tick(self) -> None:
        if self._running:
            return
        end = time.perf_counter() + self.budget
        self._running = True
        try:
            while self._jobs:
                for _ in self._jobs[0][1]:
                    if time.perf_counter() > end:
                        self._timer.start()
                        return
                self._complete()
            self._timer.stop()
        finally:
            self._running = False

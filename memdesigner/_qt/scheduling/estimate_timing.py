"""When an edit's live estimate starts, and on which thread: the rule the estimate service asks.

- **Start.** An edit after a quiet spell (a commit: Enter in a field, a combo box, a check box, a
  canvas action) is estimated at once when the estimate is made on the UI thread (below): a
  fixed debounce made every single edit wait for it (40 ms of a 50 ms budget). One for the
  worker still waits ``min_quiet_ms`` (the service's part). An edit within the quiet spell after
  the one before is part of a burst (a held spin-box arrow or Ctrl+Z, quick clicks, a spin box
  that tracks the keyboard) and restarts the wait: the burst is estimated once, at its end, in
  its newest state.
- **The quiet spell** is proportional to what the last estimate cost (twice its CPU time, 40 ms
  at least, 400 ms at most): a design whose estimate takes 150 ms is not re-estimated at every
  step of a burst, while a small one follows every 40 ms.
- **The thread.** An estimate whose predicted cost is at most ``inline_budget_ms`` of CPU runs on
  the UI thread. On a worker thread it was no faster: the engine is pure Python, so the two
  threads take turns at the GIL, each of the UI thread's Qt calls (which release it) waited up
  to the switch interval to get it back, and on a loaded machine a thread preempted while
  holding the GIL stalled the other for a whole scheduler slice. Starting the worker at once
  after an edit (tried before) made the edit's own repaints (2 ms of CPU) take 30-60 ms. A
  short estimate made inline has none of that, nor the two thread hand-overs. The budget, 35 ms,
  is above what a 1,000-node edit costs (16-27 ms of CPU on the loaded 2-core machine: at 25 ms
  one edit in ten went to the worker, 40 ms later) and well under the 50 ms a UI turn may take.
- **The prediction** is the last estimate's cost scaled by the node count, and only for the same
  design with the same settings but the batch size and about as many nodes (at most 8 or 5 %
  more or fewer): a mode, optimizer, checkpointing or parallel layout of its own can cost
  several times as much, an undo of a big delete or a big paste a thousand times (a whole new
  analysis). Anything else is unknown and goes to the worker, which measures it; so does an
  estimate while the worker thread is still busy (a batch sweep finishing its current step).

Plain logic without Qt: times are passed in (seconds from ``time.monotonic()``), costs in ms.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EstimateTiming:
    min_quiet_ms: float = 40.0
    max_quiet_ms: float = 400.0
    quiet_per_cost: float = 2.0  # the quiet spell, in units of the last estimate's CPU time
    inline_budget_ms: float = 35.0  # estimates up to this much CPU run on the UI thread (see below)
    last_cost_ms: float | None = None  # CPU time of the last estimate (None: none measured yet)
    last_key: object = None  # what it estimated (the design and its cost-relevant settings)
    last_nodes: int = 0  # how many nodes that design had
    _last_edit: float = float("-inf")

    def quiet_ms(self) -> float:
        cost = self.last_cost_ms or 0.0
        return min(self.max_quiet_ms, max(self.min_quiet_ms, self.quiet_per_cost * cost))

    def delay_ms(self, now: float) -> int:
        """The wait before estimating an edit made at ``now``: 0 after a quiet spell, else the
        quiet spell (the edit is part of a burst; a later edit restarts the wait)."""
        quiet = self.quiet_ms()
        burst = (now - self._last_edit) * 1000 < quiet
        self._last_edit = now
        return round(quiet) if burst else 0

    def measured(self, cpu_ms: float, key: object = None, nodes: int = 0) -> None:
        """An estimate of ``key`` (a design of ``nodes`` nodes) cost ``cpu_ms`` of its thread's CPU time."""
        self.last_cost_ms, self.last_key, self.last_nodes = cpu_ms, key, nodes

    def predicted_ms(self, key: object = None, nodes: int = 0) -> float | None:
        """The CPU time an estimate of ``key`` at ``nodes`` nodes will take; None: unknown."""
        if self.last_cost_ms is None or key != self.last_key:
            return None
        if abs(nodes - self.last_nodes) > max(8, self.last_nodes / 20):  # a bulk change: unknown
            return None
        return self.last_cost_ms * max(nodes, 1) / max(self.last_nodes, 1)

    def inline(self, worker_free: bool, key: object = None, nodes: int = 0) -> bool:
        """Whether the next estimate (of ``key`` at ``nodes`` nodes) runs on the UI thread."""
        cost = self.predicted_ms(key, nodes)
        return worker_free and cost is not None and cost <= self.inline_budget_ms

"""What the memory timeline draws of one report, built from report fields on the worker thread.

The view used to turn thousands of events into five stacked pyqtgraph fill curves on the UI
thread for every edit (arrays, per-segment fill paths, phase spans), which took longer than the
estimate itself at 1,000 nodes. Here the stack is made once per estimate, off the UI thread, as
one polygon per category decimated to the plot's pixel width by the maximum per pixel column:
the drawn top of each stacked boundary is its highest value within the column, so the peak the
engine reports is drawn at its exact height however many ops share a pixel. Zoomed in, the
visible ops alone are decimated the same way when painted. Nothing
here computes memory: it only rearranges ``Event.by_category`` and ``Event.phase``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, groupby
from operator import attrgetter

import numpy as np

DEFAULT_WIDTH = 2048  # pixel columns when the plot's width is not known (headless, tests)
_PHASE, _BY_CATEGORY = attrgetter("phase"), attrgetter("by_category")


def decimate_max(cum: np.ndarray, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """Ops grouped into at most ``columns`` runs of consecutive ops, each drawn at the highest
    value of each stacked boundary within it. Returns (edges, tops): run j covers ops
    ``edges[j]`` .. ``edges[j + 1] - 1`` and stands ``tops[j, k]`` high. With no more ops than
    columns every op is its own run (nothing is merged)."""
    n = len(cum)
    if n <= columns:
        return np.arange(n + 1, dtype=float), cum
    edges = np.unique(np.linspace(0, n, columns + 1).astype(np.int64))
    return edges.astype(float), np.maximum.reduceat(cum, edges[:-1], axis=0)


def step_xy(edges: np.ndarray, tops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The outline of a step plot: each run flat from its left edge to its right edge."""
    return np.repeat(edges, 2)[1:-1], np.repeat(tops, 2)


def phase_spans(events) -> list[tuple[str, int, int]]:
    """(phase, first op, one past the last op) of each run of ops in one phase."""
    spans, start = [], 0
    for phase, run in groupby(map(_PHASE, events)):  # (a Python loop over the events took 0.3 ms at 2,000)
        end = start + sum(1 for _ in run)
        spans.append((phase, start, end))
        start = end
    return spans


@dataclass
class Figure:
    """One timeline's drawing: the stacked category boundaries per op (bytes on y, ops on x),
    the whole step as polygons decimated to ``columns`` pixel columns (made on the worker), and
    the facts the view labels. Zoomed in, ``polygons`` gives the visible ops only, decimated to
    the pixels they cover (a long timeline is never drawn op by op in full)."""

    events: list  # the report's own list (the view checks it draws this report's timeline)
    n: int
    top: float  # the highest stacked total, bytes
    used: list  # bool per category: any bytes at all (hidden otherwise, and left out of the legend)
    peak_index: int  # the report's peak event (or the highest op for another run's timeline)
    spans: list
    columns: int
    cum: np.ndarray | None = None  # (n, categories): the top of each category in the stack, per op
    whole: list = field(default_factory=list)  # per category: (fill QPolygonF, outline QPolygonF) or None
    _view: tuple | None = field(default=None, repr=False)  # ((first, end, columns), polygons): the last zoomed view
    _runs: dict = field(default_factory=dict, repr=False)

    @property
    def ops_per_column(self) -> float:
        return max(self.n / self.columns, 1.0)

    def polygons(self, first: int, end: int, columns: int) -> list:
        """The polygons of ops ``first`` .. ``end - 1`` on ``columns`` pixel columns: the whole
        step's when that is what is shown, else that range alone (op by op when every op has a
        column), kept for repaints of the same view (hover)."""
        first, end = max(0, int(first)), min(self.n, int(end))
        columns = max(int(columns), 1)
        if self.cum is None or end <= first or (first == 0 and end == self.n and columns <= 1.1 * self.columns):
            return self.whole
        key = (first, end, columns)
        if self._view is None or self._view[0] != key:
            edges, tops = decimate_max(self.cum[first:end], columns)
            self._view = (key, _polygons(edges + first, tops, self.used))
        return self._view[1]

    def runs_of(self, nid: str) -> list[tuple[int, int]]:
        """The runs of consecutive ops a node owns (forward and backward): the highlight of the
        selected layer, looked up when one is selected (not built for every node on each edit)."""
        if nid not in self._runs:
            self._runs[nid] = node_runs(self.events, nid)
        return self._runs[nid]


def node_runs(events, nid: str) -> list[tuple[int, int]]:
    """(first op, one past the last op) of each run of consecutive ops of node ``nid``."""
    runs: list[list[int]] = []
    for i, e in enumerate(events):
        if e.node == nid:
            if runs and runs[-1][1] == i:
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
    return [tuple(r) for r in runs]


def _polygons(edges, tops, used):
    """Per category k: the filled step area under its top, and the step outline along it."""
    from pyqtgraph.functions import arrayToQPolygonF

    out = []
    for k, on in enumerate(used):
        if not on:
            out.append(None)
            continue
        x, y = step_xy(edges, tops[:, k])
        fx = np.concatenate(([x[0]], x, [x[-1]]))
        fy = np.concatenate(([0.0], y, [0.0]))
        out.append((arrayToQPolygonF(fx, fy), arrayToQPolygonF(x, y)))
    return out


def build(events, peak_index: int | None, columns: int = DEFAULT_WIDTH) -> Figure:
    """The figure of one timeline (any thread: Qt polygons are plain values). ``peak_index``:
    the report's peak event; None marks the highest op (a timeline that is another run's)."""
    events = events if isinstance(events, list) else list(events)
    columns = max(int(columns or DEFAULT_WIDTH), 16)
    n = len(events)
    if n == 0:
        return Figure(events, 0, 0.0, [], 0, [], columns)
    k = len(events[0].by_category)  # (read in C: a list of tuples through np.array took a third longer)
    by = np.fromiter(chain.from_iterable(map(_BY_CATEGORY, events)), dtype=float, count=n * k).reshape(n, k)
    cum = by.cumsum(axis=1)  # column k: the top of category k in the stack
    used = [bool(u) for u in by.any(axis=0)]
    if peak_index is None:
        peak_index = int(np.argmax([e.bytes for e in events]))
    fig = Figure(events, n, float(cum[:, -1].max()), used, peak_index, phase_spans(events), columns, cum)
    edges, tops = decimate_max(cum, columns)  # op by op when every op has a column
    fig.whole = _polygons(edges, tops, used)
    return fig

"""The live estimate: off the UI thread on the one background-work mechanism (worker.Latest), or
on it when short (estimate_timing.py says when an edit's estimate starts, and where).

An edit starts the timer (0 ms for a single edit estimated here, a short delay otherwise, each
edit of a burst restarting it); when it fires, the design is estimated tagged with a generation
number: here in two event-loop turns (the estimate, then its rows, drawing and views), or on the
worker, which takes the snapshot (at 1,000 nodes a full copy costs tens of ms). Every edit moves
the generation on and cancels the job in flight, so a snapshot that overlapped an edit, and any
result older than the latest edit, is dropped: the widgets only ever show the estimate of the
latest design. The estimate also builds what the views draw (the layer rows, the timeline's
polygons), from report fields.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from PySide6.QtCore import QObject, QTimer, Signal

from memdesigner._qt.scheduling import worker
from memdesigner._qt.scheduling.estimate_timing import EstimateTiming
from memdesigner.engine.batch_sweep import batch_sweep
from memdesigner.engine.devices import Device
from memdesigner.engine.estimate import estimate
from memdesigner.engine.gc_pause import gc_paused, promote_survivors
from memdesigner.engine.sequence_length import sized_for
from memdesigner.engine.settings import Settings
from memdesigner.model.analysis import Analysis, analyze
from memdesigner.model.design import Design
from memdesigner.model.snapshots import Snapshots


def snapshot(design: Design, snapshots: Snapshots | None = None) -> Design:
    """A detached copy for the worker. Much cheaper than Design.copy() (no JSON round trip and
    schema validation), which matters: it runs for every edit (on the worker; on the UI thread
    for the on-demand jobs: measure, fit, explain). ``snapshots``: the live estimate's, which
    reuses the last snapshot's copies of the nodes that did not change."""
    d = design.detached_copy() if snapshots is None else snapshots.take(design)
    if design.blocks:  # block definitions: copied too (the worker must not see later edits)
        from memdesigner.model.blocks import BlockDef

        d.blocks = {}
        for name, bd in design.blocks.items():
            g = snapshot(_graph_only(bd.graph))
            g.blocks = d.blocks
            d.blocks[name] = BlockDef(name, g, bd.stack)
    return d


def _graph_only(g: Design) -> Design:
    view = Design(g.name, g.channels_last)
    view.nodes, view.edges = g.nodes, g.edges
    return view


def cost_key(design: Design, settings: Settings, device: Device | None) -> tuple:
    """What an estimate's cost depends on besides the node count: the live design (another one:
    unknown) and the settings but the batch size (estimate_timing.py)."""
    return id(design), replace(settings, batch=1), device


@dataclass
class EstimateRequest:
    gen: int
    design: Design  # the live design when ``fresh`` (the worker snapshots it), else a snapshot
    settings: Settings
    device: Device | None
    sweep: bool = True
    t0: float = field(default_factory=time.perf_counter)
    analysis: Analysis | None = None  # the previous request's, when only the settings changed
    fresh: bool = False  # take a snapshot of ``design`` first (on the worker)
    columns: int | None = None  # the timeline's pixel columns (its stack is decimated to them)
    source: Design | None = None  # the live design the snapshot is of
    snapshots: Snapshots | None = None  # the service's: the snapshot reuses unchanged node copies

    @property
    def cost_key(self) -> tuple:
        return cost_key(self.source if self.source is not None else self.design, self.settings, self.device)

    @property
    def nodes(self) -> int:
        return len((self.source if self.source is not None else self.design).nodes)


@dataclass
class EstimateResult:
    gen: int
    report: object | None  # engine Report
    analysis: Analysis | None
    error: str | None = None
    t0: float = 0.0
    seconds: float = 0.0
    design: Design | None = None  # the snapshot it estimated
    figure: object | None = None  # timeline_data.Figure of report.timeline, drawn by the timeline
    request: EstimateRequest | None = None  # what was asked (its settings and device: the sweep's)
    cpu_seconds: float = 0.0  # the worker thread's CPU time for it (``seconds`` is wall time)
    shown_analysis: Analysis | None = None  # the shapes at the seq_len setting (None: ``analysis``'s)


@dataclass
class BatchSweep:
    """Peak device memory for a few batch sizes, and the largest batch that fits."""

    gen: int
    batches: list
    peaks: list  # bytes, one per batch
    max_batch: int | None
    capacity: int | None
    empty: bool = False  # nothing to estimate (only inputs)
    max_context: int | None = None  # generate: the longest context that fits


def compute(req: EstimateRequest, cancel=None, views: bool = True) -> EstimateResult:
    """The estimate of one request, and what the views draw of it (on the worker). ``cancel``:
    the job's cancel event; set once a newer edit made this one pointless. ``views`` False: the
    estimate alone; ``add_views`` makes the rest (an estimate on the UI thread does that in the
    next event-loop turn, so neither turn is long). The cyclic garbage collector waits
    meanwhile, as in the engine: in a window of ~150,000 objects a full collection set off by
    the snapshot, the shape analysis or the drawing took ~100 ms, with the GIL held, so the UI
    thread stalled as long."""
    with gc_paused():
        res = _compute(req, cancel)
        if views:
            _add_views(res)
        promote_survivors()  # (the report it keeps: no young collection on the UI thread walks it)
        return res


def add_views(res: EstimateResult) -> EstimateResult:
    """What the views draw of an estimate made with ``views=False``: the layer rows and the
    timeline's polygons (their CPU time added to the result's)."""
    with gc_paused():
        _add_views(res)
        promote_survivors()
    return res


def _add_views(res: EstimateResult) -> None:
    rep, req = res.report, res.request
    if rep is None or res.figure is not None:
        return
    t, c = time.perf_counter(), time.thread_time()
    try:
        rep.layers  # noqa: B018  (the rows are built when first read: here, not on the UI thread)
        from memdesigner._qt.memory import timeline_data

        res.figure = timeline_data.build(rep.timeline, rep.peak_event, req.columns or timeline_data.DEFAULT_WIDTH)
    except Exception as exc:  # an engine bug must not take the window down: show it instead  # noqa: BLE001
        res.report, res.analysis, res.error = None, None, f"{type(exc).__name__}: {exc}"
    res.seconds += time.perf_counter() - t
    res.cpu_seconds += time.thread_time() - c


def _compute(req: EstimateRequest, cancel=None) -> EstimateResult:
    t, c = time.perf_counter(), time.thread_time()
    try:
        design = snapshot(req.design, req.snapshots) if req.fresh else req.design
        if cancel is not None and cancel.is_set():
            raise worker.Cancelled()
        an = req.analysis or analyze(design)
        rep = estimate(design, req.settings, device=req.device, analysis=an)
        if cancel is not None and cancel.is_set():
            raise worker.Cancelled()
        return EstimateResult(req.gen, rep, an, None, req.t0, time.perf_counter() - t, design, None, req,
                              time.thread_time() - c, _shapes_at_length(design, req.settings.seq_len))
    except worker.Cancelled:
        raise
    except Exception as exc:  # an engine bug must not take the window down: show it instead  # noqa: BLE001
        return EstimateResult(req.gen, None, None, f"{type(exc).__name__}: {exc}", req.t0, time.perf_counter() - t,
                              request=req)


def _shapes_at_length(design: Design, seq_len: int) -> Analysis | None:
    """The analysis the canvas shows at the Tokens setting (its cards showed the design's own
    length); analysed here on the worker, and only when the setting resizes the design."""
    if not seq_len:
        return None
    try:
        sized, _ = sized_for(design, None, seq_len)
    except ValueError:
        return None
    return None if sized is design else analyze(sized)


def sweep(req: EstimateRequest, an: Analysis, is_stale=lambda: False, report=None) -> BatchSweep | None:
    """The peak-vs-batch curve and the largest batch of the engine (engine/batch_sweep.py: the
    same largest batch as ``memdesigner estimate --max-batch`` for these settings). Checks between
    engine calls whether a newer edit made this work pointless, so the worker is free again
    quickly. ``report``: the estimate just shown for ``req`` (its run checks the batch curve, not
    a second one). None when abandoned."""
    if not an.ok or is_stale():
        return None
    got = batch_sweep(req.design, req.settings, req.device, an, is_stale, report=report)
    return None if got is None else BatchSweep(req.gen, got.batches, got.peaks, got.max_batch, got.capacity, got.empty,
                                            got.max_context)


class EstimateService(QObject):
    """The window's live estimate. ``provider()`` returns (design, settings, device) at fire
    time; ``columns()`` the timeline's pixel width (its stack is decimated to it);
    ``views_busy()`` whether the views are still showing the last result (the sweep waits)."""

    result_ready = Signal(object)
    sweep_ready = Signal(object)
    busy_changed = Signal(bool)

    def __init__(self, provider, parent=None, delay_ms: int = 40, sweep_delay_ms: int = 350, columns=None,
                 views_busy=None):
        super().__init__(parent)
        self.provider = provider
        self.columns = columns
        self.views_busy = views_busy
        self.gen = 0
        self.busy = False
        self.last_result: EstimateResult | None = None
        self.jobs = worker.Latest(self)  # one job at a time; each edit cancels the one in flight
        self._reuse: list | None = None  # [design, its snapshot, the snapshot's analysis]
        self._snapshots = Snapshots()  # each edit's snapshot reuses the last one's unchanged nodes
        self.timing = EstimateTiming(min_quiet_ms=delay_ms)  # when an edit's estimate starts, and where
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay_ms)
        self._timer.timeout.connect(self.fire)
        self._leading = False  # the timer runs for an edit after a quiet spell (started at 0 ms)
        self._inline: EstimateResult | None = None  # an estimate made on this thread, shown next turn
        self._inline_turn = QTimer(self)  # (a timer, not a posted call: input and paints get their turn)
        self._inline_turn.setSingleShot(True)
        self._inline_turn.setInterval(0)
        self._inline_turn.timeout.connect(self._show_inline)
        self._sweep_timer = QTimer(self)
        self._sweep_timer.setSingleShot(True)
        self._sweep_timer.setInterval(sweep_delay_ms)
        self._sweep_timer.timeout.connect(self._start_sweep)

    def schedule(self, design_changed: bool = True) -> None:
        """Estimate the edit just made: at once after a quiet spell, at the end of a burst of edits
        otherwise (estimate_timing.py). The generation moves on at the edit and the job in flight
        is cancelled, so its result is dropped. ``design_changed`` False (a run-setting change
        only): the last snapshot and its analysis are reused, so typing a batch size neither
        copies nor re-analyses a big design."""
        if design_changed:
            self._reuse = None
        self.gen += 1
        self.jobs.cancel()
        self._sweep_timer.stop()
        delay = self.timing.delay_ms(time.monotonic())
        self._leading = delay == 0
        self._timer.start(delay)

    def fire(self) -> int:
        self._timer.stop()
        design, settings, device = self.provider()
        inline = self.timing.inline(self.jobs.idle, cost_key(design, settings, device), len(design.nodes))
        leading, self._leading = self._leading, False
        if leading and not inline:
            # a start at once is for an estimate made here; the worker's waits the short delay as
            # before: started at once it fought the edit's own next turns (repaints, the canvas's
            # slices) for the GIL, and those turns took several times their CPU time
            self._timer.start(round(self.timing.min_quiet_ms))
            return self.gen
        self.gen += 1
        req = self._request(design, settings, device)
        if inline:  # short: on this thread, no GIL contest
            self._inline = compute(req, views=False)
            self._inline_turn.start()  # its rows and drawing, and the views, in the next turn
            return req.gen
        self._set_busy(True)
        self.jobs.submit(lambda cancel, req=req: compute(req, cancel), self._on_finished, self._on_failed)
        return self.gen

    def _request(self, design, settings, device) -> EstimateRequest:
        """This generation's request: the live design for the worker to snapshot, or the last
        snapshot (and its analysis) when nothing but the settings changed since it was taken."""
        columns = self.columns() if self.columns is not None else None
        reuse = self._reuse
        if reuse is not None and reuse[0] is design:
            return EstimateRequest(self.gen, reuse[1], settings, device, analysis=reuse[2], columns=columns,
                                   source=design)
        return EstimateRequest(self.gen, design, settings, device, fresh=True, columns=columns, source=design,
                               snapshots=self._snapshots)

    def run_sync(self, sweep_too: bool = True) -> EstimateResult:
        """Estimate on the calling thread (headless render, scripts)."""
        self._timer.stop()
        self.jobs.cancel()
        design, settings, device = self.provider()
        self.gen += 1
        req = self._request(design, settings, device)
        self._inline_turn.stop()
        self._inline = None
        res = compute(req)
        self._on_finished(res)
        self._sweep_timer.stop()
        if sweep_too and res.analysis is not None:
            sw = sweep(req, res.analysis, report=res.report)
            if sw is not None:
                self._on_swept(sw)
        return res

    def _show_inline(self) -> None:
        res, self._inline = self._inline, None
        if res is not None and res.gen == self.gen:  # (an edit in between: its own estimate follows)
            self._on_finished(add_views(res))

    def _on_finished(self, res: EstimateResult):
        req = res.request
        if res.report is not None and res.cpu_seconds and req is not None:
            self.timing.measured(res.cpu_seconds * 1000, req.cost_key, req.nodes)  # (a stale one's cost is a cost too)
        if res.gen != self.gen:
            return  # stale: a newer edit is already on its way
        if req is not None and req.fresh and res.analysis is not None:
            self._reuse = [req.source, res.design, res.analysis]  # for the next settings-only change
        self.last_result = res
        self._set_busy(False)
        self.result_ready.emit(res)
        if res.analysis is not None and res.analysis.ok:
            self._sweep_timer.start()

    def _on_failed(self, err) -> None:
        """A job that raised (compute itself turns engine errors into results): shown as one."""
        self._on_finished(EstimateResult(self.gen, None, None, f"{type(err).__name__}: {err}"))

    def _start_sweep(self) -> None:
        """The batch sweep of the estimate shown, once the window went idle after showing it
        (this pure-Python work competes with the UI thread for the GIL); a newer edit cancels it."""
        res = self.last_result
        if res is None or res.gen != self.gen or res.analysis is None or res.request is None:
            return
        if self.views_busy is not None and self.views_busy():
            # the canvas is still re-labelling in slices: a sweep beside it would hold the GIL
            # for half of every slice (and on a loaded machine, for whole scheduler slices)
            self._sweep_timer.start()
            return
        q = res.request
        req = EstimateRequest(res.gen, res.design, q.settings, q.device)
        an, rep = res.analysis, res.report
        def job(cancel):
            with gc_paused():
                return sweep(req, an, cancel.is_set, rep)

        self.jobs.submit(job, self._on_swept)

    def _on_swept(self, sw: BatchSweep | None):
        if sw is not None and sw.gen == self.gen:
            self.sweep_ready.emit(sw)

    def _set_busy(self, busy: bool):
        if busy != self.busy:
            self.busy = busy
            self.busy_changed.emit(busy)

    def shutdown(self) -> None:
        self._timer.stop()
        self._inline_turn.stop()
        self._sweep_timer.stop()
        self.gen += 1
        self.jobs.shutdown()

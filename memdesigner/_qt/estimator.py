"""Live estimation off the UI thread.

Edits restart a short debounce timer; when it fires, a cheap snapshot of the design goes to ONE
worker thread tagged with a generation number. Results of older generations are dropped, so the
widgets only ever show the estimate of the latest design. Signals from the worker arrive through
queued connections, i.e. on the UI thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from memdesigner.engine.devices import Device
from memdesigner.engine.estimate import estimate, peak_for_batch
from memdesigner.engine.settings import Settings
from memdesigner.model.analysis import Analysis, analyze
from memdesigner.model.design import Design


def snapshot(design: Design) -> Design:
    """A detached copy for the worker. Much cheaper than Design.copy() (no JSON round trip and
    schema validation), which matters: it runs on the UI thread for every edit."""
    d = design.detached_copy()
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


@dataclass
class EstimateRequest:
    gen: int
    design: Design
    settings: Settings
    device: Device | None
    sweep: bool = True
    t0: float = field(default_factory=time.perf_counter)
    analysis: Analysis | None = None  # the previous request's, when only the settings changed


@dataclass
class EstimateResult:
    gen: int
    report: object | None  # engine Report
    analysis: Analysis | None
    error: str | None = None
    t0: float = 0.0
    seconds: float = 0.0
    design: Design | None = None  # the snapshot it estimated


@dataclass
class BatchSweep:
    """Peak device memory for a few batch sizes, and the largest batch that fits."""

    gen: int
    batches: list
    peaks: list  # bytes, one per batch
    max_batch: int | None
    capacity: int | None


def compute(req: EstimateRequest) -> EstimateResult:
    t = time.perf_counter()
    try:
        an = req.analysis or analyze(req.design)
        rep = estimate(req.design, req.settings, device=req.device, analysis=an)
        return EstimateResult(req.gen, rep, an, None, req.t0, time.perf_counter() - t, req.design)
    except Exception as exc:  # an engine bug must not take the window down: show it instead  # noqa: BLE001
        return EstimateResult(req.gen, None, None, f"{type(exc).__name__}: {exc}", req.t0, time.perf_counter() - t)


def sweep(req: EstimateRequest, an: Analysis, is_stale=lambda: False) -> BatchSweep | None:
    """The peak-vs-batch curve and the largest batch, from the engine's batch curve (the same
    largest batch as ``memdesigner estimate --max-batch``). Checks between engine calls whether a
    newer edit made this work pointless, so the worker is free again quickly. None when abandoned."""
    from memdesigner.engine.batch_curve import batch_curve

    dev, s = req.device, req.settings
    if not an.ok or is_stale():
        return None
    if s.mode == "generate":  # whole generations per batch (engine/generate.py)
        from memdesigner.engine.generate import generate_sweep

        got = generate_sweep(req.design, s, dev, is_stale)
        return None if got is None else BatchSweep(req.gen, *got, dev.memory_bytes if dev else None)
    curve = batch_curve(req.design, s, dev, an)
    if is_stale():
        return None
    best = curve.largest_batch(dev.memory_bytes) if dev is not None else None
    top = max(2 * s.batch, 2 * (best or 1), 8)
    batches, b = [], 1
    while b <= top:
        batches.append(b)
        b *= 2
    exact = {s.batch} | ({best, best + 1} if best else set())
    batches = sorted(set(batches) | exact)
    peaks = []
    for b in batches:
        if is_stale():
            return None
        # the envelope (live bytes + runtime) where it is exact up to allocator rounding; the
        # points a user reads off (their batch, the largest that fits) are simulated exactly
        if b in exact or not curve.affine:
            peaks.append(curve.device_peak(b) if dev is not None else peak_for_batch(req.design, s, dev, an, b))
        else:
            peaks.append(curve.device_peak_bounds(b)[0])
    return BatchSweep(req.gen, batches, peaks, best, dev.memory_bytes if dev else None)


class _Worker(QObject):
    finished = Signal(object)  # EstimateResult
    swept = Signal(object)  # BatchSweep

    def __init__(self, latest: list):
        super().__init__()
        self.latest = latest  # [gen]: written by the UI thread, read here (an int: atomic under the GIL)
        self._done: tuple | None = None  # (request, analysis) of the last estimate, for its sweep

    @Slot(object)
    def run(self, req: EstimateRequest):
        if req.gen != self.latest[0]:
            return  # a newer request is queued behind this one
        res = compute(req)
        self._done = (req, res.analysis)
        self.finished.emit(res)

    @Slot(int)
    def run_sweep(self, gen: int):
        """Separate from run(): the UI asks for it once it has shown the estimate and gone idle,
        because this pure-Python work competes with the UI thread for the GIL."""
        if self._done is None or self._done[0].gen != gen or gen != self.latest[0] or self._done[1] is None:
            return
        req, an = self._done
        sw = sweep(req, an, lambda: req.gen != self.latest[0])
        if sw is not None:
            self.swept.emit(sw)


class EstimateService(QObject):
    """Owns the worker thread. ``provider()`` returns (design, settings, device) at fire time."""

    result_ready = Signal(object)
    sweep_ready = Signal(object)
    busy_changed = Signal(bool)
    _submit = Signal(object)
    _submit_sweep = Signal(int)

    def __init__(self, provider, parent=None, delay_ms: int = 40, sweep_delay_ms: int = 350):
        super().__init__(parent)
        self.provider = provider
        self.gen = 0
        self._latest = [0]
        self.busy = False
        self.last_result: EstimateResult | None = None
        self._reuse: list | None = None  # [design, its snapshot, the snapshot's analysis or None]
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay_ms)
        self._timer.timeout.connect(self.fire)
        self._sweep_timer = QTimer(self)
        self._sweep_timer.setSingleShot(True)
        self._sweep_timer.setInterval(sweep_delay_ms)
        self._sweep_timer.timeout.connect(lambda: self._submit_sweep.emit(self.gen))
        self._thread = QThread(self)
        self._thread.setObjectName("memdesigner-estimate")
        self._worker = _Worker(self._latest)
        self._worker.moveToThread(self._thread)
        self._submit.connect(self._worker.run)
        self._submit_sweep.connect(self._worker.run_sweep)
        self._worker.finished.connect(self._on_finished)
        self._worker.swept.connect(self._on_swept)
        self._thread.finished.connect(self._worker.deleteLater)
        self._thread.start()

    def schedule(self, design_changed: bool = True) -> None:
        """Coalesce a burst of edits into one estimate. The generation moves on at the edit, so a
        result still in flight for the design before it is dropped on arrival. ``design_changed``
        False (a run-setting change only): the last snapshot and its analysis are reused, so
        typing a batch size neither copies nor re-analyses a big design."""
        if design_changed:
            self._reuse = None
        self.gen += 1
        self._latest[0] = self.gen
        self._sweep_timer.stop()
        self._timer.start()

    def fire(self) -> int:
        self._timer.stop()
        design, settings, device = self.provider()
        self.gen += 1
        self._latest[0] = self.gen
        self._set_busy(True)
        self._submit.emit(self._request(design, settings, device))
        return self.gen

    def _request(self, design, settings, device) -> EstimateRequest:
        """This generation's request: a fresh snapshot, or the last one (and its analysis, once
        known) when nothing but the settings changed since it was taken."""
        reuse = self._reuse
        if reuse is not None and reuse[0] is design:
            snap, an = reuse[1], reuse[2]
        else:
            snap, an = snapshot(design), None
            self._reuse = [design, snap, None]
        return EstimateRequest(self.gen, snap, settings, device, analysis=an)

    def run_sync(self, sweep_too: bool = True) -> EstimateResult:
        """Estimate on the calling thread (headless render, scripts)."""
        design, settings, device = self.provider()
        self.gen += 1
        self._latest[0] = self.gen
        req = self._request(design, settings, device)
        res = compute(req)
        self._on_finished(res)
        self._sweep_timer.stop()
        if sweep_too and res.analysis is not None:
            sw = sweep(req, res.analysis)
            if sw is not None:
                self._on_swept(sw)
        return res

    @Slot(object)
    def _on_finished(self, res: EstimateResult):
        reuse = self._reuse
        if reuse is not None and reuse[2] is None and res.analysis is not None and res.design is reuse[1]:
            reuse[2] = res.analysis  # the snapshot's analysis, for the next settings change
        if res.gen != self.gen:
            return  # stale: a newer edit is already on its way
        self.last_result = res
        self._set_busy(False)
        self.result_ready.emit(res)
        if res.analysis is not None and res.analysis.ok:
            self._sweep_timer.start()

    @Slot(object)
    def _on_swept(self, sw: BatchSweep):
        if sw.gen == self.gen:
            self.sweep_ready.emit(sw)

    def _set_busy(self, busy: bool):
        if busy != self.busy:
            self.busy = busy
            self.busy_changed.emit(busy)

    def shutdown(self) -> None:
        self._timer.stop()
        self._sweep_timer.stop()
        self._latest[0] = -1
        self._thread.quit()
        self._thread.wait(5000)

"""Peak memory as a function of the batch, from a few runs instead of a search.

Every tensor the engine allocates is a + b·batch bytes (weights and state: b = 0; activations,
gradients of activations, masks: a = 0), so the live bytes at each moment the simulation checks
are affine in the batch too, and the peak-vs-batch curve is the upper envelope of those lines.
Runs at batch 1 and 2 give every line; a run at a third batch verifies them (a rule that is not
affine, or a graph whose moments change with the batch, falls back to bisection).

Allocator rounding (512 B blocks on CUDA) is not affine, but it is bounded: each live tensor
gains less than one block, so the rounded peak lies between the raw envelope and the raw
envelope plus that slack. The largest batch is found between the two bounds with exact runs:
usually one or two.
"""

from __future__ import annotations

from dataclasses import dataclass

from memdesigner.engine.devices import Device
from memdesigner.engine.search import largest_fitting, last_fitting
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import Simulation
from memdesigner.model.analysis import Analysis, analyze
from memdesigner.model.design import Design

_PROBE = (1, 2, 7)  # two batches define the lines, the third checks them
SEARCH_LIMIT = 1 << 24  # where a search has to stop (non-affine steps, batch-independent peaks)


@dataclass
class BatchCurve:
    """``lines``: (a, b, slack) per checked moment; raw live bytes a + b·batch, and rounding adds at
    most ``slack``. None when the step is not affine in the batch (then every query simulates)."""

    design: Design
    analysis: Analysis
    settings: Settings
    device: Device | None
    lines: list | None
    runs: int  # simulations spent building the curve

    @property
    def affine(self) -> bool:
        return self.lines is not None

    @property
    def _rounding(self) -> int:
        return self.device.allocator_rounding if self.device is not None else 1

    @property
    def _overhead(self) -> int:
        return self.device.runtime_overhead_bytes if self.device is not None else 0

    def device_peak(self, batch: int) -> int:
        """Exact device peak (rounded live bytes + runtime) at ``batch``: one simulation, once per
        batch (the window's sweep asks again for the largest batch and the one after it, which the
        largest-batch search has just simulated)."""
        memo = self.__dict__.setdefault("_exact", {})
        if batch not in memo:
            self.runs += 1
            sim = Simulation(self.design, self.analysis, self.settings.with_(batch=batch), self._rounding).run()
            memo[batch] = sim.mem.rpeak + self._overhead
        return memo[batch]

    def raw_peak(self, batch: int) -> int:
        """Live tensor bytes at the peak, from the envelope (exact where the curve is affine)."""
        if self.lines is None:
            self.runs += 1
            return Simulation(self.design, self.analysis, self.settings.with_(batch=batch), 1).run().mem.peak
        return max((a + b * batch for a, b, _ in self.lines), default=0)

    def device_peak_bounds(self, batch: int) -> tuple[int, int]:
        """(low, high) bounds of the device peak at ``batch`` without simulating."""
        if self.lines is None:
            p = self.device_peak(batch)
            return p, p
        lo = max((a + b * batch for a, b, _ in self.lines), default=0)
        hi = max((a + b * batch + s for a, b, s in self.lines), default=0)
        return lo + self._overhead, hi + self._overhead

    def _largest_under(self, budget: int, slack: bool) -> int | None:
        """The largest batch whose envelope (plus slack) stays within ``budget``; None: unbounded."""
        best = None
        for a, b, s in self.lines:
            room = budget - a - (s if slack else 0)
            if b == 0:
                if room < 0:
                    return 0
                continue
            n = room // b
            best = n if best is None else min(best, n)
        return None if best is None else max(0, best)

    def largest_batch(self, capacity: int, limit: int | None = None) -> int:
        """The largest batch whose exact device peak fits ``capacity`` (0: not even batch 1).
        No cap is needed where the curve is affine; a search (non-affine rules) stops at ``limit``
        (default 2^24), as does a peak that does not grow with the batch."""

        def fits(b):
            return self.device_peak(b) <= capacity

        cap = SEARCH_LIMIT if limit is None else limit
        if self.lines is None:
            return largest_fitting(fits, 1, cap)
        budget = capacity - self._overhead
        hi = self._largest_under(budget, slack=False)
        lo = self._largest_under(budget, slack=True)
        hi = cap if hi is None else (hi if limit is None else min(hi, limit))
        lo = cap if lo is None else (lo if limit is None else min(lo, limit))
        if hi < 1:
            return 0
        lo = max(lo, 0)
        if lo >= hi:
            return hi
        # the answer is in [lo, hi]: lo fits by the bound, hi + 1 cannot
        return last_fitting(fits, lo, hi + 1)


def batch_curve(design: Design, settings: Settings, device: Device | None = None,
                analysis: Analysis | None = None) -> BatchCurve:
    if design.blocks:  # the flat network (model/blocks.py)
        from memdesigner.model.blocks import for_engine

        design, analysis = for_engine(design, analysis)
    an = analysis or analyze(design)
    rounding = device.allocator_rounding if device is not None else 1
    traces = []
    for b in _PROBE:
        sim = Simulation(design, an, settings.with_(batch=b), rounding, trace=True).run()
        if not sim.affine:
            return BatchCurve(design, an, settings, device, None, runs=len(traces) + 1)
        traces.append(sim.mem.trace)
    lines = _fit(traces)
    return BatchCurve(design, an, settings, device, lines, runs=len(_PROBE))


def _fit(traces) -> list | None:
    t1, t2, t3 = traces
    if not (len(t1) == len(t2) == len(t3)):
        return None
    b1, b2, b3 = _PROBE
    lines = []
    for (v1, _, s1), (v2, _, s2), (v3, _, s3) in zip(t1, t2, t3):
        slope, rem = divmod(v2 - v1, b2 - b1)
        if rem:
            return None
        a = v1 - slope * b1
        if a + slope * b3 != v3:
            return None
        lines.append((a, slope, max(s1, s2, s3)))
    return lines

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

One pass: the lines come from a single run at a huge batch M (engine/alloc_log.py: each size is
a + s·M, read back by divmod), and the run at the user's batch (the estimate's own, when it is
handed over) checks every storage's line and the peaks; the log of that run replays the exact,
rounded peak at any batch, so the search and the window's points need no further simulation.
Where the check fails (a rule that is not affine or branches on sizes), the three runs at batch
1, 2 and 7 fit the lines as before, and a step that is not affine at all is searched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memdesigner.engine.alloc_log import PROBE, CheckPoint, Replay, check_point, replay_of
from memdesigner.engine.devices import Device
from memdesigner.engine.search import largest_fitting, last_fitting
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import Simulation
from memdesigner.model.analysis import Analysis, analyze
from memdesigner.model.design import Design

_PROBE = (1, 2, 7)  # the fallback: two batches define the lines, the third checks them
SEARCH_LIMIT = 1 << 24  # where a search has to stop (non-affine steps, batch-independent peaks)
_SAFE = 1 << 62  # envelope arithmetic in int64 below this; Python ints above


@dataclass
class BatchCurve:
    """``lines``: (a, b, slack) arrays, one entry per checked moment; raw live bytes a + b·batch,
    and rounding adds at most ``slack``. None when the step is not affine in the batch (then every
    query simulates). ``replay``: the one-probe log, which gives exact peaks without a run; its
    lines are checked at M and at the user's batch, so they hold from batch 2 on. Batch 1 can
    differ (a size-1 dimension makes a transposed view contiguous: no copy, an LSTM's time-major
    input): ``one`` says whether the lines hold there too (None: not asked yet)."""

    design: Design
    analysis: Analysis
    settings: Settings
    device: Device | None
    lines: tuple | None
    runs: int  # simulations spent building the curve
    replay: Replay | None = None
    one: bool | None = None

    @property
    def affine(self) -> bool:
        """Whether the lines hold at every batch (with a replay, asking runs batch 1 once)."""
        return self.lines is not None and (self.replay is None or self._holds_at_one())

    def _holds_at_one(self) -> bool:
        if self.one is None:
            self.runs += 1
            sim = Simulation(self.design, self.analysis, self.settings.with_(batch=1), self._rounding).run()
            self.__dict__.setdefault("_exact", {})[1] = sim.mem.rpeak + self._overhead
            self.one = _holds(self.replay, check_point(sim), 1)
        return self.one

    @property
    def _rounding(self) -> int:
        return self.device.allocator_rounding if self.device is not None else 1

    @property
    def _overhead(self) -> int:
        return self.device.runtime_overhead_bytes if self.device is not None else 0

    def device_peak(self, batch: int) -> int:
        """Exact device peak (rounded live bytes + runtime) at ``batch``: replayed from the
        one-probe log, else one simulation, once per batch (the window's sweep asks again for the
        largest batch and the one after it, which the largest-batch search has just settled)."""
        memo = self.__dict__.setdefault("_exact", {})
        if batch not in memo:
            rp = self.replay
            if rp is not None and (batch > 1 or self._holds_at_one()) and rp.safe(batch):
                memo[batch] = rp.peaks(batch)[1] + self._overhead
            if batch not in memo:
                self.runs += 1
                sim = Simulation(self.design, self.analysis, self.settings.with_(batch=batch), self._rounding).run()
                memo[batch] = sim.mem.rpeak + self._overhead
        return memo[batch]

    def _envelope(self, batch: int, slack: bool) -> int:
        a, b, s = self.lines
        if not len(a):
            return 0
        if int(a.max()) + int(b.max()) * batch + int(s.max()) < _SAFE:
            return int((a + b * batch + (s if slack else 0)).max())
        return max(x + y * batch + (z if slack else 0) for x, y, z in zip(a.tolist(), b.tolist(), s.tolist()))

    def _lines_at(self, batch: int) -> bool:
        return self.lines is not None and (batch > 1 or self.replay is None or self._holds_at_one())

    def raw_peak(self, batch: int) -> int:
        """Live tensor bytes at the peak, from the envelope (exact where the curve is affine)."""
        if not self._lines_at(batch):
            self.runs += 1
            return Simulation(self.design, self.analysis, self.settings.with_(batch=batch), 1).run().mem.peak
        return self._envelope(batch, False)

    def device_peak_bounds(self, batch: int) -> tuple[int, int]:
        """(low, high) bounds of the device peak at ``batch`` without simulating."""
        if not self._lines_at(batch):
            p = self.device_peak(batch)
            return p, p
        return self._envelope(batch, False) + self._overhead, self._envelope(batch, True) + self._overhead

    def _largest_under(self, budget: int, slack: bool) -> int | None:
        """The largest batch whose envelope (plus slack) stays within ``budget``; None: unbounded."""
        a, b, s = self.lines
        room = budget - a - (s if slack else 0)  # (int64: budget and every constant part are far below 2^62)
        flat = b == 0
        if bool((room[flat] < 0).any()):
            return 0
        if bool(flat.all()):
            return None
        return max(0, int((room[~flat] // b[~flat]).min()))

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
        if self.replay is not None and self.one is not True:
            # the lines are checked from batch 2 on (batch 1 may differ): below that, ask exactly
            if hi < 2 or (lo < 2 and not fits(2)):
                return 1 if fits(1) else 0
            lo = max(lo, 2)
        if hi < 1:
            return 0
        lo = max(lo, 0)
        if lo >= hi:
            return hi
        # the answer is in [lo, hi]: lo fits by the bound, hi + 1 cannot
        return last_fitting(fits, lo, hi + 1)


def batch_curve(design: Design, settings: Settings, device: Device | None = None,
                analysis: Analysis | None = None, check: CheckPoint | None = None) -> BatchCurve:
    """The curve for ``settings`` on ``device``. ``check``: the estimate's own run at
    ``settings.batch`` (same design, settings and rounding), used instead of running it again."""
    if design.blocks:  # the flat network (model/blocks.py)
        from memdesigner.model.blocks import for_engine

        design, analysis = for_engine(design, analysis)
    an = analysis or analyze(design)
    rounding = device.allocator_rounding if device is not None else 1
    got = _one_probe(design, an, settings, rounding, check)
    if got is not None:
        rp, runs = got
        return BatchCurve(design, an, settings, device, (rp.at_a, rp.at_s, rp.at_slack), runs, rp,
                          one=True if settings.batch == 1 else None)
    traces = []
    for b in _PROBE:
        sim = Simulation(design, an, settings.with_(batch=b), rounding, trace=True).run()
        if not sim.affine:
            return BatchCurve(design, an, settings, device, None, runs=len(traces) + 1)
        traces.append(sim.mem.trace)
    lines = _fit(traces)
    return BatchCurve(design, an, settings, device, lines, runs=len(_PROBE))


def _one_probe(design: Design, an: Analysis, settings: Settings, rounding: int,
               check: CheckPoint | None) -> tuple[Replay, int] | None:
    """(the replay of one run at batch M, simulations run), or None where its lines do not hold
    at the user's batch (then the caller fits three runs)."""
    try:
        sim = Simulation(design, an, settings.with_(batch=PROBE), rounding, log=True).run()
    except Exception:  # noqa: BLE001  (a rule that cannot take batch M: the three small runs decide)
        return None
    if not sim.affine:
        return None
    rp = replay_of(sim.mem)
    if rp is None:
        return None
    runs = 1
    if check is None or check.settings != settings or check.rounding != rounding:
        check = check_point(Simulation(design, an, settings, rounding).run())
        runs += 1
    return (rp, runs) if _holds(rp, check, settings.batch) else None


def _holds(rp: Replay, check: CheckPoint, batch: int) -> bool:
    """Whether the real run at ``batch`` is the replay's: every storage's raw and rounded size,
    and the raw and rounded peaks."""
    if not check.affine or len(check.nb) != len(rp.a) or not rp.safe(batch):
        return False
    nb, rnb = np.array(check.nb), np.array(check.rnb)  # (a float or a size beyond int64: another dtype)
    if nb.dtype != np.int64 or rnb.dtype != np.int64:
        return False
    raw, rounded = rp.sizes(batch)
    if not (np.array_equal(nb, raw) and np.array_equal(rnb, rounded)):
        return False
    return rp.peaks(batch) == (check.peak, check.rpeak)


def _fit(traces) -> tuple | None:
    t1, t2, t3 = traces
    if not (len(t1) == len(t2) == len(t3)):
        return None
    b1, b2, b3 = _PROBE
    a_, b_, s_ = [], [], []
    for (v1, _, s1), (v2, _, s2), (v3, _, s3) in zip(t1, t2, t3):
        slope, rem = divmod(v2 - v1, b2 - b1)
        if rem:
            return None
        a = v1 - slope * b1
        if a + slope * b3 != v3:
            return None
        a_.append(a)
        b_.append(slope)
        s_.append(max(s1, s2, s3))
    return _array(a_), _array(b_), _array(s_)


def _array(xs: list) -> np.ndarray:
    """int64 where the sizes allow (every realistic step), else Python ints (absurd designs)."""
    try:
        return np.array(xs, dtype=np.int64)
    except OverflowError:
        return np.array(xs, dtype=object)

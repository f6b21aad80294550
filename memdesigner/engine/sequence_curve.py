"""The longest sequence that fits, from three traced runs and a check at the boundary.

At a fixed batch, every tensor a token model allocates is a polynomial of degree at most 2 in
the sequence length n (weights: constant; activations: linear; attention scores and the causal
mask: quadratic), so the live bytes at each moment the simulation checks are one too, and the
peak-vs-length curve is the upper envelope of those parabolas (as the batch curve is of lines,
engine/batch_curve.py). Three runs give every parabola; allocator rounding adds at most each
moment's slack. The envelope only steers the search: the answer is settled by exact runs, the
longest length that fits and the next one that does not, so a rule that is not polynomial (a
graph whose moments change with the length) costs runs, never exactness.
"""

from __future__ import annotations

import numpy as np

from memdesigner.engine.search import last_fitting


def _parabolas(points: dict) -> np.ndarray | None:
    """(moments x 4): a, b, c of a + b·n + c·n² through three traced lengths, and the slack;
    None when the traces do not line up moment for moment."""
    ns = sorted(points)[:3]
    traces = [points[n] for n in ns]
    if len(ns) < 3 or len({len(t) for t in traces}) != 1 or not traces[0]:
        return None
    y = np.array([[v for v, _, _ in t] for t in traces], dtype=np.float64)  # (3, moments)
    slack = np.max(np.array([[s for _, _, s in t] for t in traces], dtype=np.float64), axis=0)
    vander = np.array([[1.0, n, float(n) * n] for n in ns])
    coef = np.linalg.solve(vander, y)  # (3, moments)
    return np.vstack([coef, slack[None, :]]).T


def _largest_under(par: np.ndarray, budget: float, lo: int, hi: int, with_slack: bool) -> int:
    """The largest n in [lo, hi] whose envelope (plus slack) stays within ``budget`` (the envelope
    grows with n); lo - 1 when none does."""
    a, b, c, s = par.T
    extra = s if with_slack else 0.0

    def ok(n: int) -> bool:
        return float(np.max(a + b * n + c * float(n) * n + extra)) <= budget

    if not ok(lo):
        return lo - 1
    return last_fitting(ok, lo, hi + 1)


def longest_fitting(length: int, cap: int, peak, traced=None, overhead: int = 0) -> int | None:
    """The largest n <= ``length`` with ``peak(n) <= cap`` (None: not even 1), where ``peak`` is
    the exact device peak at n (it grows with n) and ``traced(n)`` (optional) the trace of that
    run: (live bytes, rounded bytes, slack) at every checked moment, or None. ``overhead``: what
    the device peak adds to the rounded live bytes (the runtime)."""
    seen: dict[int, int] = {}
    traces: dict[int, list] = {}

    def fits(n: int) -> bool:
        if n not in seen:
            if traced is not None:
                t = traced(n)
                if t is not None:
                    traces[n] = t[1]
                    seen[n] = t[0]
            if n not in seen:
                seen[n] = peak(n)
        return seen[n] <= cap

    # the design's own length (the caller knows it does not fit: its trace is the third point),
    # an eighth of it and half of it; not even an eighth: one token, then bisection
    a, b = 0, length + 1  # a fits (0: none known), b does not
    for n in dict.fromkeys((max(1, length // 8), max(1, length // 2), length)):
        if a < n < b:
            if fits(n):
                a = n
            else:
                b = n
                if a == 0:
                    break
    if a == 0:
        if b == 1 or not fits(1):
            return None
        a = 1
    elif len(traces) < 3 and traced is not None and length not in seen:
        fits(length)  # beyond the bracket, but the third parabola point
    if a == length:
        return a
    par = _parabolas(traces) if len(traces) >= 3 else None
    if par is not None and b - a > 1:
        budget = float(cap - overhead)
        sure = _largest_under(par, budget, a + 1, b - 1, with_slack=True)  # fits by the bound
        most = _largest_under(par, budget, a + 1, b - 1, with_slack=False)  # beyond it nothing does
        for g in dict.fromkeys((sure, most, most + 1)):
            if a < g < b:
                if fits(g):
                    a = g
                else:
                    b = g
    return last_fitting(fits, a, b)

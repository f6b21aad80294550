"""The searches over a monotone "does it fit" predicate (largest batch, longest context, fewest GPUs)."""

from __future__ import annotations


def largest_fitting(fits, lo: int, limit: int) -> int:
    """The largest n in [lo, limit] with fits(n) (fits is monotone); lo - 1 when none does.
    Doubling, then bisection: O(log n) calls of ``fits``."""
    if not fits(lo):
        return lo - 1
    hi = lo
    while hi < limit and fits(min(limit, hi * 2)):
        hi = min(limit, hi * 2)
    if hi == limit:
        return hi
    bad = min(limit, hi * 2)
    while bad - hi > 1:
        mid = (hi + bad) // 2
        if fits(mid):
            hi = mid
        else:
            bad = mid
    return hi


def smallest_fitting(fits, lo: int, hi: int) -> int | None:
    """The smallest n in [lo, hi] with fits(n) (fits monotone: once true, true for every larger n);
    None when even hi does not fit: one past the largest n that does not fit."""
    last_bad = largest_fitting(lambda n: not fits(n), lo, hi)
    return None if last_bad >= hi else last_bad + 1

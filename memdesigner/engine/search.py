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
    return last_fitting(fits, hi, min(limit, hi * 2))


def last_fitting(fits, good: int, bad: int) -> int:
    """The largest n in [good, bad) with fits(n), given that ``good`` fits and ``bad`` does not
    (neither is asked; fits monotone): bisection, the one every search here ends with."""
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


def smallest_fitting(fits, lo: int, hi: int) -> int | None:
    """The smallest n in [lo, hi] with fits(n) (fits monotone: once true, true for every larger n);
    None when even hi does not fit: one past the largest n that does not fit."""
    last_bad = largest_fitting(lambda n: not fits(n), lo, hi)
    return None if last_bad >= hi else last_bad + 1

"""The longest sequence that fits (engine/sequence_curve.py): exact, and steered by the moments'
parabolas in the length so that it takes a handful of runs, not a bisection's dozen."""

import random

from memdesigner.engine.sequence_curve import longest_fitting

ROUND, OVERHEAD = 512, 7


def _model(seed):
    rnd = random.Random(seed)
    lines = [(rnd.randint(0, 10**6), rnd.randint(0, 1000), rnd.randint(0, 5)) for _ in range(20)]

    def raw(n):
        return [a + b * n + c * n * n for a, b, c in lines]

    def peak(n):  # every live tensor rounded up: at most one block more per moment
        return -(-max(raw(n)) // ROUND) * ROUND + OVERHEAD

    def traced(n):
        return peak(n), [(v, 0, ROUND - 1) for v in raw(n)]

    return peak, traced


def test_exact_against_every_length_and_a_handful_of_runs():
    rnd = random.Random(1)
    for seed in range(60):
        peak, traced = _model(seed)
        length = rnd.randint(2, 4000)
        cap = rnd.randint(peak(1), peak(length) - 1) if peak(length) > peak(1) else peak(1)
        expect = max(n for n in range(1, length + 1) if peak(n) <= cap)
        calls = []

        def counted(n, calls=calls, traced=traced):
            calls.append(n)
            return traced(n)

        got = longest_fitting(length, cap, peak, counted, overhead=OVERHEAD)
        assert got == expect, (seed, length, cap)
        assert peak(got) <= cap and (got == length or peak(got + 1) > cap)
        if length // 8 > 1 and peak(length // 8) <= cap:
            # three traced lengths give the parabolas; the boundary and its neighbour settle it
            assert len(calls) <= 6, (seed, calls)


def test_without_traces_it_bisects_and_is_still_exact():
    peak, _ = _model(3)
    cap = peak(700)
    assert longest_fitting(2048, cap, peak) == max(n for n in range(1, 2049) if peak(n) <= cap)


def test_not_even_one_token():
    peak, traced = _model(4)
    assert longest_fitting(512, peak(1) - 1, peak, traced, overhead=OVERHEAD) is None

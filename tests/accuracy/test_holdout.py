"""Holdout accuracy: the estimate on architectures it was never calibrated on
(benchmarks/holdout_models.py, measured into benchmarks/holdout_truth.json by
``python benchmarks/holdout.py --measure``).  Import + estimate only: about 6 s."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
TRUTH_JSON = BENCH / "holdout_truth.json"

torch = pytest.importorskip("torch")
if not TRUTH_JSON.exists():
    pytest.skip("benchmarks/holdout_truth.json not found (run benchmarks/holdout.py --measure)",
                allow_module_level=True)

if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import holdout  # noqa: E402

MEDIAN_LIMIT = 0.01  # the product's aim on unseen networks: 1 % median, 3 % worst
WORST_LIMIT = 0.03


@pytest.fixture(scope="module")
def result():
    rows, info = holdout.run()
    return rows, info, holdout.summary(rows)


def _worst_lines(rows, limit):
    bad = sorted((r for r in rows if abs(r["rel_error"]) > limit), key=lambda r: -abs(r["rel_error"]))
    return "\n".join(f"  {r['model']}/{r['config']}: {100 * r['rel_error']:+.2f} %" for r in bad)


def test_every_measured_record_is_estimated(result):
    rows, info, s = result
    assert s["n"] > 0
    assert not info["missing"], f"not measured: {info['missing']}"
    assert not info["measure_failures"], info["measure_failures"]


def test_holdout_median_error(result):
    rows, info, s = result
    assert s["median_abs_rel_error"] <= MEDIAN_LIMIT, (
        f"median |error| {100 * s['median_abs_rel_error']:.2f} % > {100 * MEDIAN_LIMIT:.0f} %\n"
        + _worst_lines(rows, MEDIAN_LIMIT))


def test_holdout_worst_error(result):
    rows, info, s = result
    assert s["worst_abs_rel_error"] <= WORST_LIMIT, (
        f"worst |error| {100 * s['worst_abs_rel_error']:.2f} % ({s['worst']}) > {100 * WORST_LIMIT:.0f} %\n"
        + _worst_lines(rows, WORST_LIMIT))

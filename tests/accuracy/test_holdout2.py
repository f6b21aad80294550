"""Second holdout round (benchmarks/holdout2_models.py, measured into holdout2_truth.json):
12 more networks the rules were not written for. Import + estimate only."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"

torch = pytest.importorskip("torch")
if not (BENCH / "holdout2_truth.json").exists():
    pytest.skip("benchmarks/holdout2_truth.json not found", allow_module_level=True)
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import holdout  # noqa: E402
import holdout2  # noqa: E402


def test_second_holdout_round():
    rows, info = holdout2.run()
    s = holdout.summary(rows)
    assert s["n"] == 48 and not info["import_failures"]
    assert s["median_abs_rel_error"] <= 0.01
    worse = [(r["model"], r["config"], round(100 * r["rel_error"], 2)) for r in rows if abs(r["rel_error"]) > 0.03]
    assert not worse  # the product's aim on unseen networks: 1 % median, 3 % worst

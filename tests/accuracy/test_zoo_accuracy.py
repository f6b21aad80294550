"""The estimate against every measured configuration of the truth zoo (../shared/truth):
imports each model on the meta device and estimates; no PyTorch run. About 8 s."""

import sys

import pytest
from helpers import ROOT, TRUTH

torch = pytest.importorskip("torch")
if not (TRUTH / "cases.json").exists():
    pytest.skip("../shared/truth/cases.json not found", allow_module_level=True)

sys.path.insert(0, str(ROOT / "benchmarks"))
import accuracy  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return accuracy.run(TRUTH)


def test_zoo_within_one_percent(rows):
    s = accuracy.summary(rows)["overall"]
    bad = [f"{r['model']} {r['mode']} {r['dtype']} {r['optimizer']} b{r['batch']}: {100 * r['rel_error']:+.2f} %"
           for r in rows if abs(r["rel_error"]) > 0.01]
    assert s["n"] >= 150
    assert s["median_abs_rel_error"] <= 0.001
    assert not bad, "\n".join(bad)

"""A CPU GRU without grad (recurrent.py ``_gru_inference_moments``): the forward direction's
projection, step list and stack live while the reverse projection is made; a batch-first input
of batch > 1 is first copied time-major, then ``mm`` and the bias ``add`` meet; at batch 1 it is
one ``addmm``. Measured: holdout's bigru_classifier (benchmarks/holdout_truth.json, truth harness,
torch 2.13); the former all-at-once rule was +1.75 % at batch 1 and 8,192 B low at batch 8."""

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize("batch", [1, 8])
def test_bigru_inference_matches_the_measurement(batch):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import holdout_models as hm

    rec = json.loads((BENCH / "holdout_truth.json").read_text())[f"bigru_classifier/inference-fp32-b{batch}"]
    with torch.device("meta"):
        module, shape = hm.MODELS["bigru_classifier"]()
    est = memdesigner.estimate(from_module(module, shape), mode="inference", batch=batch, backend="cpu")
    assert est.peak_bytes == rec["peak_overall"] == {1: 3_685_904, 8: 6_514_704}[batch]

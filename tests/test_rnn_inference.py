"""Recurrent layers without grad on the CPU, measured (benchmarks/holdout_truth.json, truth
harness, torch 2.13).

GRU (recurrent.py ``_gru_inference_moments``): the forward direction's projection, step list and
stack live while the reverse projection is made; a batch-first input of batch > 1 is first copied
time-major, then ``mm`` and the bias ``add`` meet; at batch 1 it is one ``addmm``. The former
all-at-once rule was +1.75 % at batch 1 and 8,192 B low at batch 8 (bigru_classifier).

LSTM (oneDNN): no time-major copy at batch 1 (the transposed view is contiguous); one layer's
h_n and c_n stacks are made beside its output and final states. The former rule was +30,464 B at
batch 1 and 12,288 B low at batch 8 (lstm_maxpool)."""

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


MEASURED = {("bigru_classifier", 1): 3_685_904, ("bigru_classifier", 8): 6_514_704,
            ("lstm_maxpool", 1): 3_005_716, ("lstm_maxpool", 8): 3_952_532}


@pytest.mark.parametrize("key", sorted(MEASURED), ids=lambda k: f"{k[0]}-b{k[1]}")
def test_recurrent_inference_matches_the_measurement(key):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import holdout_models as hm

    name, batch = key
    rec = json.loads((BENCH / "holdout_truth.json").read_text())[f"{name}/inference-fp32-b{batch}"]
    with torch.device("meta"):
        module, shape = hm.MODELS[name]()
    est = memdesigner.estimate(from_module(module, shape), mode="inference", batch=batch, backend="cpu")
    assert est.peak_bytes == rec["peak_overall"] == MEASURED[key]

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

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


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


class Gru(torch.nn.Module):
    def __init__(self, i, h, layers, bi):
        super().__init__()
        self.rnn = torch.nn.GRU(i, h, layers, bidirectional=bi, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


# (I, H, layers, bidirectional, T, B) -> peak measured without grad (truth harness, torch 2.14.1 CPU)
GRU_MEASURED = {
    (32, 32, 2, True, 10, 64): 1_158_144,  # every earlier layer's final h waits for the h_n stack (was -1.41 %)
    (32, 64, 2, False, 20, 8): 447_488,  # the same, one direction (was -0.46 %)
    (16, 64, 1, False, 1, 8): 81_920,  # one step: its hidden gates, new gate and h beside the projection (was -7.5 %)
}


@pytest.mark.parametrize("case", sorted(GRU_MEASURED), ids=str)
def test_gru_inference_moments_as_measured(case):
    i, h, layers, bi, t, b = case
    with torch.device("meta"):
        module = Gru(i, h, layers, bi)
    module.eval()
    est = memdesigner.estimate(from_module(module, (t, i)), mode="inference", batch=b, backend="cpu")
    assert est.peak_bytes == GRU_MEASURED[case]

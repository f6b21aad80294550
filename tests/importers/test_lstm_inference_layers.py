"""nn.LSTM(32, 64, num_layers=L, batch_first=True) without grad on the CPU (oneDNN), input (B, 20, 32),
output ``lstm(x)[0]``: peaks measured with the truth harness (shared/truth/measure.py, method a,
torch 2.13).

Bidirectional, mkldnn_impl runs each direction apart and cats their outputs: the last layer's two
direction outputs live beside the cat (the former rule was -19.05 % at one layer, -8.93 % at two,
batch 8). Only the previous layer's output lives beside the last layer, not every earlier one
(the former rule was +7.97 % for three unidirectional layers at batch 8)."""

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

MEASURED = {  # (bidirectional, num_layers, batch) -> peak bytes
    (True, 1, 8): 430_080, (True, 1, 1): 226_816, (True, 2, 8): 917_504, (True, 2, 1): 635_392,
    (True, 3, 8): 1_331_200, (True, 3, 1): 1_034_752,
    (False, 1, 8): 194_560, (False, 2, 8): 372_736, (False, 3, 8): 514_048, (False, 3, 1): 382_464,
}


class _Seq(nn.Module):
    def __init__(self, layers, bidirectional):
        super().__init__()
        self.lstm = nn.LSTM(32, 64, num_layers=layers, batch_first=True, bidirectional=bidirectional)

    def forward(self, x):
        return self.lstm(x)[0]


@pytest.mark.parametrize("key", sorted(MEASURED), ids=lambda k: f"{'bi' if k[0] else 'uni'}-L{k[1]}-b{k[2]}")
def test_lstm_no_grad_peak_matches_the_measurement(key):
    bi, layers, batch = key
    with torch.device("meta"):
        module = _Seq(layers, bi)
    est = memdesigner.estimate(from_module(module, (20, 32)), mode="inference", batch=batch, backend="cpu")
    assert est.peak_bytes == MEASURED[key]

"""Multi-layer / bidirectional nn.GRU training on the CPU: aten runs one layer at a time
(RNN.cpp ``apply_layer_stack``), so only the running layer's input projections and,
bidirectional, the forward direction's output are transient; earlier layers' are gone. Backward
walks a layer's steps back, freeing their gate tensors while it accumulates the weight_hh
gradient (three (3H, H) tensors at once); the parameter gradients land after the walk. Measured
with the truth harness (CPU, torch 2.14, method a): GRU(32, 64, L, batch_first=True), input
(8, 20, 32), SGD, out = gru(x)[0]. The rule summed every layer's projections and held the
parameter gradients beside all the steps' tensors (L=1 -11.7 %, L=2 +4.8 %, L=3 +11.8 %,
L=3 bidirectional +20.1 %)."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class Gru(nn.Module):
    def __init__(self, layers, bi):
        super().__init__()
        self.rnn = nn.GRU(32, 64, layers, bidirectional=bi, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


# (layers, bidirectional) -> measured peak_overall bytes
MEASURED = {(1, False): 618_760, (2, False): 1_046_280, (3, False): 1_473_800, (2, True): 2_036_488, (3, True): 2_991_104}


@pytest.mark.parametrize(("layers", "bi"), sorted(MEASURED))
def test_gru_layer_stack_within_measurement(layers, bi):
    with torch.device("meta"):
        module = Gru(layers, bi)
    est = memdesigner.estimate(from_module(module, (20, 32)), mode="train", optimizer="sgd", batch=8,
                               backend="cpu").peak_bytes
    meas = MEASURED[(layers, bi)]
    assert abs(est - meas) / meas <= 0.02


class BiLstm(nn.Module):
    def __init__(self, drop):
        super().__init__()
        self.rnn = nn.LSTM(32, 64, 2, dropout=drop, bidirectional=True, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


def test_bidirectional_lstm_dropout_adds_only_the_noise():
    """oneDNN bidirectional (mkldnn_impl): the layer output is a cat of the two directions' outputs
    that the next layer keeps; with dropout the dropped output takes the cat's place, so the
    dropout adds its noise alone. Measured (same setup): 4,552,712 B with dropout 0.2, 4,470,792
    B without."""
    def est(drop):
        with torch.device("meta"):
            module = BiLstm(drop)
        return memdesigner.estimate(from_module(module, (20, 32)), mode="train", optimizer="sgd", batch=8,
                                    backend="cpu").peak_bytes

    assert est(0.2) - est(0.0) == 4_552_712 - 4_470_792

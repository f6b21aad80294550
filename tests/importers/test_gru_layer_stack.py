"""nn.GRU / nn.GRUCell training on the CPU (model/layers/recurrent.py ``_gru_train_mem``,
``_gru_cell_mem``). aten runs one layer at a time (RNN.cpp ``apply_layer_stack``); each direction's
linear_ih copies the batch-first input time-major and keeps the copy, the zero h0 is kept by the
first step, every step keeps 7 x B x H values but the last step's hidden state (kept by no later
step). Backward runs the nodes made last first: the layers last to first, and in a bidirectional
layer the reverse direction's whole walk (and its parameter gradients) before the forward one.
A walk's highest moment is its first step back (weight_hh and gate gradients beside every kept
tensor) or its second (three (3H, H) weight_hh sums, the last two steps gone).

Measured with the truth harness (shared/truth/measure.py method a, CPU, torch 2.14.1, SGD, peak
of the steady step): GRU(I, H, L, bidirectional, bias, dropout, batch_first=True) on (B, T, I),
out = gru(x)[0]. Before, the rule left out the input copies and h0, held every step's tensors at
the second step back and walked both directions at once (1-layer -1.12 %, 1-layer bidirectional
+2.76 %, B=64 -7.95 %, bidirectional H=128 at B=2 +10.65 %)."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class Gru(nn.Module):
    def __init__(self, i, h, layers, bi, bias=True, drop=0.0):
        super().__init__()
        self.rnn = nn.GRU(i, h, layers, bidirectional=bi, bias=bias, dropout=drop, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


# (I, H, layers, bidirectional, bias, dropout, T, B) -> measured peak_overall bytes
MEASURED = {
    (32, 64, 1, False, True, 0.0, 20, 8): 618_760,
    (32, 64, 2, False, True, 0.0, 20, 8): 1_046_280,
    (32, 64, 3, False, True, 0.0, 20, 8): 1_473_800,
    (32, 64, 1, True, True, 0.0, 20, 8): 1_083_144,
    (32, 64, 2, True, True, 0.0, 20, 8): 2_036_488,
    (32, 64, 3, True, True, 0.0, 20, 8): 2_991_104,  # forward: every layer's last h waits for h_n
    (32, 64, 1, False, False, 0.0, 20, 8): 616_456,  # no bias: no per-step bias gradient
    (32, 32, 1, False, True, 0.0, 20, 64): 2_163_456,  # large batch: the first step back is highest
    (32, 32, 2, True, True, 0.0, 10, 64): 3_435_520,
    (24, 128, 1, True, True, 0.0, 12, 2): 1_434_632,  # the reverse walk's gradients beside the forward's
    (32, 48, 3, False, True, 0.3, 20, 3): 566_024,
    (32, 48, 2, True, True, 0.3, 16, 4): 831_176,
}


@pytest.mark.parametrize("case", sorted(MEASURED), ids=str)
def test_gru_training_peak_as_measured(case):
    i, h, layers, bi, bias, drop, t, b = case
    with torch.device("meta"):
        module = Gru(i, h, layers, bi, bias, drop)
    est = memdesigner.estimate(from_module(module, (t, i)), mode="train", optimizer="sgd", batch=b,
                               backend="cpu").peak_bytes
    assert est == MEASURED[case]


def test_one_layer_peak_by_hand():
    """GRU(32, 64), (8, 20, 32): the second step back. Weights 75,264 B and input 20,480 B; the input's
    time-major copy 20,480 and h0 2,048; the 20 steps' 139 B*H values less the 14 of the last two steps
    (125 x 2,048); output, its gradient 40,960 each, loss and seed 8; three (3H, H) sums 3 x 49,152 and
    the step's gate gradients 7 x 2,048 + a (3H,) bias sum 768."""
    with torch.device("meta"):
        module = Gru(32, 64, 1, False)
    est = memdesigner.estimate(from_module(module, (20, 32)), mode="train", optimizer="sgd", batch=8,
                               backend="cpu").peak_bytes
    assert est == 75_264 + 20_480 + 20_480 + 2_048 + 125 * 2_048 + 2 * 40_960 + 8 + 3 * 49_152 + 7 * 2_048 + 768


class Cells(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(32, 64)

    def forward(self, x):
        h = self.cell(x[:, 0])
        hs = [h]
        for t in range(1, 5):
            h = self.cell(x[:, t], h)
            hs.append(h)
        return torch.stack(hs, 1)


def test_gru_cell_forward_as_measured():
    """Five GRUCell(32, 64) steps on (8, 5, 32) (same harness): the forward peaks at the stack with
    164,352 B (a cell keeps its hidden gate projection, two clones and the new gate; the input
    projection dies with it; the first cell keeps its zero hidden state), and 104,960 B without
    grad (both projections and the new gate beside the output). The rule kept both projections and
    four B x H intermediates (forward 203,264 B, +23.7 %) and forgot the new gate without grad."""
    with torch.device("meta"):
        module = Cells()
    design = from_module(module, (5, 32))
    train = memdesigner.estimate(design, mode="train", optimizer="sgd", batch=8, backend="cpu")
    assert train.phase_peaks["forward"] == 164_352
    assert memdesigner.estimate(design, mode="inference", batch=8, backend="cpu").peak_bytes == 104_960


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

"""nn.LSTM / nn.GRU ``dropout=p`` with several layers: in training on the CPU aten's layer stack
(ATen/native/RNN.cpp ``apply_layer_stack``; the oneDNN LSTM's ``mkldnn_impl`` alike) runs
``at::dropout`` on every layer's output but the last. That is a noise tensor kept by the product
and the dropped output, kept by the next layer as its input; backward adds one ``mul`` per dropout
(model/layers/recurrent.py ``_inter_layer_dropout``). Measured with the truth harness (CPU, torch
2.14, method a): a 3-layer LSTM language model, batch 3, SGD."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class RnnLM(nn.Module):
    def __init__(self, cls, drop):
        super().__init__()
        self.emb = nn.Embedding(256, 32)
        self.rnn = cls(32, 48, 3, dropout=drop, batch_first=True)
        self.fc = nn.Linear(48, 8)

    def forward(self, ids):
        out, _ = self.rnn(self.emb(ids))
        return self.fc(out)


def _estimate(cls, drop, mode="train", backend="cpu"):
    with torch.device("meta"):
        module = RnnLM(cls, drop)
    module.truth_input = ("tokens", 256)
    module.train(mode == "train")
    design = from_module(module, (20,))
    return memdesigner.estimate(design, mode=mode, optimizer="sgd" if mode == "train" else "none", batch=3,
                                backend=backend).peak_bytes


# peak_overall measured: with dropout 0.3, and without (the noise and the dropped output of two
# dropouts, 2 x 2 x 20*3*48*4 B, are alive at the peak in backward)
LSTM_MEASURED = {0.3: 999_464, 0.0: 953_384}


@pytest.mark.parametrize("drop", sorted(LSTM_MEASURED))
def test_lstm_dropout_matches_the_measurement(drop):
    assert _estimate(nn.LSTM, drop) == LSTM_MEASURED[drop]


def test_gru_dropout_adds_what_was_measured():
    # measured: 585,128 B with dropout 0.3, 562,088 B without: +23,040 B, one dropout's noise and
    # its gradient (the dropped output takes the place of the stacked output the next layer keeps)
    assert _estimate(nn.GRU, 0.3) - _estimate(nn.GRU, 0.0) == 585_128 - 562_088


def test_no_dropout_in_inference_or_on_cuda():
    assert _estimate(nn.LSTM, 0.3, mode="inference") == _estimate(nn.LSTM, 0.0, mode="inference")
    # cuDNN applies the dropout inside its RNN kernel
    assert _estimate(nn.LSTM, 0.3, backend="cuda") == _estimate(nn.LSTM, 0.0, backend="cuda")

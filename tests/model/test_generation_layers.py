"""Single-layer tests of the generation layer types, measured with PyTorch's storages (the
built-in tracker, method (a) of shared/truth) against the estimate, inference and SGD training.
KVCache is measured end to end against transformers' generate (tests/engine/test_generate.py)."""

import math

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.engine.settings import Settings  # noqa: E402
from memdesigner.measure.torch_measure import _builtin_measure  # noqa: E402
from memdesigner.model.design import Design  # noqa: E402


class _NewGELU(nn.Module):
    """transformers' NewGELUActivation after a Linear."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 64)

    def forward(self, x):
        x = self.fc(x)
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class _Positions(nn.Module):
    """GPT2Model's embeddings: wte(ids) + wpe(arange(tokens)), both kept as locals."""

    truth_input = ("tokens", 50)

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(50, 16)
        self.wpe = nn.Embedding(40, 16)

    def forward(self, ids):
        inputs_embeds = self.wte(ids)
        position_embeds = self.wpe(torch.arange(ids.shape[1]).unsqueeze(0))
        hidden = inputs_embeds + position_embeds
        return hidden * 2.0


def _gelu_design():
    d = Design()
    d.add_node("Input", {"shape": (32,)}, id="x")
    d.add_node("Linear", {"out_features": 64}, id="fc")
    d.add_node("NewGELU", {}, id="act")
    d.add_edge("x", "fc")
    d.add_edge("fc", "act")
    return d


def _pos_design(tokens=12):
    d = Design()
    d.add_node("Input", {"shape": (tokens,), "dtype": "int64", "vocab": 50}, id="ids")
    d.add_node("Embedding", {"num_embeddings": 50, "embedding_dim": 16}, id="wte", keep_until="mul")
    d.add_node("AbsolutePositions", {"num_embeddings": 40, "embedding_dim": 16}, id="wpe", keep_until="mul")
    d.add_node("Add", {}, id="add")
    d.add_node("Scale", {"factor": 2.0}, id="mul")
    d.add_edge("ids", "wte")
    d.add_edge("ids", "wpe")
    d.add_edge("wte", "add", 0, 0)
    d.add_edge("wpe", "add", 0, 1)
    d.add_edge("add", "mul")
    return d


CASES = {"NewGELU": (lambda: (_NewGELU(), (32,)), _gelu_design),
         "AbsolutePositions": (lambda: (_Positions(), (12,)), _pos_design)}


@pytest.mark.parametrize("mode", ["inference", "train"])
@pytest.mark.parametrize("layer", sorted(CASES))
def test_generation_layer_matches_measurement(layer, mode):
    factory, design = CASES[layer]
    s = Settings(backend="cpu", batch=4, mode=mode, optimizer="sgd" if mode == "train" else "none")
    measured = _builtin_measure(factory, s, "cpu", "sgd", 2, 0)["peak_bytes"]
    est = memdesigner.estimate(design(), s)
    assert est.issues == []
    assert est.peak_bytes == measured, (layer, mode, est.peak_bytes, measured)


def test_position_table_counts_once_and_checks_its_length():
    rep = memdesigner.estimate(_pos_design(), mode="inference", backend="cpu")
    assert rep.params == 50 * 16 + 40 * 16
    bad = memdesigner.estimate(_pos_design(tokens=41), mode="inference", backend="cpu")
    assert bad.issues and bad.issues[0].field == "num_embeddings"

"""PyTorch import (torch.fx): layer mapping, parameter counts, warnings, the zoo, CLI glue."""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import memdesigner
from memdesigner.cli import main as cli_main
from memdesigner.importers.torch_fx import from_module, import_file

TRUTH = Path(__file__).resolve().parents[3] / "shared" / "truth"


def _types(d):
    return [n.type for n in d.nodes.values()]


def _nparams(m):
    return sum(p.numel() for p in m.parameters())


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        identity = x
        out = self.bn1(self.conv1(x))
        out += identity
        return self.relu(out)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.block = Block()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 10)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = self.pool(self.block(self.stem(x)))
        x = torch.flatten(x, 1)
        return F.gelu(self.drop(self.fc(x)))


def test_small_cnn_mapping():
    m = Net()
    d = from_module(m, (3, 16, 16))
    assert d.import_warnings == []
    types = _types(d)
    for t in ("Input", "Conv2d", "BatchNorm2d", "Add", "ReLU", "MaxPool2d", "Flatten", "Linear", "Dropout", "GELU"):
        assert t in types
    names = {n.name for n in d.nodes.values()}
    assert "block.conv1" in names and "fc" in names
    add = next(n for n in d.nodes.values() if n.type == "Add")
    assert add.props["inplace"] is True  # out += identity
    relu = next(n for n in d.nodes.values() if n.type == "ReLU")
    assert relu.props["inplace"] is True
    assert memdesigner.estimate(d).params == _nparams(m)
    ys = [n.pos[1] for n in d.nodes.values()]
    assert len(set(ys)) > 3  # laid out in layers


class Attn(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 9, dim))
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm = nn.LayerNorm(dim)
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x):
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self.pos_embed
        B, N, C = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q * 0.5) @ k.transpose(-2, -1)
        y = (a.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, N, C)
        z, _ = self.mha(y, y, y)
        h = y.reshape(B, N, self.heads, C // self.heads).transpose(1, 2)
        s = F.scaled_dot_product_attention(h, h, h)
        return z[:, 0], s.mean(1)


def test_attention_patterns():
    m = Attn()
    d = from_module(m, (8, 32))
    types = _types(d)
    for t in ("ClassToken", "PositionEmbedding", "Permute", "Split", "Scale", "MatMul", "Transpose", "Softmax",
              "Reshape", "MultiHeadAttention", "ScaledDotProductAttention", "Select", "Mean"):
        assert t in types, t
    assert memdesigner.estimate(d).params == _nparams(m)
    assert not any(i for i in memdesigner.estimate(d).issues)


class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.rnn = nn.LSTM(16, 24, num_layers=2, batch_first=True)
        self.gru = nn.GRU(24, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)
        self.truth_input = ("tokens", 50)

    def forward(self, idx):
        out, _ = self.rnn(self.emb(idx))
        out, _ = self.gru(out)
        return self.fc(out[:, -1])


def test_token_model():
    m = Tokens()
    d = from_module(m, (10,))
    inp = next(n for n in d.nodes.values() if n.type == "Input")
    assert inp.props["dtype"] == "int64" and inp.props["vocab"] == 50
    assert {"Embedding", "LSTM", "GRU", "Select", "Linear"} <= set(_types(d))
    assert memdesigner.estimate(d, mode="train", batch=2).params == _nparams(m)


class Odd(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.exp(self.fc(x)) * 2.0 + 1.0


def test_unknown_op_becomes_generic_with_warning():
    d = from_module(Odd(), (4,))
    gen = [n for n in d.nodes.values() if n.type == "Generic"]
    assert gen and any("exp" in n.props["op"] for n in gen)
    assert any("exp" in w for w in d.import_warnings)
    rep = memdesigner.estimate(d, batch=3)
    assert rep.params == 20 and rep.peak_bytes > 0


def test_meta_module_and_real_module_give_the_same_design():
    torch.manual_seed(0)
    real = from_module(Net(), (3, 16, 16))
    with torch.device("meta"):
        meta = from_module(Net(), (3, 16, 16))
    for kw in ({"mode": "inference", "batch": 4}, {"mode": "train", "batch": 4, "optimizer": "adam"}):
        assert memdesigner.estimate(real, **kw).peak_bytes == memdesigner.estimate(meta, **kw).peak_bytes


def test_import_file_and_cli(tmp_path):
    src = tmp_path / "models.py"
    src.write_text("import torch.nn as nn\n\n"
                   "def mlp():\n    return nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2)), (10,)\n\n"
                   "def bare():\n    return nn.Sequential(nn.Linear(6, 3))\n")
    d = import_file(f"{src}:mlp")
    assert memdesigner.estimate(d).params == 10 * 5 + 5 + 5 * 2 + 2
    d2 = import_file(f"{src}:bare", input_shape=(6,))
    assert memdesigner.estimate(d2).params == 21
    out = tmp_path / "d.json"
    assert cli_main(["import", "torch", f"{src}:mlp", "-o", str(out)]) == 0
    loaded = memdesigner.load_design(out)
    assert memdesigner.estimate(loaded).params == 67
    assert cli_main(["import", "torch", f"{src}:bare", "-o", str(out), "--input-shape", "6"]) == 0
    assert memdesigner.estimate(memdesigner.load_design(out)).params == 21


@pytest.mark.skipif(not (TRUTH / "zoo.py").exists(), reason="shared/truth not found")
def test_zoo_imports_with_exact_parameter_counts():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_zoo_for_test", TRUTH / "zoo.py")
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    for name, factory in zoo.MODELS.items():
        d = import_file(f"{TRUTH / 'zoo.py'}:{name}")
        with torch.device("meta"):
            m, _ = factory()
        assert d.import_warnings == [], (name, d.import_warnings)
        assert memdesigner.estimate(d).params == _nparams(m), name
        if name in zoo.PUBLISHED_PARAMS:
            assert memdesigner.estimate(d).params == zoo.PUBLISHED_PARAMS[name]


class ShapeBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)

    def forward(self, x):
        if x.shape[1] > 4:  # fx cannot trace this; torch.export can
            x = torch.relu(self.a(x))
        return self.b(x)


def test_torch_export_fallback():
    m = ShapeBranch()
    d = from_module(m, (8,))
    assert [n.type for n in d.nodes.values()] == ["Input", "Linear", "ReLU", "Linear"]
    assert memdesigner.estimate(d).params == _nparams(m)

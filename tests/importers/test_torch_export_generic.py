"""Generic nodes export as the PyTorch call they were imported from (their ``call`` prop), not as a
zeros placeholder: export -> run -> import gives the same node back, with the same parameters
(the ones it owns become nn.Parameters of the exported module) and the same estimate."""

import json

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import memdesigner  # noqa: E402
from memdesigner.exporters.torch_code import to_python  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402
from tests.exporters.test_torch_export import _make, _round_trip  # noqa: E402


class LayerScale(nn.Module):
    """ConvNeXt's layer scale: a parameter times a feature map (no layer for it: Generic mul)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gamma = nn.Parameter(1e-6 * torch.ones(8, 1, 1))
        self.fc = nn.Linear(8 * 6 * 6, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.gamma * self.conv(x), 1))


class Einsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)

    def forward(self, x):
        return torch.einsum("bid,bjd->bij", self.q(x), self.k(x)).softmax(-1)


class PoolOverTime(nn.Module):
    """text_cnn's max over time: F.max_pool1d with a kernel read off the traced tensor."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3)
        self.fc = nn.Linear(6, 2)

    def forward(self, x):
        c = F.relu(self.conv(x))
        return self.fc(F.max_pool1d(c, c.shape[2]).squeeze(2))


class Latents(nn.Module):
    """perceiver's latents: nn.LayerNorm on a parameter expanded to the batch, then added."""

    def __init__(self):
        super().__init__()
        self.latents = nn.Parameter(torch.zeros(5, 16))
        self.norm = nn.LayerNorm(16, eps=1e-6)
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        lat = self.latents.expand(x.size(0), -1, -1)
        return self.fc(x) + self.norm(lat)


def _generics(d):
    from memdesigner.model.blocks import expand

    return [n for n in expand(d).nodes.values() if n.type == "Generic"]


@pytest.mark.parametrize("cls,shape,params,expr", [
    (LayerScale, (3, 6, 6), 3 * 8 * 9 + 8 + 8 + 288 * 4 + 4, "* "),
    (Einsum, (5, 16), 2 * (16 * 16 + 16), "torch.einsum('bid,bjd->bij', "),
    (PoolOverTime, (4, 10), 4 * 6 * 3 + 6 + 6 * 2 + 2, "torch.nn.functional.max_pool1d("),
    (Latents, (5, 16), 5 * 16 + 2 * 16 + 16 * 16 + 16, "nn.LayerNorm(normalized_shape=(16,), eps=1e-06"),
])
def test_generic_op_exports_as_its_call_and_round_trips(cls, shape, params, expr, capsys):
    m = cls()
    assert sum(p.numel() for p in m.parameters()) == params
    d = from_module(m, shape)
    gens = _generics(d)
    assert gens and all(g.props["call"] for g in gens)
    code = to_python(d)
    assert expr in code and "new_zeros" not in code
    assert "placeholder" not in capsys.readouterr().err
    m2, s2, back = _round_trip(d)  # same params (== the module's), same peaks in three settings
    assert sum(p.numel() for p in m2.parameters()) == params
    assert [g.props["op"] for g in _generics(back)] == [g.props["op"] for g in gens]
    y = m2(torch.randn(2, *s2))
    assert y.shape[0] == 2


def test_layer_scale_parameter_is_owned_by_the_exported_module():
    """The 8 layer-scale weights are an nn.Parameter of the exported module, of the traced shape."""
    d = from_module(LayerScale(), (3, 6, 6))
    (g,) = _generics(d)
    call = json.loads(g.props["call"])
    assert call["target"] == "operator.mul"
    assert call["tensors"] == [{"shape": [8, 1, 1], "dtype": "torch.float32", "param": True, "grad": True}]
    m2, _ = _make(to_python(d))()
    assert [tuple(p.shape) for n, p in m2.named_parameters() if n.endswith("_tensors.t0")] == [(8, 1, 1)]


def _old_design():
    """A design as files without ``call`` have it: a Generic that reads nothing, after the input's
    last use (the exported placeholder must not read a deleted variable: mini_bert's failure)."""
    d = memdesigner.Design("old")
    d.add_node("Input", {"shape": (4,)}, id="x")
    d.add_node("Linear", {"out_features": 4}, id="fc")
    d.add_node("Linear", {"out_features": 4}, id="fc2")
    d.add_node("Add", {}, id="sum")
    d.add_node("Generic", {"op": "arange", "out_shape": (4,)}, id="g")
    d.add_node("Add", {}, id="add")
    for a, b in (("x", "fc"), ("x", "fc2"), ("fc", "sum"), ("sum", "add")):
        d.add_edge(a, b)
    d.add_edge("fc2", "sum", 0, 1)
    d.add_edge("g", "add", 0, 1)
    return d


def test_design_without_call_still_exports_a_placeholder(tmp_path, capsys):
    from memdesigner.io.design_file import load_design, save_design

    p = tmp_path / "old.json"
    save_design(_old_design(), p)
    d = load_design(p)
    assert d.nodes["g"].props["call"] == ""
    code = to_python(d)
    assert "Generic op 'arange' is written as a zeros placeholder" in capsys.readouterr().err
    m, shape = _make(code)()
    assert m(torch.randn(3, *shape)).shape == (3, 4)


@pytest.mark.parametrize("call", [
    {"kind": "function", "target": "torch.load", "args": ["/etc/passwd"], "kwargs": {}},
    {"kind": "function", "target": "os.system", "args": ["touch x"], "kwargs": {}},
    {"kind": "method", "target": "__class__", "args": [{"in": 0}], "kwargs": {}},
    {"kind": "module", "target": "torch.nn.Module; import os", "args": [{"in": 0}], "kwargs": {}},
    {"kind": "function", "target": "torch.add", "args": [{"in": 0}, {"in": 5}], "kwargs": {}},
    {"kind": "function", "target": "torch.add", "args": [{"in": 0}], "kwargs": {"alpha); import os; (": 1}},
])
def test_a_call_that_is_not_allowed_or_malformed_exports_a_placeholder(call, capsys):
    d = _old_design()
    d.add_edge("sum", "g")
    d.set_prop("g", "call", json.dumps(call))
    code = to_python(d)
    assert "recorded call cannot be written" in capsys.readouterr().err
    assert "import os" not in code and "torch.load" not in code and "system" not in code
    _make(code)()


class Encoder(nn.Module):
    def __init__(self, norm_first):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc(self.encoder(x)[:, 0])


@pytest.mark.parametrize("norm_first", [True, False])
def test_fused_encoder_layers_export_as_transformer_encoder_layers(norm_first):
    """In inference PyTorch runs each nn.TransformerEncoderLayer as one fused kernel (the design's
    Node.fused): written op by op, the exported network's inference peak was another number."""
    d = from_module(Encoder(norm_first), (6, 32))
    from memdesigner.model.blocks import expand

    assert any(n.fused for n in expand(d).nodes.values())
    code = to_python(d)
    assert code.count("nn.TransformerEncoderLayer(32, nhead=4, dim_feedforward=64") == 2
    _, _, back = _round_trip(d)  # the inference setting included
    assert len({n.fused for n in expand(back).nodes.values()} - {""}) == 2  # two fused layers again


def test_recorded_call_survives_the_design_file(tmp_path):
    from memdesigner.io.design_file import load_design, save_design

    d = from_module(Latents(), (5, 16))
    save_design(d, tmp_path / "d.json")
    code = to_python(load_design(tmp_path / "d.json"))
    assert code == to_python(d) and "self.norm(self.norm_tensors.t0.expand(x.size(0), -1, -1))" in code

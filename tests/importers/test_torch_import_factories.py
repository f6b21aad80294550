"""PyTorch import: factory calls on traced sizes (``torch.zeros(x.shape[0], L)``, an LSTM's h0) trace
under torch.fx instead of failing it and falling back to torch.export (which breaks modules such as
nn.MultiheadAttention into generic ops)."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from memdesigner.importers.torch_fx import from_module


class _H0Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 32, num_layers=2, batch_first=True)
        self.att = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        h0 = torch.zeros(2, x.size(0), 32, device=x.device)
        c0 = torch.full((2, x.shape[0], 32), 0.5)
        y, _ = self.lstm(x, (h0, c0))
        y, _ = self.att(y, y, y)
        # a traced size first: PyTorch's argument parser rejected fx's Proxy there (TypeError)
        return y + torch.ones(x.shape[0], 10, 32, device=x.device)


def test_factories_on_traced_sizes_keep_the_modules_whole():
    d = from_module(_H0Attention(), (10, 8))
    types = [n.type for n in d.nodes.values()]
    assert "LSTM" in types and "MultiHeadAttention" in types  # torch.export would break the attention up
    gens = {n.props["op"]: n.props for n in d.nodes.values() if n.type == "Generic"}
    # ``y, _ = self.att(...)``: the head-averaged weights ``_`` holds (tests/importers/test_held_module_outputs.py)
    assert set(gens) == {"zeros", "ones", "full", "att output 1 (held by a Python name)"}
    # per sample: h0 and c0 are (layers=2, 32) float32 = 256 B; the ones tensor (10, 32) = 1,280 B
    assert gens["zeros"]["out_shape"] == (2, 32) and gens["full"]["out_shape"] == (2, 32)
    assert gens["ones"]["out_shape"] == (10, 32)
    assert all(g["dtype"] == "float" and g["params"] == 0 for g in gens.values())


def test_factories_on_traced_sizes_trace_with_fx_not_export():
    from memdesigner.importers.torch_fx import _trace

    gm = _trace(torch, _H0Attention(), torch.zeros(2, 10, 8))
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    # torch.fx's own calls (torch.export would give aten.zeros.default and break the modules up)
    assert torch.zeros in targets and torch.ones in targets and torch.full in targets
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == ["lstm", "att"]


class _SmoothedLoss(nn.Module):
    """Returns its own loss on labels made from the batch index (a device-less factory)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        target = torch.arange(x.shape[0]) % 10
        return F.cross_entropy(self.fc(x), target, label_smoothing=0.1)


class _CausalMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        t = x.shape[1]
        att = torch.einsum("bqd,bkd->bqk", self.fc(x), x)
        return att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf")).softmax(-1)


def test_device_less_factories_propagate_on_meta():
    # the meta module's shape propagation made torch.arange / torch.ones CPU tensors beside meta
    # activations ("Tensor on device meta is not on the expected device cpu!"): the import failed
    from memdesigner.importers.torch_fx import build_module

    m, _ = build_module(lambda: (_SmoothedLoss(), (16,)))
    d = from_module(m, (16,))
    gens = {n.props["op"]: n.props for n in d.nodes.values() if n.type == "Generic"}
    assert "Linear" in [n.type for n in d.nodes.values()]
    assert gens["arange"]["out_shape"] == (1,) and gens["arange"]["dtype"] == "int64"  # one label per sample
    m, _ = build_module(lambda: (_CausalMask(), (8, 16)))
    d = from_module(m, (8, 16))
    gens = {n.props["op"]: n.props for n in d.nodes.values() if n.type == "Generic"}
    assert gens["ones"]["batch_free"] is True and gens["ones"]["out_elems"] == 8 * 8  # (t, t) bool: 64 B once
    assert gens["masked_fill"]["out_shape"] == (8, 8)


class _PaddedMask(nn.Module):
    """Control flow on a shape (fx cannot trace it: torch.export) with a device-less factory."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        keep = torch.ones(x.shape[:2], dtype=torch.bool)
        if x.shape[1] > 4:
            keep = keep.logical_not()
        return self.fc(x) * keep.unsqueeze(-1)


def test_export_fallback_makes_device_less_factories_on_the_module_device():
    # torch.export ran the meta module with a CPU mask: "found at least two devices, cpu and meta"
    from memdesigner.importers.torch_fx import build_module

    m, _ = build_module(lambda: (_PaddedMask(), (8, 16)))
    d = from_module(m, (8, 16))
    types = [n.type for n in d.nodes.values()]
    assert "Linear" in types
    ones = [n.props for n in d.nodes.values() if n.type == "Generic" and n.props["op"] == "ones"]
    assert len(ones) == 1 and ones[0]["dtype"] == "bool" and ones[0]["out_shape"] == (8,)  # 8 B a sample


class _MaskedAttention(nn.Module):
    """A key_padding_mask made by item assignment (fx's Proxy had no __setitem__: torch.export)."""

    def __init__(self):
        super().__init__()
        self.att = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x):
        pad = torch.zeros(x.shape[:2], dtype=torch.bool)
        pad[:, -2:] = True
        return self.att(x, x, x, key_padding_mask=pad)[0]


def test_item_assignment_traces_with_fx_and_keeps_the_attention_whole():
    from memdesigner.importers.torch_fx import build_module

    m, _ = build_module(lambda: (_MaskedAttention(), (8, 16)))
    d = from_module(m, (8, 16))
    assert [n.type for n in d.nodes.values()] == ["Input", "Generic", "MultiHeadAttention"]
    assert next(n for n in d.nodes.values() if n.type == "Generic").props["out_shape"] == (8,)  # (B, 8) bool

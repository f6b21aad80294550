"""PyTorch import of a forward that runs ``torch.autocast(device_type=x.device.type,
enabled=False)`` (transformers 4.57's rotary embeddings): the module is built on meta, where
torch 2.13/2.14 reject autocast ("unsupported scalarType"), so fx (control flow) and
torch.export both failed. During the trace autocast on meta is a no-op."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from memdesigner import estimate
from memdesigner.importers._torch_meta_autocast import autocast_on_meta_is_off
from memdesigner.importers.torch_fx import from_module


class _RotaryLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 4)

    def forward(self, x):
        h = self.a(x)
        if h.shape[0] > 0:  # Python control flow on a size: fx gives up, torch.export runs the forward
            pass
        with torch.autocast(device_type=h.device.type, enabled=False):  # "Force float32"
            h = torch.relu(h)
        return self.b(h)


def _meta_module():
    with torch.device("meta"):
        return _RotaryLike()


def test_autocast_on_meta_imports_and_estimates_what_pytorch_measured():
    d = from_module(_meta_module(), (8,))
    assert [n.type for n in d.nodes.values()] == ["Input", "Linear", "ReLU", "Linear"]
    assert d.import_params == 8 * 16 + 16 + 16 * 4 + 4
    # batch 2, fp32: weights 212 x 4 B = 848, input 64, h 128, relu(h) 128 -> 1,168 B, as
    # ../shared/truth/measure.py measured (method a, torch 2.13 CPU); SGD training 1,928 B
    assert estimate(d, mode="inference", batch=2, dtype="fp32", backend="cpu").peak_bytes == 1168
    assert estimate(d, mode="train", batch=2, optimizer="sgd", dtype="fp32", backend="cpu").peak_bytes == 1928


def test_the_patch_is_narrow_and_restored():
    original = torch.autocast
    with autocast_on_meta_is_off(torch):
        with torch.autocast(device_type="meta", enabled=False):
            pass
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):  # other devices: PyTorch's own
            assert torch.is_autocast_enabled("cpu")
        assert isinstance(torch.autocast("cpu"), original)
    assert torch.autocast is original and torch.amp.autocast is original
    with pytest.raises(RuntimeError):
        torch.autocast(device_type="meta", enabled=False)


def test_meta_factories_inside_subgraphs_point_at_the_cpu_for_the_fake_run():
    """torch.export (2.14) keeps transformers 4.57's vmapped mask as a flat_apply of a submodule;
    its ``arange(..., device=meta)`` met CPU fake tensors ("Tensor device mismatch! Expected:
    meta, Got: cpu"), so no Generic op of a 4.57 decoder was characterised (SGD +12 % on a
    small Llama). The fake run's device rewrite reaches every subgraph."""
    from memdesigner.importers._torch_characterise import _meta_to_cpu

    class Inner(nn.Module):
        def forward(self, x):
            return x + torch.arange(x.shape[-1], device="meta")

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.fx.symbolic_trace(Inner())

        def forward(self, x):
            return self.inner(x) * 2

    class KeepInner(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, torch.fx.GraphModule) or super().is_leaf_module(m, qualname)

    root = Outer()
    gm = torch.fx.GraphModule(root, KeepInner().trace(root))

    def devices(g):
        return [str(v) for n in g.graph.nodes for v in n.kwargs.values() if "meta" in str(v) or "cpu" in str(v)]

    assert devices(gm.inner) == ["meta"]
    _meta_to_cpu(torch, gm)
    assert devices(gm.inner) == ["cpu"]
    assert gm(torch.zeros(2, 3)).device.type == "cpu"


def test_tensor_constants_built_on_meta_join_the_fake_cpu_run():
    """torch.export lifts ``torch.tensor(hidden ** 0.5)`` (Gemma's embedding scale, made on meta)
    to a graph constant that is neither parameter nor buffer; the fake CPU run met it on meta
    ("found at least two devices, cpu and meta") and no Generic op of a 4.57 Gemma was
    characterised (SGD +14.0 % -> +0.53 %)."""
    from memdesigner.importers._torch_characterise import _fake_cpu_run

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.scale = torch.full((4,), 2.0, device="meta")  # a plain attribute: a lifted constant

        def forward(self, x):
            return self.lin(x) * self.scale

    with torch.device("meta"):
        root = Scaled()
    gm = torch.fx.symbolic_trace(root)
    assert any(n.op == "get_attr" and n.target == "scale" for n in gm.graph.nodes)
    del gm._buffers["scale"]  # fx registers it as a buffer; torch.export's module keeps a plain attribute
    gm.scale = torch.full((4,), 2.0, device="meta")

    def x_of(b, device):
        return torch.empty((b, 4), device=device)

    import memdesigner.importers._torch_characterise as ch

    seen = []
    real_run = ch._run

    def spy(torch_, g, x, targets, evaluate):
        seen.append(g.scale.device.type)  # torch 2.14 raised the device mismatch on it
        return real_run(torch_, g, x, targets, evaluate)

    ch._run = spy
    try:
        _fake_cpu_run(torch, gm, x_of, 2, set(), False)
    finally:
        ch._run = real_run
    assert seen == ["cpu"]
    assert gm.scale.device.type == "meta"  # put back

"""What made transformers' Wav2Vec2Model fail to import (holdout3 wav2vec2_tiny), each on a small
module of the same make:

- its forward is behind decorators whose wrapper takes ``(self, *args, **kwargs)``: fx placed
  its placeholders by the unwrapped signature and the wrapper saw a Proxy where a Python value
  belonged ("symbolically traced variables cannot be used as inputs to control flow"); the
  torch.export fallback breaks nn.MultiheadAttention into aten ops (importers/_torch_root_call.py);
- ``nn.Parameter(torch.Tensor(n).uniform_())`` ignores the meta device, and a CPU parameter
  among meta ones fails every op that mixes them (torch_fx._all_on_meta);
- LayerDrop's coin flip ``torch.rand([]) < layerdrop`` skipped layers at random (fx) or could not
  be traced at all (torch.export); while tracing it lets every layer run (_torch_coin_flips.py).

Measured with the truth harness (CPU, torch 2.13, method a), batch 2, the same module with
layerdrop 0 (every layer runs): inference 90,752 B, train (SGD) 305,672 B."""

import functools

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


def config_defaults(fn):
    """As transformers' merge_with_config_defaults: a wrapper over (self, *args, **kwargs)."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        if kwargs.get("strategy") not in (None, "default", "full"):
            raise ValueError("strategy")
        return fn(self, *args, **kwargs)
    return wrapper


class TinySpeech(nn.Module):
    def __init__(self, d=32, layerdrop=0.5):
        super().__init__()
        self.layerdrop = layerdrop
        self.conv = nn.Conv1d(1, d, 10, stride=5)
        self.masked_spec_embed = nn.Parameter(torch.Tensor(d).uniform_())  # on the CPU even under meta
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.layers = nn.ModuleList([nn.Linear(d, d), nn.Linear(d, d)])

    @config_defaults
    def forward(self, x, **kwargs):
        h = self.conv(x[:, None]).transpose(1, 2) * self.masked_spec_embed
        h = self.attn(h, h, h, need_weights=False)[0]
        for layer in self.layers:
            if self.training and torch.rand([]) < self.layerdrop:
                continue
            h = torch.relu(layer(h))
        return h


def _design():
    with torch.device("meta"):
        module = TinySpeech()
    torch.manual_seed(0)  # the first draw would be 0.496: below layerdrop, the layer skipped
    return from_module(module, (400,))


def test_the_decorated_forward_traces_with_fx_and_every_layer_runs():
    d = _design()
    types = [n.type for n in d.nodes.values()]
    assert types.count("MultiHeadAttention") == 1  # whole: fx, not torch.export's aten ops
    assert types.count("Linear") == 2 and types.count("ReLU") == 2
    assert sum(1 for n in d.nodes.values() if n.type == "Generic" and n.props["op"] == "mul") == 1
    assert torch.rand.__module__.startswith("torch")  # restored after the trace


@pytest.mark.parametrize(("mode", "measured"), [("inference", 90_752), ("train", 305_672)])
def test_the_speech_model_matches_the_measurement(mode, measured):
    est = memdesigner.estimate(_design(), mode=mode, optimizer="sgd" if mode == "train" else "none", batch=2,
                               backend="cpu")
    assert est.peak_bytes == measured


def test_a_coin_flip_under_torch_export_runs_every_layer():
    from memdesigner.importers._torch_export import export_graph_module
    from memdesigner.importers.torch_fx import _all_on_meta

    with torch.device("meta"):
        module = TinySpeech()
    _all_on_meta(torch, module)
    torch.manual_seed(0)
    gm = export_graph_module(torch, module, None, torch.empty(2, 400, device="meta"))
    linears = [n for n in gm.graph.nodes if n.op == "call_function" and "linear" in str(n.target)]
    assert len(linears) == 2 + 2  # the attention's in/out projections and both layers

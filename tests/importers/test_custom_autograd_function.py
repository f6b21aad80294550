"""A custom ``torch.autograd.Function`` (Megatron's / BLOOM's GeLU, gradient reversal, straight-
through estimators): PyTorch runs its ``forward`` without recording, so the ops inside make no
graph and their intermediates die as they go; only what ``ctx.save_for_backward`` saved is kept,
and its own ``backward`` runs. The importer makes ``Function.apply`` one call node while fx traces
(importers/torch_fx.py ``_custom_functions_as_calls``), which the characterisation runs forward and
backward (importers/_torch_characterise.py). Traced through instead, every op inside kept its
tensors for a backward that never runs: +71 %. Measured with the truth harness (CPU, torch 2.14,
method a), batch 4."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class TanhGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * x * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        t = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
        return g * (0.5 * (1 + t))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 256)
        self.b = nn.Linear(256, 64)

    def forward(self, x):
        return self.b(TanhGelu.apply(self.a(x)))


@pytest.mark.parametrize(("mode", "measured"), [("train", 919_048), ("inference", 820_480)])
def test_custom_function_matches_the_measurement(mode, measured):
    with torch.device("meta"):
        module = Mlp()
    design = from_module(module, (32, 64))
    assert [n.props["op"] for n in design.nodes.values() if n.type == "Generic"] == ["TanhGelu_apply"]
    est = memdesigner.estimate(design, mode=mode, optimizer="sgd" if mode == "train" else "none", batch=4,
                               backend="cpu")
    assert est.peak_bytes == measured


def test_apply_is_restored_after_the_trace():
    from_module(Mlp(), (32, 64))
    x = torch.randn(2, 64, requires_grad=True)
    y = TanhGelu.apply(x)
    assert type(y.grad_fn).__name__ == "TanhGeluBackward"


class FinfoMlp(Mlp):
    """``torch.finfo(y.dtype)`` in forward (transformers' eager attention masks: BLOOM): fx's Proxy
    for the dtype failed finfo, so the import fell back to torch.export, which inlines the custom
    Function's forward into ops that each keep their tensors (train +71 %: 1,574,408 B)."""

    def forward(self, x):
        y = self.b(TanhGelu.apply(self.a(x)))
        return y.clamp(min=torch.finfo(y.dtype).min / 2)


@pytest.mark.parametrize(("mode", "measured"), [("train", 919_048), ("inference", 820_480)])
def test_finfo_of_a_traced_dtype_keeps_fx_and_the_custom_function(mode, measured):
    with torch.device("meta"):
        module = FinfoMlp()
    design = from_module(module, (32, 64))
    assert [n.props["op"] for n in design.nodes.values() if n.type == "Generic"] == ["TanhGelu_apply", "clamp"]
    est = memdesigner.estimate(design, mode=mode, optimizer="sgd" if mode == "train" else "none", batch=4,
                               backend="cpu")
    assert est.peak_bytes == measured  # measured like the Mlp above: the clamp's output replaces b's
    assert torch.finfo is torch.finfo(torch.float32).__class__  # restored after the trace

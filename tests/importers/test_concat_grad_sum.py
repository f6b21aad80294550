"""A tensor read by several Concats (DenseNet: every feature map is concatenated again by each
later layer) gets one slice of each Concat's gradient; autograd's InputBuffer sums them with
``old + new`` (add.Tensor) into a tensor of the feature's own size, not of the concatenation
the slices are views of (engine/simulate.py, backward; docs/memory-model.md §2). Measured with the
truth harness (CPU, torch 2.13)."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class TinyDenseBlock(nn.Module):
    """torchvision's _DenseBlock in small: features = [stem]; each layer reads cat(features)."""

    def __init__(self, layers=4, c0=16, growth=8):
        super().__init__()
        self.stem = nn.Conv2d(3, c0, 3, padding=1)
        self.layers = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(c0 + growth * i), nn.ReLU(), nn.Conv2d(c0 + growth * i, growth, 3, padding=1))
            for i in range(layers))

    def forward(self, x):
        features = [self.stem(x)]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return torch.cat(features, 1)


def tiny_dense():
    return TinyDenseBlock(), (3, 16, 16)


# truth harness, batch 4, fp32, CPU: peak_overall (the peak is in backward)
MEASURED = {"sgd": 1_699_144, "adam": 1_769_360}  # a Concat-sized sum per feature: +163,840 B


@pytest.mark.parametrize("opt", sorted(MEASURED))
def test_dense_block_matches_the_measurement(opt):
    with torch.device("meta"):
        module, shape = tiny_dense()
    est = memdesigner.estimate(from_module(module, shape), mode="train", optimizer=opt, batch=4, backend="cpu")
    assert est.peak_bytes == MEASURED[opt]


@pytest.mark.slow
@pytest.mark.parametrize("opt", sorted(MEASURED))
def test_measured_numbers_still_hold(opt):
    from memdesigner.measure.torch_measure import _load_truth_measure

    truth = _load_truth_measure()
    if truth is None:
        pytest.skip("shared/truth not found")
    rec = truth.measure(tiny_dense, batch=4, mode="train", optimizer=opt, dtype="fp32", methods="a")
    assert rec["method_a"]["peak_overall"] == MEASURED[opt]

"""Single-layer models measured with real PyTorch (storage tracker, method (a) of shared/truth)
must match memdesigner's estimate byte for byte (backend cpu), for inference and SGD training."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner
from memdesigner.engine.settings import Settings
from memdesigner.importers.torch_fx import from_module
from memdesigner.measure.torch_measure import measure_design


class _Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.truth_input = ("tokens", 100)

    def forward(self, x):
        return self.emb(x)


CASES = {
    "Linear": (lambda: nn.Sequential(nn.Linear(32, 16)), (32,)),
    "Conv2d": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1)), (3, 16, 16)),
    "BatchNorm2d": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)), (3, 16, 16)),
    "ReLU": (lambda: nn.Sequential(nn.Linear(32, 16), nn.ReLU()), (32,)),
    "MaxPool2d": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.MaxPool2d(2)), (3, 16, 16)),
    "Dropout": (lambda: nn.Sequential(nn.Linear(32, 16), nn.Dropout(0.5)), (32,)),
    "LayerNorm": (lambda: nn.Sequential(nn.Linear(32, 16), nn.LayerNorm(16)), (32,)),
    "Embedding": (_Tokens, (12,)),
    "GELU": (lambda: nn.Sequential(nn.Linear(32, 16), nn.GELU()), (32,)),
    "AdaptiveAvgPool2d": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1)), (3, 16, 16)),
    # video / medical volumes: (C, D, H, W)
    "Conv3d": (lambda: nn.Sequential(nn.Conv3d(2, 4, 3, padding=1)), (2, 6, 10, 10)),
    "MaxPool3d": (lambda: nn.Sequential(nn.Conv3d(2, 4, 3), nn.MaxPool3d(2)), (2, 6, 10, 10)),
    "AvgPool3d": (lambda: nn.Sequential(nn.Conv3d(2, 4, 3), nn.AvgPool3d(2, stride=1)), (2, 6, 10, 10)),
    "BatchNorm3d": (lambda: nn.Sequential(nn.Conv3d(2, 4, 3), nn.BatchNorm3d(4)), (2, 6, 10, 10)),
}

MODES = [{"mode": "inference", "optimizer": "none"}, {"mode": "train", "optimizer": "sgd"}]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m["mode"])
@pytest.mark.parametrize("layer", sorted(CASES))
def test_single_layer_matches_measurement(layer, mode):
    factory, shape = CASES[layer]
    design = from_module(factory(), shape)
    s = Settings(backend="cpu", batch=4, **mode)
    measured = measure_design(design, s)
    est = memdesigner.estimate(design, s)
    assert est.peak_bytes == measured["peak_bytes"], (layer, mode, est.peak_bytes, measured["peak_bytes"])


@pytest.mark.slow
@pytest.mark.parametrize("layer", ["Conv2d", "Dropout", "Embedding"])
def test_builtin_tracker_agrees_with_truth_harness(layer):
    from memdesigner.measure.torch_measure import truth_dir

    if truth_dir() is None:
        pytest.skip("shared/truth not found")
    factory, shape = CASES[layer]
    design = from_module(factory(), shape)
    s = Settings(backend="cpu", batch=4, mode="train", optimizer="adam")
    a = measure_design(design, s, method="truth")
    b = measure_design(design, s, method="builtin")
    assert a["peak_bytes"] == b["peak_bytes"]
    assert a["phase_peaks"] == b["phase_peaks"]
    assert b["timeline"] and max(b["timeline"]) <= b["peak_bytes"]

"""File -> Import PyTorch and Tools -> Measure with PyTorch, end to end (needs torch)."""

import pytest

from memdesigner._qt import hooks

torch = pytest.importorskip("torch")

MODEL = '''
import torch.nn as nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))

    def forward(self, x):
        return self.body(x)
'''


def test_import_pytorch_then_measure(window, qtbot, tmp_path):
    path = tmp_path / "small.py"
    path.write_text(MODEL)
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window._import(lambda: hooks.import_torch(str(path), input_shape=(3, 8, 8)), "PyTorch")
    assert {n.type for n in window.design.nodes.values()} >= {"Conv2d", "ReLU", "Flatten", "Linear"}
    estimated = window.result.report.peak_bytes
    assert window.result.report.params == 3 * 8 * 9 + 8 + 8 * 8 * 8 * 10 + 10
    window.measure()
    qtbot.waitUntil(lambda: window.measured is not None, timeout=60000)
    measured = window.measured["peak_bytes"]
    assert measured > 0
    assert abs(measured - estimated) <= 0.01 * measured  # the overlay agrees with the estimate

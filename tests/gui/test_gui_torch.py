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
    window._import(lambda: hooks.import_torch(str(path), input_shape=(3, 8, 8)), "PyTorch")
    qtbot.waitUntil(lambda: window.result is not None and window.result.report is not None
                    and window.result.report.params > 0, timeout=60000)
    assert {n.type for n in window.design.nodes.values()} >= {"Conv2d", "ReLU", "Flatten", "Linear"}
    estimated = window.result.report.peak_bytes
    assert window.result.report.params == 3 * 8 * 9 + 8 + 8 * 8 * 8 * 10 + 10
    window.measure()
    qtbot.waitUntil(lambda: window.measured is not None, timeout=60000)
    measured = window.measured["peak_bytes"]
    assert measured > 0
    assert abs(measured - estimated) <= 0.01 * measured  # the overlay agrees with the estimate


HOSTILE = """
import sys


def leave():
    sys.exit(0)


def spin():
    while True:
        pass
"""


def test_a_model_file_that_exits_or_loops_leaves_the_window_alone(window, qtbot, tmp_path, monkeypatch):
    """sys.exit in the file used to close the window without a save prompt, and an endless loop
    froze it: the file now runs in a child process, off the UI thread."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QMessageBox

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: shown.append(a[2])))
    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE)
    before = dict(window.design.nodes)
    window._import(lambda: hooks.import_torch(f"{path}:leave"), "PyTorch")
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=60000)
    assert "sys.exit(0)" in shown[0]

    ticks = []  # len(shown) at each tick of a UI-thread timer
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(len(shown)))
    timer.start(20)
    window._import(lambda: hooks.import_torch(f"{path}:spin", timeout=2), "PyTorch")
    qtbot.waitUntil(lambda: len(shown) == 2, timeout=60000)
    timer.stop()
    assert "did not finish within 2 s" in shown[1]
    assert 1 in ticks  # the UI thread ran while the endless loop did
    assert window.design.nodes == before

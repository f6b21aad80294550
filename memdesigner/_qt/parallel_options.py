"""The settings bar's model-parallel field: tensor-parallel size (Settings.tensor_parallel)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QWidget


class ParallelOptions(QWidget):
    """``TP`` spin box; 1 = no tensor parallelism. Other parallel settings ride in the bar's extra keys."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        self.tp = QSpinBox()
        self.tp.setRange(1, 64)
        self.tp.setKeyboardTracking(False)
        self.tp.setToolTip("Tensor-parallel size: q/k/v, gate/up Linears split by columns, o/down by rows, "
                           "heads split (world = GPUs x TP)")
        lay.addWidget(QLabel("TP"))
        lay.addWidget(self.tp)
        self.tp.valueChanged.connect(lambda *_: self.changed.emit())

    def values(self) -> dict:
        return {"tensor_parallel": self.tp.value()} if self.tp.value() > 1 else {}

    def apply(self, d: dict) -> None:
        v = d.get("tensor_parallel", 1)
        self.tp.blockSignals(True)
        self.tp.setValue(v if isinstance(v, int) and 1 <= v <= 64 else 1)
        self.tp.blockSignals(False)

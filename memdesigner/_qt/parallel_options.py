"""The settings bar's model-parallel field: a "TP" button whose popup holds the tensor-parallel size,
sequence parallel, pipeline stages and micro-batches (Settings.tensor_parallel ... micro_batches)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QMenu, QSpinBox, QToolButton, QVBoxLayout, QWidget, QWidgetAction

DEFAULTS = {"tensor_parallel": 1, "sequence_parallel": False, "pipeline_parallel": 1, "micro_batches": 1}


def _spin(prefix: str, tip: str, top: int) -> QSpinBox:
    s = QSpinBox()
    s.setRange(1, top)
    s.setKeyboardTracking(False)
    s.setPrefix(prefix)
    s.setToolTip(tip)
    return s


class ParallelOptions(QWidget):
    """One narrow button (the bar must fit a laptop screen); its label is bold when any is set."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.tp = _spin("tensor parallel ", "Tensor-parallel size: q/k/v, gate/up Linears split by columns, o/down "
                        "by rows, heads split (world = pipeline stages x GPUs x TP)", 64)
        self.sp = QCheckBox("sequence parallel")
        self.sp.setToolTip("SequenceParallel on the norms: residuals hold 1/TP of the tokens (needs TP 2+)")
        self.pp = _spin("pipeline stages ", "Pipeline parallel, 1F1B: stages of about equal parameter counts", 64)
        self.mb = _spin("micro-batches ", "Micro-batches per step under pipeline parallel (at least one per stage)",
                        1024)
        self.button = QToolButton()
        self.button.setText("TP")
        self.button.setFixedWidth(27)  # with the FT button, the bar just fits a 1200 px window
        self.button.setPopupMode(QToolButton.InstantPopup)
        self.button.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
        menu = QMenu(self.button)
        panel = QWidget()
        col = QVBoxLayout(panel)
        col.setContentsMargins(8, 6, 8, 6)
        for w in (self.tp, self.sp, self.pp, self.mb):
            col.addWidget(w)
        act = QWidgetAction(menu)
        act.setDefaultWidget(panel)
        menu.addAction(act)
        self.button.setMenu(menu)
        lay.addWidget(self.button)
        for s in (self.tp, self.pp, self.mb):
            s.valueChanged.connect(self._changed)
        self.sp.toggled.connect(self._changed)
        self._sync()

    def _sync(self) -> None:
        self.sp.setEnabled(self.tp.value() > 1)
        self.mb.setEnabled(self.pp.value() > 1)
        v = self.values()
        f = self.button.font()
        f.setBold(bool(v))
        self.button.setFont(f)
        self.button.setToolTip("Model parallel: " + (", ".join(f"{k} {x}" for k, x in v.items()) if v else
                                                     "none (tensor, sequence and pipeline parallel)"))

    def _changed(self, *_):
        self._sync()
        self.changed.emit()

    def values(self) -> dict:
        """The settings that differ from a single process (sequence parallel only with TP 2+)."""
        v = {"tensor_parallel": self.tp.value(), "sequence_parallel": self.sp.isChecked() and self.tp.value() > 1,
             "pipeline_parallel": self.pp.value(), "micro_batches": self.mb.value() if self.pp.value() > 1 else 1}
        return {k: x for k, x in v.items() if x != DEFAULTS[k]}

    def apply(self, d: dict) -> None:
        widgets = (self.tp, self.sp, self.pp, self.mb)
        for w in widgets:
            w.blockSignals(True)
        try:
            for key, spin in (("tensor_parallel", self.tp), ("pipeline_parallel", self.pp), ("micro_batches", self.mb)):
                v = d.get(key, 1)
                spin.setValue(v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else 1)
            self.sp.setChecked(bool(d.get("sequence_parallel", False)))
        finally:
            for w in widgets:
                w.blockSignals(False)
        self._sync()

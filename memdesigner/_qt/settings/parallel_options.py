"""The settings bar's parallelism field: one button naming the GPUs and strategy ("1 GPU",
"3× zero3 · TP 2"), whose panel holds the data-parallel world size, the strategy (DDP,
ZeroRedundancyOptimizer, FSDP2), FSDP2's CPU offload, the tensor-parallel size, sequence parallel,
pipeline stages and micro-batches (Settings.gpus ... micro_batches). Each is saved with the design."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QSpinBox, QWidget

from memdesigner._qt.settings.popup_button import PopupButton
from memdesigner.engine.distributed import STRATEGIES

DEFAULTS = {"gpus": 1, "strategy": "none", "offload": "none", "tensor_parallel": 1, "sequence_parallel": False,
            "pipeline_parallel": 1, "micro_batches": 1}
STRATEGY_LABELS = {"none": "single process", "ddp": "DDP", "zero1": "zero1 (DDP + ZeRO optimizer)",
                   "zero2": "zero2 (FSDP2, no reshard)", "zero3": "zero3 (FSDP2 fully_shard)"}


def _spin(prefix: str, tip: str, top: int) -> QSpinBox:
    s = QSpinBox()
    s.setRange(1, top)
    s.setKeyboardTracking(False)
    s.setPrefix(prefix)
    s.setToolTip(tip)
    return s


def button_text(v: dict) -> str:
    """What the bar shows: the GPUs and strategy, then any model parallelism."""
    gpus, strategy = v.get("gpus", 1), v.get("strategy", "none")
    head = f"{gpus} GPU{'s' if gpus > 1 else ''}" if strategy == "none" else f"{gpus}× {strategy}"
    parts = [head + (" +offload" if v.get("offload", "none") != "none" else "")]
    if v.get("tensor_parallel", 1) > 1:
        parts.append(f"TP {v['tensor_parallel']}")
    if v.get("pipeline_parallel", 1) > 1:
        parts.append(f"PP {v['pipeline_parallel']}")
    return " · ".join(parts)


class ParallelOptions(QWidget):
    """One narrow button (the bar must fit a laptop screen); bold when anything is set."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.gpus = _spin("GPUs ", "Data-parallel world size (the batch is per GPU)", 4096)
        self.strategy = QComboBox()
        for k in STRATEGIES:
            self.strategy.addItem(STRATEGY_LABELS[k], k)
        self.strategy.setToolTip("How the data-parallel ranks share the training state (inference: each rank "
                                 "runs the whole model)")
        self.offload = QCheckBox("CPU offload (FSDP2 CPUOffloadPolicy)")
        self.offload.setToolTip("zero2 / zero3: parameter shards, gradients and the optimizer step on the host")
        self.tp = _spin("tensor parallel ", "Tensor-parallel size: q/k/v, gate/up Linears split by columns, o/down "
                        "by rows, heads split (world = pipeline stages x GPUs x TP)", 64)
        self.sp = QCheckBox("sequence parallel")
        self.sp.setToolTip("SequenceParallel on the norms: residuals hold 1/TP of the tokens (needs TP 2+)")
        self.pp = _spin("pipeline stages ", "Pipeline parallel, 1F1B: stages of about equal parameter counts", 64)
        self.mb = _spin("micro-batches ", "Micro-batches per step under pipeline parallel (at least one per stage)",
                        1024)
        self.generate = False  # generate mode: no tensor or pipeline parallel (the engine does not model it)
        self.button = PopupButton("1 GPU", (self.gpus, self.strategy, self.offload, self.tp, self.sp, self.pp, self.mb))
        lay.addWidget(self.button)
        for s in (self.gpus, self.tp, self.pp, self.mb):
            s.valueChanged.connect(self._changed)
        self.strategy.currentIndexChanged.connect(self._changed)
        self.offload.toggled.connect(self._changed)
        self.sp.toggled.connect(self._changed)
        self._sync()

    def _sync(self) -> None:
        if self.gpus.value() > 1 and self.strategy.currentData() == "none":  # more GPUs need a strategy: DDP
            self.strategy.blockSignals(True)
            self.strategy.setCurrentIndex(self.strategy.findData("ddp"))
            self.strategy.blockSignals(False)
        fsdp = self.strategy.currentData() in ("zero2", "zero3")
        self.offload.setEnabled(fsdp)
        for w in (self.tp, self.pp):
            w.setEnabled(not self.generate)
        self.sp.setEnabled(self.tp.value() > 1 and not self.generate)
        self.mb.setEnabled(self.pp.value() > 1 and not self.generate)
        v = self.values()
        self.button.setText(button_text(v))
        f = self.button.font()
        f.setBold(bool(v))
        self.button.setFont(f)
        self.button.setToolTip("GPUs and parallelism: " + (", ".join(f"{k} {x}" for k, x in v.items()) if v else
                                                           "one GPU, no data, tensor or pipeline parallelism"))

    def _changed(self, *_):
        self._sync()
        self.changed.emit()

    def set_generate(self, on: bool) -> None:
        """Generate mode: tensor and pipeline parallel are left out of the settings (the engine
        refuses them there, as `estimate --mode generate --tensor-parallel 2` does; the window
        used to drop them silently and show a one-GPU-model estimate); their fields keep their
        values for the other modes."""
        if on != self.generate:
            self.generate = on
            self._sync()

    def values(self) -> dict:
        """The settings that differ from a single process (each only where it is valid: offload with
        zero2 / zero3, sequence parallel with TP 2+, micro-batches with pipeline stages)."""
        strategy = self.strategy.currentData()
        v = {"gpus": self.gpus.value(), "strategy": strategy,
             "offload": "params" if self.offload.isChecked() and strategy in ("zero2", "zero3") else "none",
             "tensor_parallel": self.tp.value(), "sequence_parallel": self.sp.isChecked() and self.tp.value() > 1,
             "pipeline_parallel": self.pp.value(), "micro_batches": self.mb.value() if self.pp.value() > 1 else 1}
        if self.generate:
            v.update(tensor_parallel=1, sequence_parallel=False, pipeline_parallel=1, micro_batches=1)
        return {k: x for k, x in v.items() if x != DEFAULTS[k]}

    def apply(self, d: dict) -> None:
        widgets = (self.gpus, self.strategy, self.offload, self.tp, self.sp, self.pp, self.mb)
        for w in widgets:
            w.blockSignals(True)
        try:
            for key, spin in (("gpus", self.gpus), ("tensor_parallel", self.tp), ("pipeline_parallel", self.pp),
                              ("micro_batches", self.mb)):
                v = d.get(key, 1)
                spin.setValue(v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else 1)
            i = self.strategy.findData(d.get("strategy", "none"))
            self.strategy.setCurrentIndex(max(i, 0))
            self.offload.setChecked(d.get("offload", "none") == "params")
            self.sp.setChecked(bool(d.get("sequence_parallel", False)))
        finally:
            for w in widgets:
                w.blockSignals(False)
        self._sync()

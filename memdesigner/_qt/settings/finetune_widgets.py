"""Fine-tuning in the window: the Training choice of the settings bar (full / frozen parts /
LoRA / QLoRA with their options) and the inspector's "trainable" checkbox (undoable)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QUndoCommand
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QWidget,
)

from memdesigner._qt.settings.number_fields import RefusingDoubleSpinBox, RefusingSpinBox
from memdesigner._qt.settings.popup_button import PopupButton
from memdesigner.model.design import Design

KINDS = (("full", "full FT"), ("frozen", "frozen"), ("lora", "LoRA"), ("qlora", "QLoRA"))


class SetTrainableCmd(QUndoCommand):
    def __init__(self, design: Design, node_id: str, trainable: bool):
        super().__init__("Freeze layer" if not trainable else "Unfreeze layer")
        self.design, self.node_id, self.new = design, node_id, bool(trainable)
        self.old = design.nodes[node_id].trainable

    def redo(self):
        self.design.set_trainable(self.node_id, self.new)

    def undo(self):
        self.design.set_trainable(self.node_id, self.old)


def trainable_checkbox(design: Design, stack, node_id: str) -> QCheckBox:
    """The inspector's row: unchecked = requires_grad=False (no gradient, no optimizer state)."""
    box = QCheckBox("trains (unchecked: frozen)")
    box.setToolTip("Frozen parameters get no gradient and no optimizer state; backward stops where nothing "
                   "upstream needs it")
    box.setChecked(design.nodes[node_id].trainable)

    def toggled(on: bool):
        if node_id in design.nodes and design.nodes[node_id].trainable != on:
            stack.push(SetTrainableCmd(design, node_id, on))

    box.toggled.connect(toggled)
    return box


def _joined(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v or "")


def _names(text: str) -> tuple:
    return tuple(x.strip() for x in text.split(",") if x.strip())


class FinetuneControls(QWidget):
    """Training: full | frozen parts (freeze prefixes) | LoRA (r, alpha, dropout, targets) |
    QLoRA (LoRA + base bits); gradient accumulation for all of them."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        self.kind = QComboBox()
        for k, label in KINDS:
            self.kind.addItem(label, k)
        self.kind.setToolTip("Training: full fine-tune (every layer trains); frozen parts: layers unchecked in the inspector or "
                             "matched by the prefixes; LoRA / QLoRA: peft adapters on a frozen (quantised) base")
        self.freeze = QLineEdit()
        self.freeze.setPlaceholderText("freeze prefixes: model.layers.0,...")
        self.rank = RefusingSpinBox(1, 4096)
        self.rank.setValue(8)
        self.rank.setPrefix("r ")
        self.alpha = RefusingDoubleSpinBox(0.01, 1e6)
        self.alpha.setValue(16)
        self.alpha.setPrefix("alpha ")
        self.dropout = RefusingDoubleSpinBox(0.0, 0.99)
        self.dropout.setSingleStep(0.05)
        self.dropout.setPrefix("dropout ")
        self.targets = QLineEdit()
        self.targets.setPlaceholderText("targets: all-linear (or q_proj,v_proj)")
        self.bits = QComboBox()
        for b in (4, 8):
            self.bits.addItem(f"{b}-bit base", b)
        self.accum = RefusingSpinBox(1, 1 << 16)
        self.accum.setPrefix("accum ")
        self.accum.setToolTip("Gradient accumulation: micro-batches per optimizer step")
        self.layer_ckpt = QCheckBox("Layer ckpt")
        self.layer_ckpt.setToolTip("Checkpoint every repeated layer (<prefix>.<k>), as transformers' "
                                   "gradient_checkpointing_enable() does")
        self.master = QCheckBox("fp32 masters")
        self.master.setToolTip("With dtype bf16/fp16: an fp32 master copy of the weights and fp32 optimizer state")
        # the bar shows the choice; its options open from a button (the bar must fit a laptop screen)
        self.more = PopupButton("FT", (self.kind, self.freeze, self.rank, self.alpha, self.dropout, self.targets,
                                       self.bits, self.accum, self.layer_ckpt, self.master))
        self.more.setToolTip("Fine-tuning: full / frozen parts / LoRA / QLoRA and their options")
        lay.addWidget(self.more)
        self.layer_ckpt.toggled.connect(self._changed)
        self.master.toggled.connect(self._changed)
        self.kind.currentIndexChanged.connect(self._changed)
        for w in (self.rank, self.alpha, self.dropout, self.accum):
            w.valueChanged.connect(self._changed)
        self.bits.currentIndexChanged.connect(self._changed)
        self.freeze.editingFinished.connect(self._changed)
        self.targets.editingFinished.connect(self._changed)
        self._sync()

    def _sync(self):
        k = self.kind.currentData()
        self.more.setText({"full": "FT", "frozen": "FT*", "lora": "LoRA", "qlora": "QLoRA"}[k])
        lora = k in ("lora", "qlora")
        self.freeze.setVisible(k == "frozen")
        for w in (self.rank, self.alpha, self.dropout, self.targets):
            w.setVisible(lora)
        self.bits.setVisible(k == "qlora")

    def _changed(self, *_):
        self._sync()
        self.changed.emit()

    def values(self) -> dict:
        """Settings keywords (engine/settings.py) for the current choice."""
        k = self.kind.currentData()
        d: dict = {}
        if k == "frozen" and _names(self.freeze.text()):
            d["freeze"] = _names(self.freeze.text())
        if k in ("lora", "qlora"):
            d.update(lora_r=self.rank.value(), lora_alpha=self.alpha.value(), lora_dropout=self.dropout.value(),
                     lora_targets=_names(self.targets.text()))
        if k == "qlora":
            d["base_bits"] = self.bits.currentData()
        if self.accum.value() > 1:
            d["grad_accum"] = self.accum.value()
        if self.layer_ckpt.isChecked():
            d["checkpoint_layers"] = True
        if self.master.isChecked():
            d["master_weights"] = True
        return d

    def to_dict(self) -> dict:
        """What the design file keeps (lists for JSON), with the Training choice itself."""
        d = {k: list(v) if isinstance(v, tuple) else v for k, v in self.values().items()}
        if self.kind.currentData() != "full":
            d["training"] = self.kind.currentData()
        return d

    def apply_dict(self, d: dict) -> None:
        widgets = (self.kind, self.freeze, self.rank, self.alpha, self.dropout, self.targets, self.bits, self.accum,
                   self.layer_ckpt, self.master)
        for w in widgets:
            w.blockSignals(True)
        try:
            kind = d.get("training") or ("qlora" if d.get("base_bits") else "lora" if d.get("lora_r")
                                         else "frozen" if d.get("freeze") else "full")
            i = self.kind.findData(kind)
            self.kind.setCurrentIndex(max(i, 0))
            self.freeze.setText(_joined(d.get("freeze", ())))
            self.targets.setText(_joined(d.get("lora_targets", ())))
            if isinstance(d.get("lora_r"), int) and d["lora_r"] >= 1:
                self.rank.setValue(d["lora_r"])
            if isinstance(d.get("lora_alpha"), (int, float)):
                self.alpha.setValue(float(d["lora_alpha"]))
            if isinstance(d.get("lora_dropout"), (int, float)):
                self.dropout.setValue(float(d["lora_dropout"]))
            i = self.bits.findData(d.get("base_bits"))
            if i >= 0:
                self.bits.setCurrentIndex(i)
            if isinstance(d.get("grad_accum"), int) and d["grad_accum"] >= 1:
                self.accum.setValue(d["grad_accum"])
            self.layer_ckpt.setChecked(bool(d.get("checkpoint_layers")))
            self.master.setChecked(bool(d.get("master_weights")))
        finally:
            for w in widgets:
                w.blockSignals(False)
        self._sync()

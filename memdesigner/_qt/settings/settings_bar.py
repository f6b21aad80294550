"""Run settings (mode, batch, optimizer, dtype, AMP, checkpointing) and the device drop-down: a
view of the document's RunSettings model (memdesigner/document/run_settings.py), which holds the truth."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QCompleter, QHBoxLayout, QLabel, QWidget

from memdesigner._qt.document import undo_bursts
from memdesigner._qt.settings.finetune_widgets import FinetuneControls
from memdesigner._qt.settings.generate_options import GenerateOptions
from memdesigner._qt.settings.number_fields import RefusingSpinBox
from memdesigner._qt.settings.parallel_options import ParallelOptions
from memdesigner.document.run_settings import (
    CORE,
    EXTRA_KEYS,
    FINETUNE_KEYS,
    GENERATE_KEYS,
    PARALLEL_KEYS,
    RunSettings,
    normalize,
)
from memdesigner.engine import devices as devmod
from memdesigner.engine.settings import DTYPES, MAX_SEQ_LEN, MODES, OPTIMIZERS, Settings
from memdesigner.units import format_gib

# the keys the bar's widgets write; the rest of the model's dict is carried through unchanged
OWNED = (*CORE, "device", *GENERATE_KEYS, *FINETUNE_KEYS, *PARALLEL_KEYS, "training", "seq_len")
RENDER_DEFAULTS = {**CORE, "new_tokens": Settings().new_tokens, "kv_cache": "dynamic", "kv_dtype": "auto"}

OPT_LABELS = {"none": "none", "sgd": "SGD", "momentum": "SGD + momentum", "adam": "Adam", "adamw": "AdamW",
              "adamw8bit": "AdamW 8-bit", "paged_adamw8bit": "Paged 8-bit", "adafactor": "Adafactor"}  # bnb, torch


COMMON_DEVICE = "rtx4090"  # a new user's first device: a common 24 GB card


def default_device_id(devices: dict, last) -> str | None:
    """The device a new window starts on: the one used last, else a common 24 GB card."""
    if isinstance(last, str) and last in devices:
        return last
    return COMMON_DEVICE if COMMON_DEVICE in devices else None


def load_devices() -> list:
    """Shipped and user profiles; bad user entries are skipped (device_warning says which)."""
    return devmod.all_devices()


class SettingsBar(QWidget):
    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.model: RunSettings | None = None
        self._edit = None
        self._rendering = False
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 2, 6, 2)
        lay.setSpacing(6)
        self.mode = QComboBox()
        for m in MODES:
            self.mode.addItem({"train": "Training", "generate": "Generate"}.get(m, "Inference"), m)
        self.batch = RefusingSpinBox(1, 1 << 20)  # -5 is refused out loud, not made 5
        self.batch.setKeyboardTracking(False)
        self.batch.setAccelerated(True)
        # token models: the sequence length, a run setting (seq_len); shown once an estimate says the
        # design has tokens, with the length it estimated (Report.sequence_length)
        self.seq = RefusingSpinBox(1, MAX_SEQ_LEN)
        self.seq.setKeyboardTracking(False)
        self.seq.setAccelerated(True)
        self.seq.setSuffix(" tok")  # its own label, and narrow: the bar must fit 1366 px in generate mode too
        self.seq.setMaximumWidth(self.seq.fontMetrics().horizontalAdvance("262144 tok") + 28)  # six digits shown
        self.seq.setToolTip("Sequence length in tokens (a run setting: the design is not edited)")
        self._shown_length: int | None = None  # the last estimate's length (None: no token input)
        self.optimizer = QComboBox()
        for o in OPTIMIZERS:
            self.optimizer.addItem(OPT_LABELS.get(o, o), o)
        self.dtype = QComboBox()
        for d in DTYPES:
            self.dtype.addItem(d, d)
        self.amp = QCheckBox("AMP")
        self.amp.setToolTip("Automatic mixed precision: fp32 weights, fp16/bf16 compute (needs dtype fp32)")
        self.ckpt = QCheckBox("Checkpointing")
        self.ckpt.setToolTip("Activation checkpointing: recompute activations in backward (sqrt(n) segments)")
        self.device = QComboBox()
        self.device.setMinimumContentsLength(22)  # the bar fits a 1200 px window (a 1366 px laptop with room)
        self.device.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self._searchable_devices()
        self.device_warning = QLabel(self)  # the window moves it into its status bar
        self.device_warning.setStyleSheet("color: #c0392b;")
        self.reload_devices()
        self._labels = {}
        for label, w in (("Mode", self.mode), ("Batch", self.batch), ("", self.seq), ("Optimizer", self.optimizer),
                         ("dtype", self.dtype)):
            if label:
                self._labels[label] = QLabel(label)
                lay.addWidget(self._labels[label])
            lay.addWidget(w)
        self.seq.setVisible(False)
        lay.addWidget(self.amp)
        lay.addWidget(self.ckpt)
        self.generate = GenerateOptions(self)
        lay.addWidget(self.generate)
        self.finetune = FinetuneControls()
        lay.addWidget(self.finetune)
        self.parallel = ParallelOptions()  # in place of a 4 px gap: the bar must fit a 1200 px window
        lay.addWidget(self.parallel)
        self.parallel.changed.connect(self._changed)
        lay.addWidget(QLabel("Device"))
        lay.addWidget(self.device)
        lay.addStretch(1)
        self.mode.currentIndexChanged.connect(self._changed)
        self.batch.valueChanged.connect(self._changed)
        self.seq.valueChanged.connect(self._changed)
        self.optimizer.currentIndexChanged.connect(self._changed)
        self.dtype.currentIndexChanged.connect(self._changed)
        self.amp.toggled.connect(self._changed)
        self.ckpt.toggled.connect(self._changed)
        self.finetune.changed.connect(self._changed)
        self.device.currentIndexChanged.connect(self._changed)
        self.generate.changed.connect(self._changed)
        self._sync_enabled()
        self.bind(RunSettings())

    def reload_devices(self):
        current = self.device_id()
        self.devices = {d.id: d for d in load_devices()}
        self.device.blockSignals(True)
        self.device.clear()
        self.device.addItem("No device", None)
        for d in self.devices.values():
            label = f"{d.name} — {format_gib(d.memory_bytes)}" + ("  (custom)" if d.user else "")
            self.device.addItem(label, d.id)
        i = self.device.findData(current)
        self.device.setCurrentIndex(max(i, 0))
        self.device.blockSignals(False)
        self._device_name_from_start()
        self._show_device_problems(devmod.device_file_problems())

    def _searchable_devices(self) -> None:
        """The picker takes typed text ("5090", "mi300"): its completer lists the devices whose name
        contains it, and Enter picks the one (31 profiles were a long scroll)."""
        self.device.setEditable(True)
        self.device.setInsertPolicy(QComboBox.NoInsert)
        self.device.lineEdit().setPlaceholderText("type to search devices")
        comp = self.device.completer()
        comp.setFilterMode(Qt.MatchContains)
        comp.setCaseSensitivity(Qt.CaseInsensitive)
        comp.setCompletionMode(QCompleter.PopupCompletion)
        self._typed = ""  # (what was typed: on Enter the combo puts its current item's text back first)
        self.device.lineEdit().textEdited.connect(lambda t: setattr(self, "_typed", t))
        self.device.lineEdit().editingFinished.connect(self._device_typed)
        self.device.currentIndexChanged.connect(self._device_name_from_start)

    def _device_name_from_start(self, *_) -> None:
        """Show a long device name from its start ("NVIDIA GeForce RTX 4090 ..."), not its end."""
        self.device.lineEdit().setCursorPosition(0)

    def _device_typed(self) -> None:
        """Enter or leaving the field: the device the text names, or that alone contains it; else
        the text goes back to the device shown (a typo never leaves a name with no device)."""
        text, self._typed = self._typed.strip().lower(), ""
        i = self.device.currentIndex()
        if text and text != self.device.itemText(i).lower():
            hits = [k for k in range(self.device.count()) if text in self.device.itemText(k).lower()]
            exact = [k for k in hits if self.device.itemText(k).lower() == text]
            if exact or len(hits) == 1:
                i = (exact or hits)[0]
        if i != self.device.currentIndex():
            self.device.setCurrentIndex(i)
        self.device.lineEdit().setText(self.device.itemText(self.device.currentIndex()))
        self._device_name_from_start()

    def _show_device_problems(self, problems: list[str]) -> None:
        """A short note in the status bar; every problem line in its tooltip."""
        if problems:
            n = len(problems)
            name = devmod.user_devices_path().name
            self.device_warning.setText(f"\u26a0 {name}: {n} problem{'s' if n != 1 else ''}, bad entries skipped "
                                        "(hover for details)")
            self.device_warning.setToolTip("\n".join(problems))
        self.device_warning.setVisible(bool(problems))

    def _sync_enabled(self):
        training = self.mode.currentData() == "train"
        self.optimizer.setEnabled(training)
        self.ckpt.setEnabled(training)
        self.finetune.setEnabled(training)
        fp32 = self.dtype.currentData() == "fp32"
        if not fp32 and self.amp.isChecked():
            self.amp.blockSignals(True)
            self.amp.setChecked(False)
            self.amp.blockSignals(False)
        self.amp.setEnabled(fp32)
        generate = self.mode.currentData() == "generate"
        self.generate.setVisible(generate)
        self.parallel.set_generate(generate)
        for w in (self._labels["Optimizer"], self.optimizer, self.ckpt):  # training's: room for generate's own
            w.setVisible(not generate)

    def _changed(self, *_):
        """A widget changed: the user edits the document's settings (one undo step when bound)."""
        self._sync_enabled()
        if self._rendering:
            return
        old = self.model.to_dict()
        new = {k: v for k, v in old.items() if k not in OWNED}
        new.update(self._read())
        if normalize(new) == old:
            return
        if self._edit is not None:
            self._edit(old, new, undo_bursts.current())  # a burst of Batch clicks: one undo step
        else:
            self.model.set_all(new)

    # -- the model ------------------------------------------------------------------------
    def bind(self, model: RunSettings, edit=None) -> None:
        """View ``model``; ``edit(old, new, burst)`` applies a user change (the document pushes an
        undo command, merged within a burst: _qt/document/undo_bursts.py); without it the bar sets the
        model directly."""
        if self.model is not None:
            self.model.unsubscribe(self._model_changed)
        self.model, self._edit = model, edit
        model.subscribe(self._model_changed)
        self._render(model.to_dict())

    def _model_changed(self, d: dict) -> None:
        self._render(d)
        self.changed.emit()

    def _render(self, d: dict) -> None:
        """Show ``d`` in full (keys it lacks show their defaults), then let the model take the
        bar's spelling of the same settings (e.g. the Training choice a LoRA rank implies)."""
        self._rendering = True
        try:
            self._put({**RENDER_DEFAULTS, **d})
            if "device" not in d:
                self.device.blockSignals(True)
                self.device.setCurrentIndex(0)
                self.device.blockSignals(False)
        finally:
            self._rendering = False
        canon = {k: v for k, v in d.items() if k not in OWNED}
        canon.update(self._read())
        self.model.adopt(canon)

    def _read(self) -> dict:
        """The settings the widgets show, in the design file's spelling."""
        mode, dtype = self.mode.currentData(), self.dtype.currentData()
        d = {"mode": mode, "batch": self.batch.value(), "optimizer": self.optimizer.currentData(), "dtype": dtype,
             "amp": self.amp.isChecked() and dtype == "fp32", "checkpointing": self.ckpt.isChecked()}
        if self.device_id():
            d["device"] = self.device_id()
        set_before = self.model.get("seq_len") if self.model is not None else None
        if self._shown_length is not None and (set_before or self.seq.value() != self._shown_length):
            d["seq_len"] = self.seq.value()
        elif self._shown_length is None and set_before:
            d["seq_len"] = set_before  # not known yet to be a token model: kept
        if mode == "generate":
            d.update(self.generate.values())
        d.update(self.parallel.values())
        d.update(self.finetune.to_dict())
        return d

    def show_sequence(self, length: int | None) -> None:
        """The sequence length the last estimate used (Report.sequence_length: the seq_len setting
        or the design's own); None: the design has no token input, and the field hides."""
        self._shown_length = length
        self.seq.setVisible(length is not None)
        if length is not None and 1 <= length <= self.seq.maximum():
            self.seq.blockSignals(True)
            self.seq.setValue(length)
            self.seq.blockSignals(False)

    # -- values ---------------------------------------------------------------------------
    def settings(self) -> Settings:
        return self.model.settings()

    def device_id(self) -> str | None:
        return self.device.currentData() if self.device.count() else None

    def current_device(self):
        return self.devices.get(self.device_id()) if self.device_id() else None

    def set_device(self, device_id: str | None) -> bool:
        i = self.device.findData(device_id)
        if i < 0:
            return False
        self.device.setCurrentIndex(i)
        return True

    def to_dict(self) -> dict:
        return self.model.to_dict()

    def apply_dict(self, d: dict) -> None:
        """Set the settings ``d`` names, as if the user chose them (one undo step when bound);
        unknown values are skipped, never fatal; settings ``d`` does not name stay."""
        self._rendering = True
        try:
            self._put(d)
        finally:
            self._rendering = False
        old = self.model.to_dict()
        new = {k: v for k, v in old.items() if k not in OWNED}
        new.update({k: d[k] for k in EXTRA_KEYS if k in d})
        new.update(self._read())
        if normalize(new) != old:
            if self._edit is not None:
                self._edit(old, new)
            else:
                self.model.set_all(new)

    def _put(self, d: dict) -> None:
        """Show the keys ``d`` has on the widgets (signals blocked)."""
        widgets = (self.mode, self.batch, self.seq, self.optimizer, self.dtype, self.amp, self.ckpt, self.device)
        for w in widgets:
            w.blockSignals(True)
        try:
            for key, combo in (("mode", self.mode), ("optimizer", self.optimizer), ("dtype", self.dtype),
                               ("device", self.device)):
                if key in d:
                    i = combo.findData(d[key])
                    if i >= 0:
                        combo.setCurrentIndex(i)
            if isinstance(d.get("batch"), int) and 1 <= d["batch"] <= self.batch.maximum():  # 2**63: skipped
                self.batch.setValue(d["batch"])
            seq = d.get("seq_len")
            if isinstance(seq, int) and 1 <= seq <= self.seq.maximum():
                self.seq.setValue(seq)
            if "amp" in d:
                self.amp.setChecked(bool(d["amp"]))
            if "checkpointing" in d:
                self.ckpt.setChecked(bool(d["checkpointing"]))
        finally:
            for w in widgets:
                w.blockSignals(False)
        self.generate.apply(d)
        self.parallel.apply(d)
        self.finetune.apply_dict(d)
        self._sync_enabled()
        self._device_name_from_start()

"""The settings bar's generate-mode options: new tokens, KV cache kind and dtype, in a panel under
one button that names them ("+16 tok"): inline, they made the bar 1,682 px wide in
generate mode, so the device picker and the inspector were off a 1366 px screen."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from memdesigner._qt.settings.number_fields import RefusingSpinBox
from memdesigner._qt.settings.popup_button import PopupButton
from memdesigner.engine.settings import KV_CACHES, KV_DTYPES, Settings

KEYS = ("new_tokens", "kv_cache", "kv_dtype")


class GenerateOptions(QWidget):
    """Shown while the mode is generate; its values ride along in the design's settings."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        self.new_tokens = RefusingSpinBox(1, 1 << 20)
        self.new_tokens.setValue(Settings().new_tokens)
        self.new_tokens.setKeyboardTracking(False)
        self.new_tokens.setToolTip("tokens generated after the prompt (the design's sequence length)")
        self.kv_cache = QComboBox()
        for k in KV_CACHES:
            self.kv_cache.addItem(k, k)
        self.kv_cache.setToolTip("dynamic: grows by torch.cat each step; static: preallocated for the whole generation")
        self.kv_dtype = QComboBox()
        for k in KV_DTYPES:
            self.kv_dtype.addItem("model dtype" if k == "auto" else k, k)
        rows = []
        for label, w in (("New tokens", self.new_tokens), ("KV cache", self.kv_cache), ("KV dtype", self.kv_dtype)):
            row = QWidget()
            h = QHBoxLayout(row)
            h.setContentsMargins(0, 0, 0, 0)
            h.addWidget(QLabel(label))
            h.addStretch(1)
            h.addWidget(w)
            rows.append(row)
        self.button = PopupButton("", rows)
        self.button.setToolTip("Generate: tokens after the prompt, the KV cache's kind and dtype")
        lay.addWidget(self.button)
        self.new_tokens.valueChanged.connect(self._changed)
        self.kv_cache.currentIndexChanged.connect(self._changed)
        self.kv_dtype.currentIndexChanged.connect(self._changed)
        self._sync()

    def _sync(self) -> None:
        v = self.values()
        self.button.setText(f"+{v['new_tokens']} tok" + (" static" if v["kv_cache"] == "static" else ""))

    def _changed(self, *_) -> None:
        self._sync()
        self.changed.emit()

    def values(self) -> dict:
        return {"new_tokens": self.new_tokens.value(), "kv_cache": self.kv_cache.currentData(),
                "kv_dtype": self.kv_dtype.currentData()}

    def apply(self, d: dict) -> None:
        """From a design file; bad values are skipped."""
        widgets = (self.new_tokens, self.kv_cache, self.kv_dtype)
        for w in widgets:
            w.blockSignals(True)
        try:
            n = d.get("new_tokens")
            if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
                self.new_tokens.setValue(n)
            for key, combo in (("kv_cache", self.kv_cache), ("kv_dtype", self.kv_dtype)):
                i = combo.findData(d.get(key))
                if i >= 0:
                    combo.setCurrentIndex(i)
        finally:
            for w in widgets:
                w.blockSignals(False)
        self._sync()

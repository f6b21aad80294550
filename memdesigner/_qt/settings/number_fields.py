"""Number fields of the settings bar that refuse out-of-range input out loud, as the inspector's
do: Qt's spin boxes drop a typed '-' without a sound and put back the previous value, so "-5"
silently became 5. These let any number be typed; on Enter or leaving the field a value outside
the range is not taken, the field turns red and a note under it says why, in the registry's
wording ("Refused: -5 is below the minimum 1")."""

from __future__ import annotations

import re

from PySide6.QtCore import QPoint, QTimer, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QDoubleSpinBox, QLabel, QSpinBox

from memdesigner._qt import theme

NOTE_MS = 6000
_NUMBER = re.compile(r"^[+-]?(\d+([.,]\d*)?|[.,]\d+)?([eE][+-]?\d*)?$")


def reason(value: float, lo: float, hi: float) -> str | None:
    """Why ``value`` is refused, or None when it is in range."""
    if value < lo:
        return f"Refused: {value:g} is below the minimum {lo:g}"
    if value > hi:
        return f"Refused: {value:g} is above the maximum {hi:g}"
    return None


class _Refusing:
    """Shared by the int and float boxes (a mixin over QSpinBox / QDoubleSpinBox)."""

    def _setup(self):
        self.note = None  # the QLabel under the field while a refusal is shown
        self.last_refusal = ""
        self._note_timer = QTimer(self)
        self._note_timer.setSingleShot(True)
        self._note_timer.setInterval(NOTE_MS)
        self._note_timer.timeout.connect(self.clear_refusal)
        self.valueChanged.connect(lambda _v: self.clear_refusal())

    def validate(self, text, pos):
        res = super().validate(text, pos)
        state = res[0] if isinstance(res, tuple) else res
        body = self.lineEdit().text() if text is None else text
        body = body.removeprefix(self.prefix()).removesuffix(self.suffix()).strip()
        if state == QValidator.Invalid and _NUMBER.match(body):
            return (QValidator.Intermediate, text, pos)  # let it be typed; fixup says why it is refused
        return res

    def fixup(self, text):
        body = text.removeprefix(self.prefix()).removesuffix(self.suffix()).strip().replace(",", ".")
        try:
            v = float(body)
        except ValueError:
            v = None
        why = reason(v, self.minimum(), self.maximum()) if v is not None else None
        if why:
            self.show_refusal(why)
        return super().fixup(text)

    def show_refusal(self, text: str) -> None:
        if not self.last_refusal:
            self._tip = self.toolTip()
        self.last_refusal = text
        win = self.window()
        if self.note is None or self.note.parent() is not win:
            self.note = QLabel(win)
            self.note.setStyleSheet(f"background: {theme.BAD_COLOR}; color: white; border-radius: 4px; "
                                    "padding: 3px 6px;")
        self.note.setText(text)
        self.note.adjustSize()
        self.note.move(self.mapTo(win, QPoint(0, self.height() + 2)))
        self.note.show()
        self.note.raise_()
        self.setStyleSheet(f"border: 1.5px solid {theme.BAD_COLOR}; border-radius: 3px;")
        self.setToolTip(text)
        self._note_timer.start()
        self.refused.emit(text)

    def clear_refusal(self) -> None:
        if not self.last_refusal:
            return
        self.last_refusal = ""
        if self.note is not None:
            self.note.hide()
        self.setStyleSheet("")
        self.setToolTip(getattr(self, "_tip", ""))


class RefusingSpinBox(_Refusing, QSpinBox):
    refused = Signal(str)

    def __init__(self, lo: int, hi: int, parent=None):
        super().__init__(parent)
        self.setRange(lo, hi)
        self._setup()


class RefusingDoubleSpinBox(_Refusing, QDoubleSpinBox):
    refused = Signal(str)

    def __init__(self, lo: float, hi: float, parent=None):
        super().__init__(parent)
        self.setRange(lo, hi)
        self._setup()

"""A settings-bar button that opens a panel of fields below itself (the bar must fit a 1366 px
screen, so the options of fine-tuning, parallelism and generation live in panels).

Not a QMenu holding the panel in a QWidgetAction: a menu measures its action once, so the rows
shown later (LoRA's rank, alpha, dropout, targets, QLoRA's bits) were squashed to 1-2 px, and
reopening did not re-measure them. The panel here is a popup frame whose layout has a fixed
size constraint: it takes its contents' size whenever a row is shown or hidden.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QFrame, QLayout, QToolButton, QVBoxLayout


class PopupButton(QToolButton):
    def __init__(self, text: str, widgets=(), parent=None):
        super().__init__(parent)
        self.setText(text)
        self.panel = QFrame(self, Qt.Popup)
        self.panel.setFrameShape(QFrame.StyledPanel)
        col = QVBoxLayout(self.panel)
        col.setContentsMargins(8, 6, 8, 6)
        col.setSizeConstraint(QLayout.SetFixedSize)
        self.rows = col
        for w in widgets:
            col.addWidget(w)
        self.clicked.connect(self.open)

    def open(self) -> None:
        """Show the panel under the button, kept on the screen."""
        self.panel.adjustSize()
        p = self.mapToGlobal(QPoint(0, self.height()))
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        if screen is not None:
            x = min(max(p.x(), screen.left()), screen.right() - self.panel.width())
            y = p.y() if p.y() + self.panel.height() <= screen.bottom() else self.mapToGlobal(QPoint(0, 0)).y() - self.panel.height()
            p = QPoint(x, max(y, screen.top()))
        self.panel.move(p)
        self.panel.show()
        self.panel.raise_()

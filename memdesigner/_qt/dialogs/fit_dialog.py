"""Tools -> Make It Fit: the engine's ranked changes (memdesigner.engine.fit) in a table; Apply
takes a suggestion's settings into the settings bar and its design edit (a shorter sequence)
onto the undo stack."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from memdesigner.engine.fit import make_it_fit
from memdesigner.reports.suggestions import price_text
from memdesigner.units import format_bytes

COLUMNS = ("Change", "Needs", "Verdict", "Price")


def _more_figures(a) -> str:
    """The advice's other answers, as `memdesigner fit` prints them (they were computed, not shown)."""
    text = f"Fewest GPUs that fit (zero3): {a.min_gpus}. " if a.min_gpus else ""
    if a.max_sequence is not None:
        text += f"Longest sequence that fits: {f'{a.max_sequence:,} tokens' if a.max_sequence else 'none'}. "
    return text


class FitDialog(QDialog):
    applied = Signal(dict, object)  # settings dict (with "device"), design change dict or None

    def __init__(self, design, settings, device, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Make it fit")
        self.resize(980, 420)
        self.advice = make_it_fit(design, settings, device=device)
        a = self.advice
        verdict = "fits as it is" if a.fits_as_given else "does not fit"
        lay = QVBoxLayout(self)
        self.head = QLabel(f"<b>{design.name}</b> needs <b>{format_bytes(a.device_peak_bytes, 2)}</b> of "
                           f"{format_bytes(a.capacity_bytes, 2)} on {device.name}: <b>{verdict}</b>. "
                           f"Largest batch with these settings: {a.max_batch or 'none'}. " + _more_figures(a) +
                           "Each row below was estimated with its own settings; select one and Apply.")
        self.head.setWordWrap(True)
        lay.addWidget(self.head)
        self.table = QTableWidget(len(a.suggestions), len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectRows)
        self.table.setSelectionMode(QTableWidget.SingleSelection)
        for i, s in enumerate(a.suggestions):
            price = price_text(s)
            cells = [s.change, format_bytes(s.device_peak_bytes, 2), "fits" if s.fits else "still too big", price]
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if j == 1:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                item.setToolTip(text)
                self.table.setItem(i, j, item)
        hh = self.table.horizontalHeader()
        for j in range(len(COLUMNS) - 1):
            hh.setSectionResizeMode(j, QHeaderView.ResizeToContents)
        hh.setStretchLastSection(True)
        lay.addWidget(self.table)
        if not a.suggestions:
            lay.addWidget(QLabel("No change found that lowers the peak."))
        self.buttons = QDialogButtonBox(QDialogButtonBox.Apply | QDialogButtonBox.Close)
        self.buttons.button(QDialogButtonBox.Apply).clicked.connect(self.apply_selected)
        self.buttons.rejected.connect(self.close)
        lay.addWidget(self.buttons)
        self.table.doubleClicked.connect(lambda _i: self.apply_selected())
        if a.suggestions:
            self.table.selectRow(0)

    def apply_selected(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return
        s = self.advice.suggestions[rows[0].row()]
        settings = dict(s.settings)
        settings["device"] = s.device
        self.applied.emit(settings, s.design_change)
        self.close()  # its header and rows were for the settings before: stale once applied

"""Tools -> Explain the Peak: every tensor alive at the peak, with its layer, what it is, its
category and the layer's rule for what it keeps — the answer to "why this number?".

The rows and their wording come from the engine (``explain_peak`` rows with ``why``, the header
from ``peak_rules.run_header``); this dialog only shows them. The presenter refreshes it whenever
a new estimate is shown, so it follows settings changes."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout

from memdesigner.units import format_bytes

COLUMNS = ("Bytes", "Category", "Layer", "Tensor", "Why it is alive (the layer's rule)")


def explain_job(design, settings, device):
    """The work for the worker: ``job(cancel) -> (rows, header)`` (two engine runs)."""

    def job(_cancel):
        from memdesigner.engine.estimate import explain_peak
        from memdesigner.engine.peak_rules import run_header

        return explain_peak(design, settings, device=device), run_header(settings)

    return job


class _BytesItem(QTableWidgetItem):
    """Sorts by the byte count, shows MiB/GiB."""

    def __init__(self, nbytes: int):
        super().__init__(format_bytes(nbytes, 2))
        self.nbytes = nbytes
        self.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)

    def __lt__(self, other):
        return self.nbytes < getattr(other, "nbytes", 0)


class ExplainDialog(QDialog):
    node_clicked = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWindowTitle("What is alive at the peak")
        self.resize(900, 520)
        self.rows: list = []
        self.header = ""
        lay = QVBoxLayout(self)
        self.title = QLabel("Explaining…")
        self.title.setWordWrap(True)
        lay.addWidget(self.title)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectRows)
        hh = self.table.horizontalHeader()
        for j in range(len(COLUMNS) - 1):
            hh.setSectionResizeMode(j, QHeaderView.ResizeToContents)
        hh.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.Stretch)
        self.table.cellDoubleClicked.connect(self._pick)
        lay.addWidget(self.table)

    def show_pending(self) -> None:
        if not self.rows:
            self.title.setText("Explaining…")

    def show_error(self, text: str) -> None:
        self.rows = []
        self.table.setRowCount(0)
        self.title.setText(text)

    def show_rows(self, rows: list, header: str) -> None:
        self.rows, self.header = rows, header
        total = sum(r["bytes"] for r in rows)
        self.title.setText(f"<b>{format_bytes(total, 2)}</b> ({total:,} B) in {len(rows)} tensors — {header}. "
                           "Double-click a row to select its layer.")
        t = self.table
        t.setSortingEnabled(False)
        t.setRowCount(len(rows))
        for i, r in enumerate(rows):
            cells = [_BytesItem(r["bytes"]), QTableWidgetItem(r["category"].replace("_", " ")),
                     QTableWidgetItem(r["name"] or "(whole model)"), QTableWidgetItem(r["tensor"]),
                     QTableWidgetItem(r["why"])]
            cells[4].setToolTip(r["why"])
            if r["layer"]:
                cells[2].setData(Qt.UserRole, r["layer"])
            for j, c in enumerate(cells):
                t.setItem(i, j, c)
        t.setSortingEnabled(True)
        t.sortItems(0, Qt.DescendingOrder)

    def _pick(self, row, _col):
        nid = self.table.item(row, 2).data(Qt.UserRole)
        if nid:
            self.node_clicked.emit(nid)

"""Tools -> Explain the Peak: every tensor alive at the peak, with its layer, what it is, its
category and the layer's rule for what it keeps — the answer to "why this number?"."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout

from memdesigner.engine.estimate import explain_peak
from memdesigner.engine.peak_rules import why_alive
from memdesigner.units import format_bytes

COLUMNS = ("Bytes", "Category", "Layer", "Tensor", "Why it is alive (the layer's rule)")


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

    def __init__(self, design, settings, device, parent=None):
        super().__init__(parent)
        self.setWindowTitle("What is alive at the peak")
        self.resize(900, 520)
        self.rows = explain_peak(design, settings, device=device)
        total = sum(r["bytes"] for r in self.rows)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel(f"<b>{format_bytes(total, 2)}</b> ({total:,} B) in {len(self.rows)} tensors — "
                             f"{settings.mode}, batch {settings.batch}, {settings.dtype}"
                             f"{', ' + settings.optimizer if settings.mode == 'train' else ''}, "
                             f"{settings.backend} semantics. Double-click a row to select its layer."))
        self.table = QTableWidget(len(self.rows), len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectRows)
        for i, r in enumerate(self.rows):
            node = design.nodes.get(r["layer"]) if r["layer"] else None
            rule = why_alive(r, node)
            cells = [_BytesItem(r["bytes"]), QTableWidgetItem(r["category"].replace("_", " ")),
                     QTableWidgetItem(r["name"] or "(whole model)"), QTableWidgetItem(r["tensor"]),
                     QTableWidgetItem(rule)]
            for j, c in enumerate(cells):
                if j == 2 and r["layer"]:
                    c.setData(Qt.UserRole, r["layer"])
                self.table.setItem(i, j, c)
        self.table.setSortingEnabled(True)
        self.table.sortItems(0, Qt.DescendingOrder)
        hh = self.table.horizontalHeader()
        for j in range(len(COLUMNS) - 1):
            hh.setSectionResizeMode(j, QHeaderView.ResizeToContents)
        hh.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.Stretch)
        self.table.cellDoubleClicked.connect(self._pick)
        lay.addWidget(self.table)

    def _pick(self, row, _col):
        nid = self.table.item(row, 2).data(Qt.UserRole)
        if nid:
            self.node_clicked.emit(nid)

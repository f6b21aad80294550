"""Tools -> Explain the Peak: every tensor alive at the peak, with its layer, what it is, its
category and the layer's rule for what it keeps — the answer to "why this number?"."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout

from memdesigner.engine.estimate import explain_peak
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
            rule = _why(r, node)
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


def _why(row: dict, node) -> str:
    """One line on the rule that keeps this tensor alive."""
    tensor, cat = row["tensor"], row["category"]
    if node is None:
        return _shared_rule(cat)
    if cat == "gradients" and "parameter gradients" in tensor:
        return "p.grad: kept from this layer's backward until the next zero_grad"
    if cat == "gradients":
        return "an activation gradient: freed once the op that made the tensor has run its backward"
    if tensor == "input batch":
        return "the batch stays alive for the whole step"
    if tensor == "output":
        return ("an output: alive until its consumers ran, and in training until the ops that keep it "
                f"ran their backward (this layer keeps {node.layer.keeps_for_backward or 'nothing'})")
    if cat == "workspace":
        return "a temporary of this op or of the optimizer step"
    return f"kept for backward by this layer: {node.layer.keeps_for_backward or tensor}"


def _shared_rule(category: str) -> str:
    return {
        "weights": "parameters and buffers live for the whole step",
        "optimizer_state": "optimizer state exists from the first step on (steady state)",
        "gradients": "the loss gradient seed lives until backward returns",
        "activations": "the batch and the model's output live for the whole step",
        "workspace": "the optimizer step's temporaries",
    }.get(category, "")

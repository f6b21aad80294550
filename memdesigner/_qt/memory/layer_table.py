"""The per-layer table: sortable by any column (numbers sort as numbers); a click selects the node."""

from __future__ import annotations

from itertools import compress, count
from operator import attrgetter, itemgetter, ne

from PySide6.QtCore import QAbstractTableModel, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from memdesigner._qt.icons import family_icon
from memdesigner._qt.theme import WARN_COLOR
from memdesigner.engine.report import shape_text as _shape
from memdesigner.engine.report import write_layers_csv
from memdesigner.model import registry
from memdesigner.units import format_bytes, format_count, format_flops

_DISPLAY, _SORT, _ID = int(Qt.DisplayRole.value), int(Qt.UserRole.value), int(Qt.UserRole.value) + 1
_ALIGN, _DECORATION = int(Qt.TextAlignmentRole.value), int(Qt.DecorationRole.value)
_FOREGROUND, _TOOLTIP = int(Qt.ForegroundRole.value), int(Qt.ToolTipRole.value)
_ROLES = frozenset((_DISPLAY, _SORT, _ID, _ALIGN, _DECORATION, _FOREGROUND, _TOOLTIP))
_RIGHT = int((Qt.AlignRight | Qt.AlignVCenter).value)
_HORIZONTAL = Qt.Orientation.Horizontal

_SHOWN = attrgetter("id", "name", "type", "output_shape", "params", "param_bytes", "activation_bytes",
                    "kept_bytes", "flops", "not_modelled")
_FIRST = itemgetter(0)

COLUMNS = ("Layer", "Type", "Output shape", "Params", "Weights", "Activations", "Kept for backward", "FLOPs")


class LayerModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows = []
        self._keys: list = []  # _SHOWN of each row, to find the rows a new result changed

    def set_rows(self, rows):
        """New rows; for the same layers (an edit, a settings change) only the rows whose values
        changed are announced, not a reset of the whole table (re-sorted, re-laid out, its
        selection lost) after every estimate."""
        rows = list(rows)
        keys = list(map(_SHOWN, rows))  # what the view shows of each row, read in C
        old, self._keys = self._keys, keys
        if len(keys) == len(old) and list(map(_FIRST, keys)) == list(map(_FIRST, old)):
            changed = list(compress(count(), map(ne, keys, old)))  # 10,000 rows: ~1 ms, not 10-50
            self.rows = rows
            if changed:
                self.dataChanged.emit(self.index(changed[0], 0), self.index(changed[-1], len(COLUMNS) - 1))
            return
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def rowCount(self, parent=None):
        return 0 if parent is not None and parent.isValid() else len(self.rows)

    def columnCount(self, parent=None):
        return len(COLUMNS)

    def headerData(self, section, orientation, role=_DISPLAY):
        if role == _DISPLAY and orientation == _HORIZONTAL:
            return COLUMNS[section]
        return None

    def raw(self, r, col):
        row = self.rows[r]
        return (row.name, row.type, _shape(row.output_shape), row.params, row.param_bytes, row.activation_bytes,
                row.kept_bytes, row.flops)[col]

    def data(self, index, role=_DISPLAY):
        """Asked about ten roles per visible cell on every paint: roles compared as plain ints (a
        comparison with a PySide6 enum member costs ~15 µs, ~100 µs per call with its chain)."""
        if role not in _ROLES or not index.isValid():
            return None
        r, c = index.row(), index.column()
        row = self.rows[r]
        if role == _DISPLAY:
            v = self.raw(r, c)
            if c == 3:
                return format_count(v)
            if c in (4, 5, 6):
                return format_bytes(v) if v else "–"
            if c == 7:
                return format_flops(v) if v else "–"
            if c == 1 and row.not_modelled:
                return f"⚠ {v} (not modelled)"
            return v
        if role == _SORT:
            return self.raw(r, c)
        if role == _ID:
            return row.id
        if role == _ALIGN:
            return _RIGHT if c >= 3 else None
        if role == _DECORATION:
            if c != 0:
                return None
            try:
                return family_icon(registry.get(row.type).family)
            except KeyError:
                return None
        if role == _FOREGROUND:
            return QColor(WARN_COLOR) if row.not_modelled else None
        if c in (0, 1):  # the tooltip
            return row.not_modelled or None
        if c == 2:
            return None
        return f"{self.raw(r, c):,}"


class LayerTable(QTableView):
    node_clicked = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.model_ = LayerModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model_)
        self.proxy.setSortRole(Qt.UserRole)
        self.setModel(self.proxy)
        self.setSortingEnabled(True)
        self.sortByColumn(-1, Qt.AscendingOrder)  # execution order until the user picks a column
        self.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.setSelectionMode(QAbstractItemView.SingleSelection)
        self.setAlternatingRowColors(True)
        self.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(22)
        h = self.horizontalHeader()
        h.setSectionResizeMode(QHeaderView.Interactive)
        h.setStretchLastSection(True)
        h.setHighlightSections(False)
        for i, w in enumerate((150, 110, 130, 80, 90, 95, 120, 90)):
            self.setColumnWidth(i, w)
        self.clicked.connect(self._clicked)

    def set_rows(self, rows):
        self.model_.set_rows(rows)

    def _clicked(self, index):
        nid = self.proxy.data(index, Qt.UserRole + 1)
        if nid:
            self.node_clicked.emit(nid)

    def select_node(self, nid: str | None):
        self.blockSignals(True)
        self.clearSelection()
        for r, row in enumerate(self.model_.rows if nid is not None else ()):  # (None: no walk over 10,000)
            if row.id == nid:
                idx = self.proxy.mapFromSource(self.model_.index(r, 0))
                self.selectRow(idx.row())
                self.scrollTo(idx)
                break
        self.blockSignals(False)

    def write_csv(self, path) -> None:
        """Exact numbers (bytes as integers), in the table's current order."""
        order = [self.proxy.mapToSource(self.proxy.index(pr, 0)).row() for pr in range(self.proxy.rowCount())]
        write_layers_csv([self.model_.rows[r] for r in order], path)

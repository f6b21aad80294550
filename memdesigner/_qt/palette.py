"""The layer palette: every registered layer type grouped by family, filterable, draggable onto
the canvas (double-click adds at the centre of the view)."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QLineEdit, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from memdesigner._qt.canvas.view import LAYER_MIME
from memdesigner._qt.icons import family_icon
from memdesigner.model import registry

FAMILY_TITLES = {
    "inputs": "Inputs", "convolution": "Convolution", "dense": "Dense & embedding", "pooling": "Pooling",
    "normalization": "Normalization & dropout", "activation": "Activations", "merge": "Merge",
    "tensor": "Tensor ops", "recurrent": "Recurrent", "attention": "Attention", "output": "Loss & output",
    "generic": "Generic",
}


class _Tree(QTreeWidget):
    def mimeTypes(self):
        return [LAYER_MIME]

    def mimeData(self, items):
        md = QMimeData()
        name = items[0].data(0, Qt.UserRole) if items else None
        if name:
            md.setData(LAYER_MIME, name.encode())
        return md


class PaletteWidget(QWidget):
    activated = Signal(str)  # layer type to add (double-click / Enter)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.search = QLineEdit(placeholderText="Search layers…")
        self.search.setClearButtonEnabled(True)
        self.tree = _Tree()
        self.tree.setHeaderHidden(True)
        self.tree.setDragEnabled(True)
        self.tree.setDragDropMode(QAbstractItemView.DragOnly)
        self.tree.setIndentation(12)
        self.tree.setUniformRowHeights(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(6)
        lay.addWidget(self.search)
        lay.addWidget(self.tree)
        self.items: dict[str, QTreeWidgetItem] = {}
        for fam, types in registry.by_family().items():
            group = QTreeWidgetItem([FAMILY_TITLES.get(fam, fam.title())])
            group.setIcon(0, family_icon(fam))
            group.setFlags(Qt.ItemIsEnabled)
            f = group.font(0)
            f.setBold(True)
            group.setFont(0, f)
            self.tree.addTopLevelItem(group)
            for lt in types:
                if not lt.in_palette:
                    continue
                it = QTreeWidgetItem([lt.name])
                it.setData(0, Qt.UserRole, lt.name)
                it.setIcon(0, family_icon(fam))
                it.setToolTip(0, f"<b>{lt.name}</b><br>{lt.doc}")
                it.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsDragEnabled)
                group.addChild(it)
                self.items[lt.name] = it
        self.tree.expandAll()
        self.search.textChanged.connect(self.filter)
        self.search.returnPressed.connect(self._add_first_visible)
        self.tree.itemActivated.connect(lambda it, _c: it.data(0, Qt.UserRole) and self.activated.emit(
            it.data(0, Qt.UserRole)))

    def filter(self, text: str):
        """Match the name, aliases, search words, family and doc, so 'fc', 'bn' or 'pool' find what
        people mean (the words live in each layer type's registration)."""
        t = text.strip().lower()
        for i in range(self.tree.topLevelItemCount()):
            group = self.tree.topLevelItem(i)
            shown = 0
            for j in range(group.childCount()):
                it = group.child(j)
                lt = registry.get(it.data(0, Qt.UserRole))
                hay = " ".join([lt.name, lt.family, lt.doc, *lt.aliases, *lt.search_words]).lower()
                ok = not t or t in hay
                it.setHidden(not ok)
                shown += ok
            group.setHidden(shown == 0)
            group.setExpanded(True)

    def _add_first_visible(self):
        for name, it in self.items.items():
            if not it.isHidden() and not it.parent().isHidden():
                self.activated.emit(name)
                return

"""Ctrl+F: jump to a layer by name or id. A find box over the canvas completes over every layer's
name and id (and the layers inside block definitions, which it opens); Enter selects the layer
and centres the canvas on it."""

from __future__ import annotations

from PySide6.QtCore import QStringListModel, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QCompleter, QHBoxLayout, QLabel, QLineEdit, QWidget

IN_BLOCK = " — in block "


class FindLayer(QWidget):
    def __init__(self, win):
        super().__init__(win.view)
        self.win = win
        self.setObjectName("find-layer")
        self.setAutoFillBackground(True)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.addWidget(QLabel("Find layer"))
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("name or id")
        self.edit.setClearButtonEnabled(True)
        self.edit.setMinimumWidth(260)
        lay.addWidget(self.edit)
        self.note = QLabel("")  # "no match", where the user is looking (the status bar is far below)
        self.note.setStyleSheet("color: #c0392b;")
        self.note.hide()
        lay.addWidget(self.note)
        self.edit.textEdited.connect(self._clear_note)
        self.model = QStringListModel(self)
        self.completer = QCompleter(self.model, self)
        self.completer.setCaseSensitivity(Qt.CaseInsensitive)
        self.completer.setFilterMode(Qt.MatchContains)
        self.completer.setMaxVisibleItems(14)
        self.edit.setCompleter(self.completer)
        self.completer.activated.connect(self.jump_to)
        self.edit.returnPressed.connect(lambda: self.jump_to(self.edit.text()))
        self._targets: dict[str, tuple] = {}  # entry text -> (block instance id or None, node id)
        self.action = QAction("&Find Layer…", win)
        self.action.setShortcut(QKeySequence.Find)
        self.action.setStatusTip("Jump to a layer by name or id")
        self.action.triggered.connect(lambda _=False: self.open())
        self.hide()

    # -- the box ---------------------------------------------------------------------------------
    def open(self):
        self._fill()
        self.adjustSize()
        self.move(self.win.view.viewport().width() - self.width() - 12, 8)
        self.show()
        self.raise_()
        self.edit.setFocus()
        self.edit.selectAll()

    def _clear_note(self, *_):
        if self.note.isVisible():
            self.note.hide()
            self.adjustSize()

    def keyPressEvent(self, ev):
        if ev.key() == Qt.Key_Escape:
            self.hide()
            self.win.view.setFocus()
            return
        super().keyPressEvent(ev)

    def _root(self):
        nav = getattr(self.win, "blocks_nav", None)
        return nav.root if nav is not None and getattr(nav, "root", None) is not None else self.win.design

    def _fill(self):
        """Every layer as "name (id)"; a block's inner layers name the instance they are in."""
        root = self._root()
        targets: dict[str, tuple] = {}
        for n in root.nodes.values():
            targets[f"{n.name} ({n.id})" if n.name != n.id else n.id] = (None, n.id)
        for inst in root.nodes.values():
            if inst.type != "Block":
                continue
            bd = root.blocks.get(inst.props.get("definition"))
            if bd is None:
                continue
            for n in bd.graph.nodes.values():
                label = n.name if n.name == n.id else f"{n.name} ({n.id})"
                targets[f"{label}{IN_BLOCK}{inst.name}"] = (inst.id, n.id)
        self._targets = targets
        self.model.setStringList(list(targets))

    def resolve(self, text: str) -> tuple | None:
        """(block instance or None, node id) for an entry, an id or a name (exact, then prefix)."""
        text = text.strip()
        if not text:
            return None
        if not self._targets:
            self._fill()
        if text in self._targets:
            return self._targets[text]
        root = self._root()
        if text in root.nodes:
            return None, text
        low = text.lower()
        for n in root.nodes.values():
            if n.name.lower() == low:
                return None, n.id
        for entry, target in self._targets.items():
            if entry.lower().startswith(low):
                return target
        for entry, target in self._targets.items():
            if low in entry.lower():
                return target
        return None

    # -- jumping ---------------------------------------------------------------------------------
    def jump_to(self, text: str) -> str | None:
        """Select the layer and centre the canvas on it; returns its id (None: not found)."""
        target = self.resolve(text)
        win = self.win
        if target is None:
            win.statusBar().showMessage(f"No layer named {text.strip()!r}", 4000)
            self.note.setText("no match")
            self.note.show()
            self.adjustSize()
            return None
        self._clear_note()
        inst, nid = target
        nav = getattr(win, "blocks_nav", None)
        if nav is not None:
            if inst is None and nav.path:
                nav.go(0)  # back to the document
            elif inst is not None:
                if nav.path:
                    nav.go(0)
                nav.open(inst)
        scene = win.scene
        if nid not in scene.nodes and not scene.building:
            scene.finish_pending()
        scene.select_nodes([nid])  # (an item still being built is selected when it arrives)
        item = scene.nodes.get(nid)
        if item is not None:
            win.view.centerOn(item)
        else:  # where the design puts it: no waiting for the rest of a big canvas
            x, y = scene.design.nodes[nid].pos
            win.view.centerOn(x + 100, y + 50)
        win.view.view_changed.emit()
        win.statusBar().showMessage(f"Found {scene.design.nodes[nid].name}", 3000)
        return nid


def install(win) -> FindLayer:
    box = FindLayer(win)
    win.addAction(box.action)
    return box

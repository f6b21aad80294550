"""Blocks in the window: Group into block (Ctrl+G), Ungroup (Ctrl+Shift+G), Make unique, and
opening a definition (double-click) with a breadcrumb back to the parent.

The window's ``design`` stays the document (what is estimated, saved and autosaved); the canvas
shows ``scene.design``, the document or an opened definition's graph. Editing a definition is
ordinary editing of its graph, so every instance follows and the document re-estimates.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from memdesigner._qt import theme
from memdesigner._qt.blocks import block_commands
from memdesigner._qt.blocks.block_view import instance_prefix, shown_result
from memdesigner.model import block_edit
from memdesigner.model.blocks import BLOCK
from memdesigner.model.design import Design


class BreadcrumbBar(QFrame):
    """design › layers (layer ×32) › ...: floats over the canvas's top-left corner while a
    definition is open; click a crumb to go back up."""

    def __init__(self, nav: BlockNavigator, parent):
        super().__init__(parent)
        self.setObjectName("block-path")
        self.setStyleSheet("#block-path { background: palette(window); border: 1px solid palette(mid); "
                           "border-radius: 6px; }")
        self.nav = nav
        self.crumbs: list[QPushButton] = []
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(6, 2, 6, 2)
        self.row.setSpacing(2)

    def show_path(self, names: list[str]) -> None:
        while self.row.count():
            w = self.row.takeAt(0).widget()
            if w is not None:
                w.deleteLater()
        self.crumbs = []
        for i, name in enumerate(names):
            if i:
                sep = QLabel("›")
                sep.setStyleSheet(f"color: {theme.muted()}; padding: 0 2px;")
                self.row.addWidget(sep)
            b = QPushButton(name)
            b.setFlat(True)
            b.setCursor(Qt.PointingHandCursor)
            last = i == len(names) - 1
            b.setEnabled(not last)
            b.setToolTip("" if last else "Back to this level (Ctrl+Backspace: one level up)")
            b.setStyleSheet("font-weight: bold; padding: 2px 4px;" if last else
                            "color: palette(link); text-decoration: underline; padding: 2px 4px;")
            b.clicked.connect(lambda _=False, level=i: self.nav.go(level))
            self.row.addWidget(b)
            self.crumbs.append(b)
        self.adjustSize()
        self.move(8, 8)
        self.raise_()
        self.setVisible(len(names) > 1)


class BlockNavigator(QObject):
    def __init__(self, win):
        super().__init__(win)
        self.win = win
        self.path: list[tuple[str, str]] = []  # (instance id, definition name) from the document down
        self.bar = BreadcrumbBar(self, win.view)
        A = win._action
        self.act_group = A("&Group into Block", self.group, "Ctrl+G", "Make the selected layers one block definition "
                           "used by one instance (edges that cross the selection become its ports)", on_view=True)
        self.act_ungroup = A("&Ungroup Block", self.ungroup, "Ctrl+Shift+G", "Put the selected block instances' "
                             "layers back in place", on_view=True)
        self.act_unique = A("Make Block &Unique", self.make_unique, tip="Give the selected instance its own copy "
                            "of the definition, so editing it no longer changes the others")
        self.act_open = A("&Open Block Definition", self.open_selected, "Ctrl+Return",
                          "Edit the definition every instance uses", on_view=True)
        self.act_up = A("Close Block Definition", lambda: self.go(len(self.path) - 1), "Ctrl+Backspace",
                        on_view=True)
        self.actions = [self.act_group, self.act_ungroup, self.act_unique, self.act_open, self.act_up]
        win.scene.block_open.connect(self.open)
        # a timeline or table click on a layer inside a block: select the block it runs in
        win.timeline.node_clicked.connect(self.reveal)
        win.table.node_clicked.connect(self.reveal)
        win.stack.indexChanged.connect(lambda _i: QTimer.singleShot(0, self._check_path))
        # an undo/redo inside a definition not on the canvas (nobody listens to its graph): re-estimate
        win.stack.indexChanged.connect(lambda _i: win.design.blocks and win.service.schedule())

    # -- where we are ------------------------------------------------------------------------
    @property
    def root(self) -> Design:
        return self.win.design

    @property
    def shown(self) -> Design:
        return self.win.scene.design

    def prefix(self) -> str:
        """Expanded-id prefix of the opened definition's nodes (first repetition of each level)."""
        out, g = "", self.root
        for inst_id, name in self.path:
            out += instance_prefix(g, inst_id, self.root.blocks)
            g = self.root.blocks[name].graph
        return out

    def owner(self, nid: str) -> str | None:
        """The node on the canvas that an expanded node id belongs to (itself, or its instance)."""
        shown = self.shown
        prefix = self.prefix()
        if prefix:
            if not nid.startswith(prefix):
                return None
            nid = nid[len(prefix):]
        if nid in shown.nodes:
            return nid
        best = None
        for n in shown.nodes.values():
            if n.type == BLOCK and nid.startswith(n.id + ".") and (best is None or len(n.id) > len(best)):
                best = n.id
        return best

    def reveal(self, nid: str) -> None:
        if nid in self.shown.nodes and not self.path:
            return  # the window selected it already
        own = self.owner(nid)
        if own is not None:
            self.win.scene.select_nodes([own], center=True)

    def reset(self) -> None:
        """The window opened another document: back to its top level."""
        if self.path:
            self._leave(self.shown)
        self.path = []
        self.bar.show_path([self.root.name or "design"])

    def open_selected(self) -> None:
        ids = [i for i in self.win.scene.selected_node_ids() if self.shown.nodes[i].type == BLOCK]
        if len(ids) == 1:
            self.open(ids[0])

    def open(self, inst_id: str) -> None:
        node = self.shown.nodes.get(inst_id)
        if node is None or node.type != BLOCK:
            return
        bd = self.root.blocks.get(node.props.get("definition"))
        if bd is None:
            self.win.statusBar().showMessage(f"{node.name}: no block definition named "
                                             f"{node.props.get('definition')!r}", 6000)
            return
        self.path.append((inst_id, bd.name))
        self._show(bd.graph)

    def go(self, level: int) -> None:
        """Back to the level-th crumb (0: the document)."""
        level = max(0, min(level, len(self.path)))
        self.path = self.path[:level]
        self._show(self.root.blocks[self.path[-1][1]].graph if self.path else self.root)

    def _show(self, graph: Design) -> None:
        win = self.win
        if self.shown is not self.root:
            self._leave(self.shown)
        if graph is not self.root:
            graph.subscribe(win._on_design_event)  # an edit inside re-estimates the document
        win.scene.set_design(graph)
        win.inspector.set_design(graph)
        names = [self.root.name or "design"]
        g = self.root
        for inst_id, name in self.path:
            names.append(f"{g.nodes[inst_id].name} ({name})" if inst_id in g.nodes else name)
            g = self.root.blocks[name].graph
        self.bar.show_path(names)
        res = win.result
        if res is not None:  # the last estimate, as this level shows it (a new one follows any edit)
            an, rep = self.shown_result(res.analysis, res.report)
            win.scene.apply_result(an, rep)
            win.inspector.apply_analysis(an)
        QTimer.singleShot(0, win.view.fit_all)

    def _leave(self, graph: Design) -> None:
        if graph is not self.root:
            graph.unsubscribe(self.win._on_design_event)

    def _check_path(self) -> None:
        """After an undo/redo: an opened definition that no longer exists closes (to the deepest
        level still there)."""
        g = self.root
        for i, (inst_id, name) in enumerate(self.path):
            node = g.nodes.get(inst_id)
            if node is None or node.props.get("definition") != name or name not in self.root.blocks:
                self.go(i)
                return
            g = self.root.blocks[name].graph
        if self.path and self.shown is not g:
            self._show(g)

    def shown_result(self, an, rep):
        if not self.path:
            return an, rep
        return shown_result(self.shown, self.prefix(), an, rep)

    # -- operations (each one undo step) -------------------------------------------------------
    def _push(self, text, fn):
        result, err = block_commands.push(self.win.stack, text, self.root, fn)
        if err is not None:
            self.win.statusBar().showMessage(str(err), 6000)
        return result

    def group(self) -> str | None:
        ids = self.win.scene.selected_node_ids()
        if not ids:
            self.win.statusBar().showMessage("Select the layers to group first", 6000)
            return None
        graph = self.shown
        nid = self._push(f"Group {len(ids)} layer(s) into a block", lambda: block_edit.group_nodes(graph, ids))
        if nid:
            self.win.scene.select_nodes([nid])
        return nid

    def ungroup(self) -> list:
        graph = self.shown
        ids = [i for i in self.win.scene.selected_node_ids() if graph.nodes[i].type == BLOCK]
        if not ids:
            self.win.statusBar().showMessage("Select a block instance to ungroup", 6000)
            return []

        def run():
            out = []
            for i in ids:
                out += block_edit.ungroup(graph, i)
            return out

        new = self._push("Ungroup block", run) or []
        self.win.scene.select_nodes(new)
        return new

    def make_unique(self, inst_id: str | None = None) -> str | None:
        graph = self.shown
        if inst_id is None:
            ids = [i for i in self.win.scene.selected_node_ids() if graph.nodes[i].type == BLOCK]
            if len(ids) != 1:
                self.win.statusBar().showMessage("Select one block instance", 6000)
                return None
            inst_id = ids[0]
        return self._push("Make block unique", lambda: block_edit.make_unique(self.root, inst_id, graph))

    def rename_definition(self, old: str, new: str) -> None:
        if new == old:
            return
        self._push("Rename block definition", lambda: block_edit.rename_definition(self.root, old, new))
        self.path = [(i, new if n == old else n) for i, n in self.path]


def block_panel(nav: BlockNavigator, graph: Design, nid: str) -> QWidget | None:
    """The inspector's block section: the definition's name (renames it for every instance),
    how many instances use it, Open and Make unique."""
    node = graph.nodes.get(nid)
    if node is None or node.type != BLOCK:
        return None
    name = node.props.get("definition", "")
    w = QWidget()
    lay = QVBoxLayout(w)
    lay.setContentsMargins(0, 4, 0, 0)
    row = QHBoxLayout()
    row.addWidget(QLabel("definition name"))
    edit = QLineEdit(name)
    edit.setObjectName("block-definition-name")
    edit.setToolTip("Rename the definition (every instance follows)")
    edit.editingFinished.connect(lambda: nav.rename_definition(name, edit.text().strip()))
    row.addWidget(edit, 1)
    lay.addLayout(row)
    n = block_edit.users(nav.root, name)
    info = QLabel(f"{n} instance(s) use this definition; editing it changes all of them."
                  if name in nav.root.blocks else f"no block definition named {name!r}")
    info.setWordWrap(True)
    info.setStyleSheet(f"color: {theme.muted()};")
    lay.addWidget(info)
    buttons = QHBoxLayout()
    b_open = QPushButton("Open definition")
    b_open.clicked.connect(lambda: nav.open(nid))
    b_unique = QPushButton("Make unique")
    b_unique.setEnabled(n > 1)
    b_unique.clicked.connect(lambda: nav.make_unique(nid))
    buttons.addWidget(b_open)
    buttons.addWidget(b_unique)
    lay.addLayout(buttons)
    return w


def install(win) -> BlockNavigator:
    nav = BlockNavigator(win)
    nav.bar.hide()
    win.inspector.extra_panel = lambda graph, nid: block_panel(nav, graph, nid)
    return nav


__all__ = ["install", "BlockNavigator", "BreadcrumbBar"]

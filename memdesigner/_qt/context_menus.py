"""Right-click menus on the canvas: on a layer (rename, duplicate, delete, group into a block,
freeze/unfreeze, show in the layer table ...), on a connection (delete) and on the empty canvas
(add a layer at the pointer, paste there, select all, auto layout, fit). The window's own actions
do the work, so a menu entry and its shortcut are one code path.

Installed as an event filter on the view's viewport: the view and the scene stay unaware of it.
Menus open with ``popup`` (not a nested event loop), so a test or a script can drive them."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QPointF
from PySide6.QtWidgets import QMenu

from memdesigner._qt.canvas import graph_ops
from memdesigner._qt.canvas.edge_item import EdgeItem
from memdesigner._qt.canvas.node_item import NodeItem
from memdesigner._qt.document.commands import RemoveEdgeCmd
from memdesigner._qt.icons import family_icon
from memdesigner._qt.palette import FAMILY_TITLES
from memdesigner._qt.settings.finetune_widgets import SetTrainableCmd
from memdesigner.model import registry
from memdesigner.model.blocks import BLOCK


def install(win) -> CanvasMenus:
    return CanvasMenus(win)


class CanvasMenus(QObject):
    def __init__(self, win):
        super().__init__(win)
        self.win = win
        self.menu: QMenu | None = None  # the menu open now (or last), for tests
        win.view.viewport().installEventFilter(self)

    def eventFilter(self, obj, ev):
        if ev.type() == QEvent.ContextMenu:
            self.open_at(ev.pos(), ev.globalPos())
            return True
        return False

    # -- which menu -----------------------------------------------------------------------------
    def open_at(self, pos: QPoint, global_pos: QPoint | None = None) -> QMenu:
        """The menu for what lies under ``pos`` (viewport coordinates)."""
        view = self.win.view
        item = view.itemAt(pos)
        while item is not None and not isinstance(item, (NodeItem, EdgeItem)):
            item = item.parentItem()
        scene_pos = view.mapToScene(pos)
        if isinstance(item, NodeItem):
            menu = self.node_menu(item.node_id)
        elif isinstance(item, EdgeItem):
            menu = self.edge_menu(item)
        else:
            menu = self.canvas_menu(scene_pos)
        if self.menu is not None:
            self.menu.close()
            self.menu.deleteLater()
        self.menu = menu
        menu.popup(global_pos if global_pos is not None else view.viewport().mapToGlobal(pos))
        return menu

    def _menu(self) -> QMenu:
        return QMenu(self.win.view)

    # -- a layer ------------------------------------------------------------------------------
    def node_menu(self, nid: str) -> QMenu:
        win, scene = self.win, self.win.scene
        if nid not in scene.selected_node_ids():
            scene.select_nodes([nid])  # right-click acts on what it points at, as in file managers
        ids = scene.selected_node_ids()
        graph = scene.design
        m = self._menu()
        one = len(ids) == 1
        if one:
            m.addAction("Rename…", lambda: self.rename(nid))
        m.addAction(win.act_dup)
        m.addAction(win.act_copy)
        m.addAction(win.act_cut)
        m.addAction(win.act_delete)
        m.addSeparator()
        m.addAction(win.blocks_nav.act_group)
        if any(graph.nodes[i].type == BLOCK for i in ids):
            m.addAction(win.blocks_nav.act_open)
            m.addAction(win.blocks_nav.act_ungroup)
            m.addAction(win.blocks_nav.act_unique)
        with_params = self._with_params(ids)
        if with_params:
            frozen = all(not graph.nodes[i].trainable for i in with_params)
            label = ("Unfreeze" if frozen else "Freeze") + (" layer" if len(with_params) == 1 else
                                                            f" {len(with_params)} layers")
            m.addAction(label, lambda: self.set_trainable(with_params, frozen))
        if one:
            m.addSeparator()
            m.addAction("Show in Layer Table", lambda: self.show_in_table(nid))
        return m

    def _with_params(self, ids) -> list:
        """The selected layers that have parameters to freeze, by the last estimate (all of them
        before the first one arrives)."""
        res = self.win.result
        if res is None or res.report is None:
            return list(ids)
        params = {r.id: r.params for r in res.report.layers}
        return [i for i in ids if params.get(i, 1)]

    def rename(self, nid: str) -> None:
        """Into the inspector's name field, selected, ready to type over (Enter renames, undoable)."""
        win = self.win
        win.scene.select_nodes([nid])
        win.inspector_dock.show()
        edit = win.inspector.name_edit
        if edit is not None:
            edit.setFocus()
            edit.selectAll()

    def set_trainable(self, ids, trainable: bool) -> None:
        win, graph = self.win, self.win.scene.design
        win.stack.beginMacro(("Unfreeze" if trainable else "Freeze") + f" {len(ids)} layer(s)")
        try:
            for i in ids:
                if graph.nodes[i].trainable != trainable:
                    win.stack.push(SetTrainableCmd(graph, i, trainable))
        finally:
            win.stack.endMacro()

    def show_in_table(self, nid: str) -> None:
        win = self.win
        win.memory_dock.show()
        win.tabs.setCurrentWidget(win.table)
        win.table.select_node(nid)

    # -- a connection -------------------------------------------------------------------------
    def edge_menu(self, item: EdgeItem) -> QMenu:
        m = self._menu()
        graph = self.win.scene.design
        src, dst = graph.nodes[item.edge.src].name, graph.nodes[item.edge.dst].name
        m.addAction(f"Delete Connection {src} → {dst}", lambda: self.delete_edge(item.edge))
        return m

    def delete_edge(self, edge) -> None:
        graph = self.win.scene.design
        if edge in graph.edges:
            self.win.stack.push(RemoveEdgeCmd(graph, edge))

    # -- the empty canvas ---------------------------------------------------------------------
    def canvas_menu(self, scene_pos: QPointF) -> QMenu:
        win = self.win
        m = self._menu()
        add = m.addMenu("Add Layer Here")
        for fam, types in registry.by_family().items():
            shown = [lt for lt in types if lt.in_palette]
            if not shown:
                continue
            sub = add.addMenu(family_icon(fam), FAMILY_TITLES.get(fam, fam.title()))
            for lt in shown:
                sub.addAction(lt.name, lambda name=lt.name: win.add_layer(name, scene_pos))
        paste = m.addAction("Paste Here", lambda: self.paste_at(scene_pos))
        paste.setEnabled(graph_ops.from_clipboard() is not None)
        m.addSeparator()
        m.addAction(win.act_select_all)
        m.addAction(win.act_layout)
        m.addAction(win.act_fit)
        return m

    def paste_at(self, scene_pos: QPointF) -> list:
        """The clipboard's layers with their top-left corner at the pointer."""
        data = graph_ops.from_clipboard()
        if not data or not data.get("nodes"):
            return []
        x0 = min(nd["pos"][0] for nd in data["nodes"])
        y0 = min(nd["pos"][1] for nd in data["nodes"])
        scene = self.win.scene
        new = graph_ops.paste(scene.design, self.win.stack, data, offset=(scene_pos.x() - x0, scene_pos.y() - y0))
        scene.select_nodes(new)
        return new

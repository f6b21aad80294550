"""The node-editor scene: mirrors a Design (through its change notifications) as node and edge
items, turns mouse gestures into undoable commands, and paints estimate results onto the items."""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QColor, QPen, QTransform
from PySide6.QtWidgets import QGraphicsPathItem, QGraphicsScene, QToolTip

from memdesigner._qt import theme
from memdesigner._qt.block_view import block_item_texts, block_key
from memdesigner._qt.commands import AddEdgeCmd, MoveNodesCmd
from memdesigner._qt.edge_item import EdgeItem, curve
from memdesigner._qt.node_item import NodeItem, PortItem
from memdesigner.model.design import Design, Edge
from memdesigner.model.shown_layout import shown_shape
from memdesigner.units import format_bytes, format_count

NOT_CONNECTED = "not connected yet: drag from an output port to its input"


def shape_text(shape) -> str:
    if shape and isinstance(shape[0], (list, tuple)):
        return ", ".join(shape_text(s) for s in shape)
    return "×".join(str(d) for d in shape)


class GraphScene(QGraphicsScene):
    message = Signal(str)  # a short explanation for the status bar (e.g. a refused connection)
    block_open = Signal(str)  # a Block node was double-clicked

    def __init__(self, undo_stack, parent=None):
        super().__init__(parent)
        self.stack = undo_stack
        self.design: Design | None = None
        self.nodes: dict[str, NodeItem] = {}
        self.edges: dict[Edge, EdgeItem] = {}
        self._adj: dict[str, set] = {}
        self._drag_port: PortItem | None = None
        self._drag_path: QGraphicsPathItem | None = None
        self._press_pos: dict[str, tuple] = {}
        self._batch = 1
        self.setBackgroundBrush(theme.canvas_colors()["bg"])
        self.setItemIndexMethod(QGraphicsScene.BspTreeIndex)

    # -- design binding -----------------------------------------------------------------------
    def set_design(self, design: Design):
        if self.design is not None:
            self.design.unsubscribe(self._on_design)
        self.design = design
        design.subscribe(self._on_design)
        self._rebuild()

    def _rebuild(self):
        self.clear()
        self.nodes.clear()
        self.edges.clear()
        self._adj.clear()
        for n in self.design.nodes.values():
            self._add_node_item(n)
        for e in self.design.edges:
            self._add_edge_item(e)

    def _add_node_item(self, node):
        item = NodeItem(node)
        self.nodes[node.id] = item
        self._adj[node.id] = set()
        self.addItem(item)
        return item

    def _add_edge_item(self, e: Edge):
        src, dst = self.nodes.get(e.src), self.nodes.get(e.dst)
        if src is None or dst is None:
            return
        dst.set_connected_inputs(len(self._adj_in(e.dst)) + 1)
        item = EdgeItem(e, src, dst)
        self.edges[e] = item
        self._adj[e.src].add(item)
        self._adj[e.dst].add(item)
        self.addItem(item)
        self._refresh_edges(e.dst)

    def _adj_in(self, nid):
        return [it for it in self._adj.get(nid, ()) if it.edge.dst == nid]

    def _refresh_edges(self, nid):
        for it in self._adj.get(nid, ()):
            it.update_path()

    def _on_design(self, event: str, payload):
        if event == "node_added":
            self._add_node_item(payload)
        elif event == "node_removed":
            item = self.nodes.pop(payload.id, None)
            self._adj.pop(payload.id, None)
            if item is not None:
                self.removeItem(item)
        elif event == "node_changed":
            item = self.nodes.get(payload.id)
            if item is not None:
                item.set_name(payload.name)
        elif event == "node_moved":
            item = self.nodes.get(payload.id)
            if item is not None and (item.pos().x(), item.pos().y()) != tuple(payload.pos):
                item.setPos(QPointF(*payload.pos))
        elif event == "edge_added":
            self._add_edge_item(payload)
        elif event == "edge_removed":
            item = self.edges.pop(payload, None)
            if item is not None:
                for nid in (payload.src, payload.dst):
                    self._adj.get(nid, set()).discard(item)
                self.removeItem(item)
                dst = self.nodes.get(payload.dst)
                if dst is not None:
                    dst.set_connected_inputs(len(self._adj_in(payload.dst)))
                    self._refresh_edges(payload.dst)
        elif event == "reset":
            self._rebuild()

    def node_moved_live(self, item: NodeItem):
        self._refresh_edges(item.node_id)

    # -- selection ----------------------------------------------------------------------------
    def selected_node_ids(self) -> list[str]:
        return [it.node_id for it in self.selectedItems() if isinstance(it, NodeItem)]

    def selected_edges(self) -> list[Edge]:
        return [it.edge for it in self.selectedItems() if isinstance(it, EdgeItem)]

    def select_nodes(self, ids, center: bool = False):
        self.blockSignals(True)
        self.clearSelection()
        for nid in ids:
            if nid in self.nodes:
                self.nodes[nid].setSelected(True)
        self.blockSignals(False)
        self.selectionChanged.emit()
        if center and ids and ids[0] in self.nodes and self.views():
            self.views()[0].ensureVisible(self.nodes[ids[0]], 80, 80)

    # -- estimate results ---------------------------------------------------------------------
    def apply_result(self, analysis, report):
        """Paint results onto items; only items whose raw numbers changed are re-formatted and
        repainted (keeps an edit on a 500-node design well under a frame or two)."""
        rows = {r.id: r for r in report.layers} if report is not None else {}
        batch = report.settings.get("batch", 1) if report is not None else 1
        infos = analysis.nodes if analysis is not None else {}
        for nid, item in self.nodes.items():
            info = infos.get(nid)
            row = rows.get(nid)
            key = (None if info is None else (info.issue and (info.issue.field, info.issue.message), info.blocked_by,
                                              len(info.outputs)),
                   None if row is None else (row.output_shape, row.params, row.activation_bytes, row.kept_bytes,
                                             row.param_bytes),
                   block_key(self.design, nid, report))
            if getattr(item, "_result_key", None) == key:
                continue
            item._result_key = key
            issue = blocked = pending = ""
            if info is not None:
                if info.issue is not None and info.issue.pending:
                    pending = NOT_CONNECTED  # freshly dropped: not an error the user made
                elif info.issue is not None:
                    f = info.issue.field
                    issue = f"{f}: {info.issue.message}" if f not in ("props", "inputs", "type") else info.issue.message
                blocked = info.blocked_by or ""
                if info.outputs and len(info.outputs) != item.n_outputs:
                    item.set_outputs(len(info.outputs))
                    self._refresh_edges(nid)
            if row is not None:
                shape = shape_text(row.output_shape)
                params = f"{format_count(row.params)} params" if row.params else "no params"
                mem = row.activation_bytes + row.kept_bytes
                mem_text = format_bytes(mem) if mem else ""
                tip = (f"activations {format_bytes(row.activation_bytes)} · kept for backward "
                       f"{format_bytes(row.kept_bytes)} · weights {format_bytes(row.param_bytes)}")
            elif self.design.nodes[nid].type == "Block":
                shape, params, mem_text, tip = block_item_texts(self.design, nid, item, info, report, batch)
                self._refresh_edges(nid)
            else:
                shape = params = mem_text = tip = ""
            item.set_info(shape, params, mem_text, tip, issue, blocked, pending)
        for e, it in self.edges.items():
            info = infos.get(e.src)
            if info is not None and info.ok and e.src_port < len(info.outputs):
                shp = info.outputs[e.src_port].shape
                if e.src_port == 0:  # in the source framework's order (Keras: channels last)
                    shp = shown_shape(self.design, e.src, shp)
                if getattr(it, "_shape_key", None) != (batch, shp):
                    it._shape_key = (batch, shp)
                    it.set_label(shape_text([batch, *shp]))
            else:
                it._shape_key = None
                it.set_label("")

    def mouseDoubleClickEvent(self, ev):
        it = self._item_at(ev.scenePos())
        while it is not None and not isinstance(it, NodeItem):
            it = it.parentItem()
        if isinstance(it, NodeItem) and self.design.nodes.get(it.node_id) is not None \
                and self.design.nodes[it.node_id].type == "Block":
            self.block_open.emit(it.node_id)  # open the definition (memdesigner/_qt/block_nav.py)
            return
        super().mouseDoubleClickEvent(ev)

    def highlight_nodes(self, ids):
        ids = set(ids)
        for nid, item in self.nodes.items():
            item.set_highlight(nid in ids)

    # -- connecting ---------------------------------------------------------------------------
    def try_connect(self, src: str, dst: str, src_port: int = 0, dst_port: int = 0) -> str | None:
        """Connect through the undo stack, or return (and announce) why the design refuses."""
        reason = self.design.check_edge(src, dst, src_port, dst_port)
        if reason:
            self.message.emit(f"Cannot connect: {reason}")
            return reason
        self.stack.push(AddEdgeCmd(self.design, src, dst, src_port, dst_port))
        self.message.emit(f"Connected {self.design.nodes[src].name} → {self.design.nodes[dst].name}")
        return None

    def _item_at(self, pos):
        view = self.views()[0] if self.views() else None
        return self.itemAt(pos, view.transform() if view else QTransform())

    def _free_input(self, item: NodeItem) -> int | None:
        used = {it.edge.dst_port for it in self._adj_in(item.node_id)}
        for p in item.inputs:
            if p.index not in used:
                return p.index
        return None

    def _drop_target(self, pos):
        """(node_id, port) under the cursor for the end of a connection drag."""
        want_output = not self._drag_port.is_output
        for it in self.items(pos):
            if isinstance(it, PortItem) and it.is_output == want_output:
                return it.node_id, it.index
            if isinstance(it, NodeItem):
                if want_output:
                    return it.node_id, 0
                free = self._free_input(it)
                return it.node_id, (free if free is not None else 0)
        return None

    def mousePressEvent(self, ev):
        it = self._item_at(ev.scenePos())
        if ev.button() == Qt.LeftButton and isinstance(it, PortItem):
            self._drag_port = it
            self._drag_path = QGraphicsPathItem()
            self._drag_path.setPen(QPen(theme.canvas_colors()["select"], 2, Qt.DashLine))
            self._drag_path.setZValue(5)
            self.addItem(self._drag_path)
            ev.accept()
            return
        super().mousePressEvent(ev)
        self._press_pos = {it.node_id: (it.pos().x(), it.pos().y())
                           for it in self.selectedItems() if isinstance(it, NodeItem)}

    def mouseMoveEvent(self, ev):
        if self._drag_port is not None:
            a, b = self._drag_port.scene_center(), ev.scenePos()
            self._drag_path.setPath(curve(a, b) if self._drag_port.is_output else curve(b, a))
            ev.accept()
            return
        super().mouseMoveEvent(ev)

    def mouseReleaseEvent(self, ev):
        if self._drag_port is not None:
            port, self._drag_port = self._drag_port, None
            self.removeItem(self._drag_path)
            self._drag_path = None
            self._drag_port = port
            target = self._drop_target(ev.scenePos())
            self._drag_port = None
            if target is not None:
                if port.is_output:
                    reason = self.try_connect(port.node_id, target[0], port.index, target[1])
                else:
                    reason = self.try_connect(target[0], port.node_id, target[1], port.index)
                if reason and ev.widget() is not None:
                    QToolTip.showText(ev.screenPos(), f"Cannot connect: {reason}", ev.widget())
            ev.accept()
            return
        super().mouseReleaseEvent(ev)
        moves = {}
        for nid, old in self._press_pos.items():
            item = self.nodes.get(nid)
            if item is not None:
                new = (item.pos().x(), item.pos().y())
                if new != old:
                    moves[nid] = (old, new)
        self._press_pos = {}
        if moves:
            self.stack.push(MoveNodesCmd(self.design, moves))

    # -- background grid ----------------------------------------------------------------------
    def drawBackground(self, painter, rect):
        c = theme.canvas_colors()
        painter.fillRect(rect, c["bg"])
        scale = painter.transform().m11()
        if scale < 0.35:
            return  # a grid finer than a few pixels is noise
        step = 24
        left, top = int(rect.left()) - int(rect.left()) % step, int(rect.top()) - int(rect.top()) % step
        minor, major = [], []
        x = left
        while x < rect.right():
            (major if x % (step * 5) == 0 else minor).append((QPointF(x, rect.top()), QPointF(x, rect.bottom())))
            x += step
        y = top
        while y < rect.bottom():
            (major if y % (step * 5) == 0 else minor).append((QPointF(rect.left(), y), QPointF(rect.right(), y)))
            y += step
        for lines, color in ((minor, c["grid"]), (major, c["grid_major"])):
            painter.setPen(QPen(QColor(color), 0))
            for a, b in lines:
                painter.drawLine(a, b)

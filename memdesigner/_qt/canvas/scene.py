"""The node-editor scene: mirrors a Design (through its change notifications) as node and edge
items, turns mouse gestures into undoable commands, and paints estimate results onto the items."""

from __future__ import annotations

from collections import deque

from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPainterPath, QPen, QTransform
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QGraphicsScene, QToolTip

from memdesigner._qt import theme
from memdesigner._qt.blocks.block_view import block_item_texts, block_key
from memdesigner._qt.canvas.edge_item import EdgeItem, curve
from memdesigner._qt.canvas.item_shelf import ItemShelf
from memdesigner._qt.canvas.node_item import BLOCK_LOD, WIDTH, NodeItem, PortItem
from memdesigner._qt.canvas.scene_put_back import PutBack
from memdesigner._qt.document.commands import AddEdgeCmd, MoveNodesCmd
from memdesigner._qt.scheduling.sliced import SlicedRunner
from memdesigner.model.design import Design, Edge
from memdesigner.model.shown_layout import shown_shape
from memdesigner.units import format_bytes, format_count

SYNC_ITEMS = 600  # designs with up to this many items are built before set_design returns
SYNC_RESULT = 400  # and labelled with an estimate in one go
OVERVIEW_LOD = 0.2
OVERVIEW_MIN_EDGES = 500
NOT_CONNECTED = "not connected yet: drag from an output port to its input"
SCENE_RECT = QRectF(-50000, -50000, 100000, 100000)
BIG_CARD = 140.0  # a big design's content rect counts every card this tall (no walk over the items)
# The scene index (a BSP tree) of a fixed depth: with Qt's automatic one every change of depth as
# items arrive (at 2^k items) and every scene-rect change regenerate the whole tree in one turn
# (50 ms at 22,000 items). Items built in slices are indexed every INDEX_EVERY items, not all at
# once by the index's timer after the build (another 50-70 ms turn after an open or an undo).
BSP_DEPTH = 12
INDEX_EVERY = 128
_HIDE = QGraphicsItem.hide  # the previous design's items, hidden at re-open
_PROBE = QRectF(0.0, 0.0, 0.001, 0.001)  # a query that makes the index take in new items


_NO_PEN, _NO_BRUSH = Qt.PenStyle.NoPen, Qt.BrushStyle.NoBrush  # (enum lookups are slow in PySide6 6.x)


def _rects_path() -> QPainterPath:
    """A path of rectangles that fills each one even where two overlap (layers on one spot)."""
    p = QPainterPath()
    p.setFillRule(Qt.FillRule.WindingFill)
    return p


def shape_text(shape) -> str:
    if shape and isinstance(shape[0], (list, tuple)):
        return ", ".join(shape_text(s) for s in shape)
    return "×".join(str(d) for d in shape)


class GraphScene(PutBack, QGraphicsScene):
    message = Signal(str)  # a short explanation for the status bar (e.g. a refused connection)
    block_open = Signal(str)  # a Block node was double-clicked
    layout_changed = Signal()  # layers added, removed or moved (the minimap redraws)
    building_changed = Signal(bool)  # a big design's items are being built in slices (views wait)

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
        self.jobs = SlicedRunner(self)
        self.shelf = ItemShelf()  # items of deleted layers, put back by the delete's undo
        self._made_items = False  # new items built since the last build ended (they need the last result)
        self._scale = 1.0
        self._detail = True  # ports shown (zoomed in enough to use them)
        self._overview = False  # edges drawn as one batch of lines (zoomed far out, big design)
        self._lines: QPainterPath | None = None
        self._blocks: tuple | None = None  # the overview's layer rectangles (by colour, in error)
        self._selected_rects: QPainterPath | None = None
        self._selection: tuple | None = None  # (node ids, edges) selected, until it changes
        self._selection_set = False  # select_nodes filled _selection for the change it announces
        self._want_selected: set = set()
        self._port_wanted: dict[str, NodeItem] = {}
        self._exporting = False
        self._port_timer = QTimer(self)
        self._port_timer.setSingleShot(True)
        self._port_timer.setInterval(0)
        self._port_timer.timeout.connect(self._make_wanted_ports)
        self.selectionChanged.connect(self._selection_dirty)
        self.vertical = False  # ports top/bottom: the top-to-bottom layout style
        self._result = None  # (analysis, report) last painted, re-applied to items built later
        self.label_gen = 0  # bumped by each result: an item whose texts are older composes them anew
        self._content: tuple | None = None  # (design, content_rect) of a big design, until the layout changes
        self._label_ctx: tuple | None = None
        self.setBackgroundBrush(theme.canvas_colors()["bg"])
        self.setItemIndexMethod(QGraphicsScene.BspTreeIndex)
        self.setBspTreeDepth(BSP_DEPTH)
        # a scene rect of our own (grown by _cover to hold the design): without one Qt grows it
        # from every item's bounding rect, a Python call per item (22,000 at 10,000 layers)
        # after each change
        self.setSceneRect(SCENE_RECT)

    # -- design binding -----------------------------------------------------------------------
    def set_design(self, design: Design):
        if self.design is not None:
            self.design.unsubscribe(self._on_design)
        self.design = design
        design.subscribe(self._on_design)
        self._rebuild()

    def _rebuild(self):
        self._content = None
        for job in ("build", "result", "route", "orientation"):  # queued removals still run
            self.jobs.cancel(job)
        # (the shelf's items are another design's: never asked for again; hidden in the scene)
        old = list(self.nodes.values()) + list(self.edges.values()) + self.shelf.drop()
        if len(old) <= SYNC_ITEMS and not self.jobs.has("remove"):
            self.clear()
            old = []
        else:  # hidden at once, out of the scene index in slices after the new design's items
            was = self.signalsBlocked()
            self.blockSignals(True)
            self.clearSelection()  # (one pass over the selected, not a call per item)
            deque(map(_HIDE, old), maxlen=0)  # in C: 22,000 items ~35 % faster than a Python loop
            self.blockSignals(was)
        self._selection = None
        self.nodes.clear()
        self.edges.clear()
        self._adj.clear()
        self._overview_dirty()
        self._blocks, self._lines = ({}, _rects_path()), QPainterPath()  # grown as items are built
        self._result = None
        self._want_selected = set()
        self._cover(self.content_rect())  # (a scene-rect change rebuilds the index: before the items)
        self._add_many(list(self.design.nodes.values()), list(self.design.edges))
        if old:
            self.jobs.add("remove", self._remove_steps(old), now=False)

    def _add_many(self, nodes, edges):
        """Items for many nodes and edges; a big design is built in slices (the window paints and
        takes input meanwhile). Small ones are done before this returns, and so are items put back
        from the shelf (an undo of a delete, _qt/canvas/scene_put_back.py): those cost a tenth of a new one."""
        kept = self.shelf.count(nodes) if self.shelf else 0
        put_back = 2 * kept >= len(nodes) > 0
        items = len(nodes) + len(edges)
        # (a kept layer and its edges: about a tenth of the work of new ones)
        big = (items - (kept * items // len(nodes)) * 9 // 10 if put_back else items) > SYNC_ITEMS
        if big and not self.building:
            self.building_changed.emit(True)
            self.message.emit(f"Building the canvas: {len(nodes):,} layers…")
        self.jobs.add("build", self._build_steps(nodes, edges, put_back), self._built, now=True)
        if not big:
            self.jobs.finish("build")

    def _build_steps(self, nodes, edges, put_back: bool = False):
        """Every step is small (a few items), so the runner can stop at its time budget anywhere:
        the edge count and filtering of a 12,000-edge design were one 50 ms step. put_back: most
        items are on the shelf; they go back first, then what is missing is built."""
        if put_back:
            rest: list = []
            yield from self.put_back_steps(list(nodes), list(edges), rest)
            nodes, edges = rest
        wired: dict[str, int] = {}  # each layer's new inputs, known before its item: one port layout
        have = self.edges
        for k, e in enumerate(edges):
            if not have or e not in have:
                wired[e.dst] = wired.get(e.dst, 0) + 1
            if k % 256 == 255:
                yield
        new = set()
        for k, n in enumerate(nodes):
            if n.id not in self.nodes and self.design.nodes.get(n.id) is n:
                self._add_node_item(n, wired.get(n.id, 0))
                new.add(n.id)
            if k % 4 == 0:
                if k % INDEX_EVERY == 0:
                    self.items(_PROBE)
                yield
        for nid, k in wired.items():  # a kept layer that gets inputs (undo, paste): its ports first,
            item = self.nodes.get(nid)  # so each new edge's curve is drawn once, to its port
            if nid not in new and item is not None:
                counts = item._counts
                item.set_connected_inputs(len(self._adj_in(nid)) + k)
                if item._counts != counts:  # its ports moved: the edges it already had follow
                    self._refresh_edges(nid)
                self._overview_dirty()  # (its card grew)
                yield
        for i, e in enumerate(edges):
            if (not have or e not in have) and e.src in self.nodes and e.dst in self.nodes:
                self._add_edge_item(e, refresh=False)
            if i % 4 == 0:
                if i % INDEX_EVERY == 0:
                    self.items(_PROBE)
                yield
        self.items(_PROBE)

    def _built(self):
        self._selected_rects = None  # (the overview's other batches grew with the items)
        self._cover(self.content_rect())
        if self.building:
            return  # another build job queued behind this one
        self.set_zoom(self._scale)  # the overview depends on how many edges there are
        self.building_changed.emit(False)
        self.layout_changed.emit()
        if self._want_selected:
            self._want_selected = set()
            self.selectionChanged.emit()
        self.update()
        made, self._made_items = self._made_items, False
        if self._result is not None and made:  # the estimate that arrived while items were still missing
            self.apply_result(*self._result)  # (items put back from the shelf show what they showed)

    @property
    def building(self) -> bool:
        return self.jobs.has("build")

    def finish_pending(self):
        """Build and label everything still queued (exports, tests)."""
        self.jobs.finish()

    def _add_node_item(self, node, n_connected: int = 0):
        self._made_items = True
        item = NodeItem(node, n_connected)
        item._labeler = self
        if self.vertical:
            item.set_vertical(True)
        if not self._detail:
            item.show_ports(False)
        self.addItem(item)
        return self._node_item_added(item, node)

    def _node_item_added(self, item: NodeItem, node, quiet: bool = False):
        """quiet: one of many put back at once (selected and repainted by the caller)."""
        self.nodes[node.id] = item
        self._adj[node.id] = set()
        if node.id in self._want_selected and not quiet:
            was = self.signalsBlocked()
            self.blockSignals(True)  # one selection change when the build is done
            item.setSelected(True)
            self.blockSignals(was)
            self._selection = None
        if self._blocks is not None:  # the overview's rectangles grow by one (no rebuild of 10,000)
            path = self._blocks[0].get(item.family)
            if path is None:
                path = self._blocks[0][item.family] = _rects_path()
            pos = node.pos
            path.addRect(pos[0], pos[1], WIDTH, item.height)
            if item._err:  # (one put back in error)
                self._blocks[1].addRect(pos[0], pos[1], WIDTH, item.height)
        if self._overview and not quiet:
            self.update()
        return item

    def _add_edge_item(self, e: Edge, refresh: bool = True):
        src, dst = self.nodes.get(e.src), self.nodes.get(e.dst)
        if src is None or dst is None:
            return
        if refresh:
            dst.set_connected_inputs(len(self._adj_in(e.dst)) + 1)
        self._made_items = True
        item = EdgeItem(e, src, dst)
        item._labeler = self
        if self._overview:
            item.setVisible(False)
        self.addItem(item)
        self._edge_item_added(item)
        if refresh:
            self._refresh_edges(e.dst)

    def _edge_item_added(self, item: EdgeItem, quiet: bool = False):
        """quiet: one of many put back at once (the caller repaints)."""
        e = item.edge
        self.edges[e] = item
        self._adj[e.src].add(item)
        self._adj[e.dst].add(item)
        if self._lines is not None:  # the overview's lines grow by one
            self._lines.moveTo(*item._a)
            self._lines.lineTo(*item._b)
        if self._overview and not quiet:
            self.update()

    def _adj_in(self, nid):
        return [it for it in self._adj.get(nid, ()) if it.edge.dst == nid]

    def _refresh_edges(self, nid):
        for it in self._adj.get(nid, ()):
            it.update_path()
        self._overview_dirty()

    def _remove_edge_item(self, e: Edge, refresh: bool = True):
        item = self.edges.pop(e, None)
        if item is None:
            return None
        for nid in (e.src, e.dst):
            self._adj.get(nid, set()).discard(item)
        self.removeItem(item)
        self._overview_dirty()
        dst = self.nodes.get(e.dst)
        if refresh and dst is not None:
            dst.set_connected_inputs(len(self._adj_in(e.dst)))
            self._refresh_edges(e.dst)
        return dst

    def _remove_many(self, nodes, edges):
        """One pass for a bulk delete, with selection signals held back: removing selected items
        one by one announced a selection change (and rebuilt the inspector) per item. A big one
        hides its items at once (0.3 µs each) and keeps them, hidden in the scene, on the shelf
        for its undo (_qt/canvas/item_shelf.py): taking them out of the scene index cost 3-40 µs each
        (0.9 s for a 10,000-layer design), putting them back in as much again."""
        was = self.signalsBlocked()
        self.blockSignals(True)
        self._selection = None
        try:
            if not self.design.nodes:  # everything (select all, delete): no bookkeeping, no walk to check
                # (every item is of a node of the design, and it has none left)
                kept_edges = list(self.edges.values())
                cards = list(map(self.nodes.get, [n.id for n in nodes]))
                self.nodes, self.edges, self._adj = {}, {}, {}
                self._overview_dirty()
                # the overview's batches start empty and grow as items come back (the undo puts
                # 22,000 back): left to be made again, the first paint after the undo made them
                # for all 10,000 layers in one turn (45-60 ms)
                self._blocks, self._lines = ({}, _rects_path()), QPainterPath()
                self._shelve(nodes, cards, kept_edges)
                return
            cards, kept_edges, touched = [], [], set()
            for e in edges:
                item = self.edges.pop(e, None)
                if item is not None:
                    for nid in (e.src, e.dst):
                        self._adj.get(nid, set()).discard(item)
                    kept_edges.append(item)
                    touched.add(e.dst)
            for n in nodes:
                cards.append(self.nodes.pop(n.id, None))
                self._adj.pop(n.id, None)
            for nid in touched:
                dst = self.nodes.get(nid)
                if dst is not None:
                    dst.set_connected_inputs(len(self._adj_in(nid)))
                    self._refresh_edges(nid)
            self._overview_dirty()
            self._shelve(nodes, cards, kept_edges)
        finally:
            self.blockSignals(was)
            self.selectionChanged.emit()

    def _shelve(self, nodes, cards, kept_edges):
        """Hidden (in C: a hidden item is deselected too, none comes back selected) and onto the
        shelf as one delete (``cards`` parallel to ``nodes``, None where a node had no item);
        what the shelf lets go leaves the scene in slices."""
        deque(map(_HIDE, kept_edges), maxlen=0)
        deque(map(_HIDE, [c for c in cards if c is not None]), maxlen=0)
        self.release(self.shelf.keep(nodes, cards, kept_edges, self.vertical, self._detail))

    def release(self, items):
        """Items that will never be shown again: out of the scene and freed, in slices."""
        if items:
            self.jobs.add("remove", self._remove_steps(list(items)), now=False)

    def _remove_steps(self, items):
        """Each item is let go right after it leaves the scene, so its C++ side is deleted inside
        the slice: holding the list to the end freed 22,000 items in one 60-110 ms turn."""
        items.reverse()
        k = 0
        while items:
            item = items.pop()
            if item.scene() is self:
                self.removeItem(item)
            item = None
            k += 1
            if k % 32 == 0:
                yield

    def _on_design(self, event: str, payload):
        if event == "nodes_added" and self._content is not None and self._content[0] is self.design \
                and payload[0]:  # a paste into a big design: its rect grows by the new layers' (no walk over all)
            xs, ys = [n.pos[0] for n in payload[0]], [n.pos[1] for n in payload[0]]
            grown = QRectF(min(xs), min(ys), max(xs) - min(xs) + WIDTH, max(ys) - min(ys) + BIG_CARD)
            self._content = (self.design, self._content[1].united(grown))
        elif event != "node_changed":
            self._content = None
        if event == "node_added":
            self._add_node_item(payload)
            self._cover(QRectF(*payload.pos, WIDTH, 200))
        elif event == "node_removed":
            item = self.nodes.pop(payload.id, None)
            self._adj.pop(payload.id, None)
            if item is not None:
                self.removeItem(item)
                self._overview_dirty()
        elif event == "nodes_removed":
            self._remove_many(*payload)
        elif event == "nodes_added":
            self._add_many(*payload)
        elif event == "node_changed":
            item = self.nodes.get(payload.id)
            if item is not None:
                item.set_name(payload.name)
        elif event == "node_moved":
            item = self.nodes.get(payload.id)
            if item is not None and (item.pos().x(), item.pos().y()) != tuple(payload.pos):
                item.setPos(QPointF(*payload.pos))
                self._refresh_edges(payload.id)
                self._cover(QRectF(*payload.pos, WIDTH, 200))
        elif event == "nodes_moved":
            self._move_many(payload)
        elif event == "edge_added":
            self._add_edge_item(payload)
        elif event == "edge_removed":
            self._remove_edge_item(payload)
        elif event == "reset":
            self._rebuild()
        if event in ("node_added", "node_removed", "nodes_removed", "nodes_added", "node_moved", "nodes_moved",
                     "reset"):
            self.layout_changed.emit()

    def _move_many(self, nodes):
        """Positions of a whole layout at once; each edge is re-routed once (not once per end),
        after every card has moved, in slices on a big design (the cards too: moving 10,000 in
        the layout's own turn was 60-90 ms of CPU)."""
        self._cover(self.content_rect())
        ids = {n.id for n in nodes}
        todo = [it for e, it in self.edges.items() if e.src in ids or e.dst in ids]
        nodes = list(nodes)

        def steps():
            get = self.nodes.get
            for k in range(0, len(nodes), 64):
                for n in nodes[k:k + 64]:
                    item = get(n.id)
                    if item is not None and self.design is not None and self.design.nodes.get(n.id) is n:
                        item.setPos(*n.pos)
                yield
            for k, it in enumerate(todo):
                if self.edges.get(it.edge) is it:
                    it.update_path()
                if k % 16 == 0:
                    yield
            self._overview_dirty()
            self.update()

        self.jobs.add("route", steps(), now=True)  # (queued behind an earlier layout's: its moves land first)
        if len(todo) + len(nodes) <= SYNC_ITEMS:
            self.jobs.finish("route")

    def _cover(self, rect: QRectF):
        """Grow the scene rect (never shrink: no jumping scroll bars) to hold ``rect`` with room
        around it: a deep top-to-bottom layout runs far past the default ±50,000."""
        if rect.isNull():
            return
        want = rect.adjusted(-5000, -5000, 5000, 5000)
        have = self.sceneRect()
        if not have.contains(want):  # generously: each growth rebuilds the scene index
            m = max(5000.0, 0.25 * max(want.width(), want.height()))
            self.setSceneRect(have.united(want.adjusted(-m, -m, m, m)))

    def content_rect(self) -> QRectF:
        """Where the design's layers are (from the design, so it is right while items are still
        being built); what fit-to-view and the minimap show. A big design's is kept until layers
        are added, removed or moved (an open asked for it four times: 10 ms each at 10,000)."""
        if self.design is None or not self.design.nodes:
            return QRectF()
        big = len(self.design.nodes) >= 2000
        if big and self._content is not None and self._content[0] is self.design:
            return QRectF(self._content[1])
        xs = [n.pos[0] for n in self.design.nodes.values()]
        ys = [n.pos[1] for n in self.design.nodes.values()]
        tall = max((it.height for it in self.nodes.values()), default=100.0) if not big else BIG_CARD
        rect = QRectF(min(xs), min(ys), max(xs) - min(xs) + WIDTH, max(ys) - min(ys) + tall)
        self._content = (self.design, QRectF(rect)) if big else None
        return rect

    def set_vertical(self, on: bool):
        """Ports on top/bottom (top-to-bottom layout) or left/right (bands), in slices."""
        if on == self.vertical:
            return
        self.vertical = on

        def steps():
            for k, it in enumerate(list(self.nodes.values())):
                it.set_vertical(on)
                if k % 16 == 0:
                    yield
            for k, it in enumerate(list(self.edges.values())):
                it.update_path()
                if k % 16 == 0:
                    yield
            self._overview_dirty()
            self.update()

        self.jobs.add("orientation", steps(), now=True)
        if len(self.nodes) + len(self.edges) <= SYNC_ITEMS:
            self.jobs.finish("orientation")

    # -- level of detail ------------------------------------------------------------------------
    def set_zoom(self, scale: float):
        """The view's zoom changed: below BLOCK_LOD ports are hidden (too small to hit, and thousands
        of them to paint); below OVERVIEW_LOD a big design is drawn by the scene in one pass —
        edges as one batch of straight lines, layers as rectangles, one call per colour — instead
        of asking thousands of items to paint (their items stay, for selecting, hovering and
        dragging; the view paints none of them)."""
        self._scale = scale
        detail = scale >= BLOCK_LOD
        if detail != self._detail:
            self._detail = detail
            for it in self.nodes.values():
                it.show_ports(detail)
        n_edges = len(self.design.edges) if self.design is not None else len(self.edges)
        overview = scale < OVERVIEW_LOD and n_edges >= OVERVIEW_MIN_EDGES
        if overview != self._overview:
            self._set_overview(overview)

    def _set_overview(self, on: bool):
        """The view (view.py) asks no item to paint in the overview; edges are hidden too, so a
        rubber band selects layers only (and asks no edge for its stroke)."""
        self._overview = on
        for it in self.edges.values():
            it.setVisible(not on)
        # the batches are kept: they follow every change in either mode (made again, they were an
        # 80 ms paint of a 10,000-layer design right after it opened and was fitted to the view)
        self.update()

    def render(self, *args, **kwargs):
        """Exports draw every item (not the zoomed-out overview of the screen); the cards draw
        their own port circles, no port items are made for a picture."""
        was = self._overview
        if was:
            self._set_overview(False)
        self._exporting = True
        try:
            super().render(*args, **kwargs)
        finally:
            self._exporting = False
            if was:
                self._set_overview(True)

    def _overview_dirty(self):
        """Layers or edges added, removed or moved: the overview's batches are made again."""
        self._lines = self._blocks = self._selected_rects = None
        if self._overview:
            self.update()  # its items paint nothing, so Qt would not repaint their area

    def _selection_dirty(self):
        """Connected first to selectionChanged: what was selected is asked again (unless
        select_nodes just said it)."""
        if self._selection_set:
            self._selection_set = False
        else:
            self._selection = None
        self._selected_rects = None
        if self._overview:
            self.update()

    def overview_blocks(self) -> tuple[dict, QPainterPath]:
        """({family: path of its layers' rectangles}, path of the layers in error) in scene
        coordinates, cached until the layout changes (the overview and the minimap fill these).
        One path per colour: no Python object per layer, and one fill call."""
        if self._blocks is None:
            by_family: dict[str, QPainterPath] = {}
            adders: dict = {}  # each family's bound addRect
            bad = _rects_path()
            placed = self.design.nodes if self.design is not None else {}
            held = self._press_pos
            for nid, it in self.nodes.items():  # (_where inlined: 10,000 layers in 7 ms, not 12)
                add = adders.get(it.family)
                if add is None:
                    path = by_family[it.family] = _rects_path()
                    add = adders[it.family] = path.addRect
                node = placed.get(nid)
                if node is None or nid in held:
                    p = it.pos()
                    x, y = p.x(), p.y()
                else:
                    x, y = node.pos
                add(x, y, WIDTH, it.height)
                if it._err:
                    bad.addRect(x, y, WIDTH, it.height)
            self._blocks = (by_family, bad)
        return self._blocks

    def _where(self, nid: str, item) -> tuple:
        """A layer item's position: its node's (plain Python, no Qt call), or the item's own
        while the user drags it."""
        node = self.design.nodes.get(nid) if self.design is not None else None
        if node is None or nid in self._press_pos:
            p = item.pos()
            return p.x(), p.y()
        return node.pos

    def results_dirty(self):
        """Errors changed (the overview outlines layers in error)."""
        self._blocks = None
        if self._overview:
            self.update()

    @property
    def overview(self) -> bool:
        return self._overview

    def _overview_lines(self) -> QPainterPath:
        if self._lines is None:
            path = QPainterPath()
            move, line = path.moveTo, path.lineTo
            for it in self.edges.values():
                move(*it._a)
                line(*it._b)
            self._lines = path
        return self._lines

    def want_ports(self, item: NodeItem):
        """A layer painted in detail without port items: make them in the next event-loop turn
        (not inside the paint). Only what is on screen is ever asked for."""
        if self._exporting:
            return
        self._port_wanted[item.node_id] = item
        if not self._port_timer.isActive():
            self._port_timer.start()

    def _make_wanted_ports(self):
        wanted, self._port_wanted = self._port_wanted, {}
        for nid, item in wanted.items():
            if self.nodes.get(nid) is item:
                item.ensure_ports()

    def node_moved_live(self, item: NodeItem):
        self._refresh_edges(item.node_id)

    # -- selection ----------------------------------------------------------------------------
    def _selected(self) -> tuple:
        """(node ids, edges) selected: one walk over the selection per change, not one per
        question (the window, the inspector, delete and copy each ask; 10,000 items: 50 ms)."""
        if self._selection is None:
            ids, edges = [], []
            for it in self.selectedItems():
                if isinstance(it, NodeItem):
                    ids.append(it.node_id)
                elif isinstance(it, EdgeItem):
                    edges.append(it.edge)
            self._selection = (ids, edges)
        return self._selection

    def selected_node_ids(self) -> list[str]:
        ids = list(self._selected()[0])
        if self._want_selected:  # selected while their items were still being built
            ids += [n for n in self._want_selected if n not in self.nodes and n in self.design.nodes]
        return ids

    def selected_edges(self) -> list[Edge]:
        return list(self._selected()[1])

    def select_nodes(self, ids, center: bool = False):
        self.blockSignals(True)
        self.clearSelection()
        self._want_selected = set()
        chosen = []
        for nid in ids:
            item = self.nodes.get(nid)
            if item is not None and not item.isSelected():
                item.setSelected(True)
                chosen.append(nid)
            elif self.building:
                self._want_selected.add(nid)  # selected when its item is built
        self.blockSignals(False)
        self._selection, self._selection_set = (chosen, []), True  # what is selected: no walk to ask
        self.selectionChanged.emit()
        if center and ids and ids[0] in self.nodes and self.views():
            self.views()[0].ensureVisible(self.nodes[ids[0]], 80, 80)

    # -- estimate results ---------------------------------------------------------------------
    # A layer's and an edge's texts are composed when first needed — painted in detail, hovered,
    # asked by a test or an export — not for every item on every result: at 10,000 layers that
    # was half a second of formatting after each estimate (open, every batch change) for cards
    # nobody could read, zoomed out. What the overview shows (layers in error) and what changes
    # geometry (output ports, Block cards) is still applied to every item, in slices.
    def apply_result(self, analysis, report):
        """Paint results onto items: items shown in detail before are re-labelled (in slices on a
        big design); the rest compose their texts from this result when next asked."""
        self._result = (analysis, report)
        self.label_gen += 1
        self._label_ctx = None
        self.jobs.cancel("result")
        self.jobs.add("result", self._result_steps(analysis), now=True)
        if len(self.nodes) + len(self.edges) <= SYNC_RESULT:
            self.jobs.finish("result")

    def _context(self) -> tuple:
        """(rows by node id, batch, analysis infos, report, shape-label cache) of the result last
        applied, made once per result when the first item asks."""
        if self._label_ctx is None:
            analysis, report = self._result if self._result is not None else (None, None)
            rows = {r.id: r for r in report.layers} if report is not None else {}
            batch = report.settings.get("batch", 1) if report is not None else 1
            self._label_ctx = (rows, batch, analysis.nodes if analysis is not None else {}, report, {})
        return self._label_ctx

    def _result_steps(self, analysis):
        infos = analysis.nodes if analysis is not None else {}
        nodes = self.design.nodes if self.design is not None else {}
        for k, (nid, item) in enumerate(list(self.nodes.items())):
            if k % 32 == 0:
                yield
            if self.nodes.get(nid) is not item:
                continue
            info = infos.get(nid)
            err = info is not None and info.issue is not None and not info.issue.pending
            if err != item._err:
                item._err = err
                self.results_dirty()
                item.update()
            if info is not None and info.outputs and len(info.outputs) != item.n_outputs:
                item.set_outputs(len(info.outputs))
                self._refresh_edges(nid)
            if item._shown == 2 or (nodes[nid].type == "Block" if nid in nodes else False):
                self.fill_node(item)  # shown in detail before (its cache is stale), or it moves edges
        for k, (e, it) in enumerate(list(self.edges.items())):
            if k % 64 == 0:
                yield
            if it._shown and self.edges.get(e) is it:
                self.fill_edge(it)

    def fill_node(self, item: NodeItem, quiet: bool = False):
        """Compose ``item``'s texts from the last result (NodeItem asks, when they are needed).
        quiet: from inside its paint (no repaint asked for)."""
        item._lgen = self.label_gen
        rows, batch, infos, report, _ = self._context()
        nid = item.node_id
        if self.design is None or nid not in self.design.nodes:
            return
        info = infos.get(nid)
        row = rows.get(nid)
        key = (None if info is None else (info.issue and (info.issue.field, info.issue.message), info.blocked_by,
                                          tuple(o.shape for o in info.outputs)),  # (a block card shows them)
               None if row is None else (row.output_shape, row.params, row.activation_bytes, row.kept_bytes,
                                         row.param_bytes),
               block_key(self.design, nid, report))
        if getattr(item, "_result_key", None) == key:
            return
        item._result_key = key
        issue = blocked = pending = ""
        if info is not None:
            if info.issue is not None and info.issue.pending:
                pending = NOT_CONNECTED  # freshly dropped: not an error the user made
            elif info.issue is not None:
                f = info.issue.field
                issue = f"{f}: {info.issue.message}" if f not in ("props", "inputs", "type") else info.issue.message
            blocked = info.blocked_by or ""
        if row is not None:
            shape = shape_text(row.output_shape)
            params = f"{format_count(row.params)} params" if row.params else "no params"
            mem = row.activation_bytes + row.kept_bytes
            mem_text = format_bytes(mem) if mem else ""
            tip = (f"activations {format_bytes(row.activation_bytes)} · kept for backward "
                   f"{format_bytes(row.kept_bytes)} · weights {format_bytes(row.param_bytes)}")
        elif self.design.nodes[nid].type == "Block":
            shape, params, mem_text, tip = block_item_texts(self.design, nid, item, info, report, batch)
            if not quiet:
                self._refresh_edges(nid)
        else:
            shape = params = mem_text = tip = ""
        if bool(issue) != item._err:
            item._err = bool(issue)
            self.results_dirty()
        item.set_info(shape, params, mem_text, tip, issue, blocked, pending, quiet=quiet)

    def fill_edge(self, it: EdgeItem, quiet: bool = False):
        """Compose an edge's shape label from the last result (EdgeItem asks when it is needed)."""
        it._lgen = self.label_gen
        _, batch, infos, _, texts = self._context()
        e = it.edge
        info = infos.get(e.src)
        if info is not None and info.ok and e.src_port < len(info.outputs):
            shp = info.outputs[e.src_port].shape
            if e.src_port == 0:  # in the source framework's order (Keras: channels last)
                shp = shown_shape(self.design, e.src, shp)
            key = (batch, shp)
            if getattr(it, "_shape_key", None) != key:
                it._shape_key = key
                text = texts.get(key)
                if text is None:
                    text = texts[key] = shape_text([batch, *shp])
                it.set_label(text, quiet=quiet)
        else:
            it._shape_key = None
            it.set_label("", quiet=quiet)

    def mouseDoubleClickEvent(self, ev):
        it = self._item_at(ev.scenePos())
        while it is not None and not isinstance(it, NodeItem):
            it = it.parentItem()
        if isinstance(it, NodeItem) and self.design.nodes.get(it.node_id) is not None \
                and self.design.nodes[it.node_id].type == "Block":
            self.block_open.emit(it.node_id)  # open the definition (memdesigner/_qt/blocks/block_nav.py)
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
        if self._press_pos and ev.buttons() & Qt.LeftButton:  # dragging layers: their edges follow
            for nid in self._press_pos:
                item = self.nodes.get(nid)
                if item is not None and (item.pos().x(), item.pos().y()) != self._press_pos[nid]:
                    self._refresh_edges(nid)

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
            self.layout_changed.emit()

    # -- background grid and overview ---------------------------------------------------------
    def _draw_overview(self, painter, c):
        """All edges as one cosmetic aliased pass, the layers as rectangles one call per colour,
        then one-pixel outlines (cosmetic, so they show at any zoom) of layers in error and selected."""
        painter.setRenderHint(painter.RenderHint.Antialiasing, False)
        painter.setPen(QPen(c["edge"], 0))
        painter.drawPath(self._overview_lines())
        by_family, bad = self.overview_blocks()
        painter.setPen(_NO_PEN)
        for family, path in by_family.items():
            painter.setBrush(theme.family_color(family))
            painter.drawPath(path)
        painter.setBrush(_NO_BRUSH)
        ids = self._selected()[0]
        everything = bool(self.nodes) and len(ids) >= len(self.nodes)  # the colour batches are the outline
        if self._selected_rects is None:
            self._selected_rects = _rects_path()
            for nid in () if everything else ids:
                it = self.nodes.get(nid)
                if it is not None:
                    x, y = self._where(nid, it)
                    self._selected_rects.addRect(x, y, WIDTH, it.height)
        chosen = list(by_family.values()) if everything else [self._selected_rects]
        for paths, color in (([bad], QColor(theme.BAD_COLOR)), (chosen, c["select"])):
            # one-pixel cosmetic lines take Qt's fast aliased path: a 2-px pen went through the
            # stroker, 50 ms a frame with 10,000 layers selected
            painter.setPen(QPen(color, 0))
            for path in paths:
                if not path.isEmpty():
                    painter.drawPath(path)

    def helpEvent(self, ev):  # noqa: N802 (Qt's name)
        """Tooltips of layers and edges are composed when asked (NodeItem.toolTip)."""
        view = ev.widget().parentWidget() if ev.widget() is not None else None
        t = view.transform() if view is not None and hasattr(view, "transform") else QTransform()
        for it in self.items(ev.scenePos(), Qt.IntersectsItemShape, Qt.DescendingOrder, t):
            text = it.toolTip()
            if text:
                QToolTip.showText(ev.screenPos(), text, ev.widget())
                ev.setAccepted(True)
                return
        QToolTip.hideText()
        ev.setAccepted(False)

    def drawBackground(self, painter, rect):
        c = theme.canvas_colors()
        painter.fillRect(rect, c["bg"])
        scale = painter.transform().m11()
        if self._overview:
            self._draw_overview(painter, c)
            return
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

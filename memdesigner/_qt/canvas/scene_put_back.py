"""The canvas half of an undo of a delete (or a redo of a paste): the items the delete kept on the
scene's shelf (_qt/canvas/item_shelf.py) go back in one pass inside the undo, instead of ~2,000 new items
built in 12 ms slices over the next turns (60-80 ms of UI-thread work in a row at 1,000 layers).

A card whose node, wired inputs and scene (orientation, zoom level) are as when it was kept goes
back as it is — registered, then added and shown by C loops; an edge between two such cards keeps
its route. Anything else is brought up to date the way a new item would be made."""

from __future__ import annotations

from collections import deque

from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QGraphicsItem

_SHOW, _HIDE = QGraphicsItem.show, QGraphicsItem.hide
_PROBE = QRectF(0.0, 0.0, 0.001, 0.001)  # a query that makes the index take in new items


CHUNK = 64  # items put back between two checks of the slice's time budget


class PutBack:
    """GraphScene's put-back (a mixin: it works on the scene's own maps)."""

    def put_back_steps(self, nodes, edges, rest: list):
        """Steps that put the shelf's items for ``nodes`` and ``edges`` back (a generator for the
        scene's sliced build: 10,000 layers are still more than one slice); ``rest`` receives the
        (nodes, edges) that need new items (none, for an undo whose items were all kept)."""
        cards, items, flags, left = self.shelf.claim(nodes, edges)
        self.release(left)
        have = self.edges
        live = bool(have)  # (the undo of select all + Delete: no edge is on the canvas, none is hashed)
        wired: dict[str, int] = {}  # each layer's inputs among these edges: its card's port layout
        for k, e in enumerate(edges):
            if not live or e not in have:
                wired[e.dst] = wired.get(e.dst, 0) + 1
            if k % 1024 == 1023:
                yield
        same: set = set()  # ids put back unchanged: an edge between two of them keeps its route
        rest_nodes: list = []
        for k in range(0, len(nodes), CHUNK):
            self._put_back_nodes(nodes[k:k + CHUNK], cards[k:k + CHUNK], wired, flags, same, rest_nodes)
            yield
        for nid, k in wired.items():  # a layer that stayed and gets inputs back: its ports first
            item = self.nodes.get(nid)
            if item is not None and nid not in same and item.n_connected != len(self._adj_in(nid)) + k:
                counts = item._counts
                item.set_connected_inputs(len(self._adj_in(nid)) + k)
                if item._counts != counts:  # its ports moved: the edges it already had follow
                    self._refresh_edges(nid)
                self._overview_dirty()
        rest_edges: list = []
        for k in range(0, len(edges), CHUNK):
            self._put_back_edges(edges[k:k + CHUNK], items[k:k + CHUNK], same, flags, live, rest_edges)
            yield
        if self._overview:
            self.update()
        rest.extend((rest_nodes, rest_edges))

    def _put_back_nodes(self, nodes, cards, wired: dict, flags, same: set, rest: list):
        """A card goes back as it is if it shows its node (name, position, wired inputs) and the
        scene is as when it was kept (orientation, ports shown); else it is brought up to date."""
        mine, live, back, unused = self.design.nodes, self.nodes, [], []
        scene_same = flags == (self.vertical, self._detail)
        for n, item in zip(nodes, cards):
            if item is None:
                rest.append(n)
                continue
            nid = n.id
            if nid in live or mine.get(nid) is not n or item.type_name != n.type:
                unused.append(item)  # (on the canvas already, gone again, or not a card for it)
                rest.append(n)
                continue
            k = wired.get(nid, 0)
            if scene_same and item.n_connected == k and item.name == n.name and (item.x(), item.y()) == n.pos:
                self._node_item_added(item, n, quiet=True)
                back.append(item)
                same.add(nid)
            else:
                self._readd_node_item(item, n, k)
        self.release(unused)
        self._into_scene(back)
        want = self._want_selected  # (asked for while another build was still running)
        if want and any(it.node_id in want for it in back):
            was = self.signalsBlocked()
            self.blockSignals(True)  # one selection change when the build is done
            for it in back:
                if it.node_id in want:
                    it.setSelected(True)
            self.blockSignals(was)
            self._selection = None

    def _put_back_edges(self, edges, items, same: set, flags, live: bool, rest: list):
        """An edge between two cards put back unchanged keeps its route; the others are routed
        again where their ends moved. Edges without a kept item go to ``rest``."""
        nodes, have, vertical, back, unused = self.nodes, self.edges, self.vertical, [], []
        kept_vertical = flags[0] if flags is not None else not vertical  # (unknown: routed again)
        for e, item in zip(edges, items):
            if item is None:
                rest.append(e)
                continue
            if item.src_item is not nodes.get(e.src) or item.dst_item is not nodes.get(e.dst) \
                    or (live and e in have):
                unused.append(item)
                rest.append(e)
            elif kept_vertical == vertical and e.src in same and e.dst in same:
                self._edge_item_added(item, quiet=True)
                back.append(item)
            else:
                self._readd_edge_item(item, kept_vertical)
        self.release(unused)
        self._into_scene(back, hidden=self._overview)

    def _into_scene(self, items, hidden: bool = False):
        """Kept items shown again, by a C loop (they stayed in the scene and its index, hidden).
        One that is not in the scene (another path took it out) is added and indexed now, so no
        later turn takes them all in."""
        if not items:
            return
        out = [it for it in items if it.scene() is not self]
        if out:
            deque(map(self.addItem, out), maxlen=0)
            self.items(_PROBE)
        deque(map(_HIDE if hidden else _SHOW, items), maxlen=0)

    def _readd_node_item(self, item, node, n_connected: int):
        """A kept card back on the canvas, brought up to date with its node and the scene (what a
        new card would be made with): name, position, wired inputs, orientation, ports shown."""
        if item.name != node.name:
            item.set_name(node.name)
        if (item.x(), item.y()) != node.pos:
            item.setPos(*node.pos)
        if item.vertical != self.vertical:
            item.set_vertical(self.vertical)
        item.show_ports(self._detail)
        if item.n_connected != n_connected:
            item.set_connected_inputs(n_connected)
        if item.scene() is not self:
            self.addItem(item)
        item.setVisible(True)
        return self._node_item_added(item, node)

    def _readd_edge_item(self, item, vertical: bool):
        """A kept edge back: routed again if its ends moved or the orientation changed while it
        was off the canvas."""
        if vertical != self.vertical or item._ports() != (item._a, item._b):
            item.update_path()
        if item.scene() is not self:
            self.addItem(item)
        item.setVisible(not self._overview)
        self._edge_item_added(item)

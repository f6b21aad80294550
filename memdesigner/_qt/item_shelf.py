"""Canvas items of layers a bulk delete took out, kept — hidden, still in the scene and its index —
for its undo (and a paste's redo).

Showing a kept item again costs well under a microsecond and its registration a few; building it
again costs ~15-30 µs for a layer card and ~15-20 µs for an edge (their Python and C++ halves, the
port layout, the route), and taking an item out of the scene index and back in 3-40 µs more. The
undo of a 1,000-layer delete rebuilt ~2,000 items in slices, 60-80 ms of UI-thread work in a row;
with the items kept it is a few milliseconds inside the undo itself.

A kept layer item is only given back for the very Node object it was made for (an undo puts the
same objects back; a new layer with the same id gets a new card), and the scene brings what can
have changed meanwhile (name, position, wired inputs, orientation, zoom level) up to date.
"""

from __future__ import annotations

# at most this many kept items, or the last delete's if it had more (a whole 10,000-layer design:
# 22,000); the oldest go first. Kept items are hidden but still in the scene and its index.
SHELF_ITEMS = 5_000


class ItemShelf:
    """Items off the canvas, by node id (with the Node they show) and by edge."""

    def __init__(self, limit: int = SHELF_ITEMS):
        self.limit = limit
        self._nodes: dict = {}  # node id -> (Node, NodeItem, what it showed: see keep, batch)
        # id(Edge) -> (EdgeItem, vertical when kept, batch): an undo puts the very Edge objects back,
        # and id() is a C call where an Edge's hash is Python (three per edge were ~20 % of an undo)
        self._edges: dict = {}
        self._batch = 0  # which delete kept an entry: the oldest deletes' entries go first

    def __len__(self) -> int:
        return len(self._nodes) + len(self._edges)

    def keep(self, node_items, edge_items, vertical: bool, detail: bool) -> list:
        """Keep ``node_items`` [(Node, NodeItem)] and ``edge_items`` [EdgeItem] as the scene had them
        (``vertical``: its port orientation, ``detail``: ports shown). Each card remembers what it
        showed — (name, position, wired inputs, vertical, detail) — so an undo that finds all of it
        unchanged puts it back as it is. Returns the items let go to stay under the limit, oldest
        first, for the scene to take out and release in slices."""
        nodes, edges, gone = self._nodes, self._edges, []
        self._batch += 1
        batch = self._batch
        for node, item in node_items:
            old = nodes.pop(node.id, None)  # (a re-kept id goes to the young end)
            if old is not None and old[1] is not item:
                gone.append(old[1])  # another card of that id: it can never come back now
            nodes[node.id] = (node, item, (node.name, node.pos, item.n_connected, vertical, detail), batch)
        for item in edge_items:
            key = id(item.edge)  # (the item holds its Edge: the id stays its own while kept)
            old = edges.pop(key, None)
            if old is not None and old[0] is not item:
                gone.append(old[0])
            edges[key] = (item, vertical, batch)
        limit = max(self.limit, len(node_items) + len(edge_items))
        while len(nodes) + len(edges) > limit:
            oldest_node = next(iter(nodes.values()), None)
            oldest_edge = next(iter(edges.values()), None)
            if oldest_edge is not None and (oldest_node is None or oldest_edge[2] <= oldest_node[3]):
                gone.append(edges.pop(next(iter(edges)))[0])
            else:
                gone.append(nodes.pop(next(iter(nodes)))[1])
        return gone

    def has_node(self, node) -> bool:
        entry = self._nodes.get(node.id)
        return entry is not None and entry[0] is node

    def count(self, nodes) -> int:
        """How many of ``nodes`` have their cards kept here."""
        return sum(map(self.has_node, nodes))

    def take_node(self, node):
        """(item, what it showed when kept) made for this very Node object, or None: another
        object's card is never given back."""
        entry = self._nodes.pop(node.id, None)
        if entry is None or entry[0] is not node:
            if entry is not None:
                self._nodes[node.id] = entry  # another object of that id: left for its own undo
            return None
        return entry[1], entry[2]

    def take_edge(self, edge, src_item, dst_item):
        """(item, vertical when kept) of this very Edge object if it joins these very layer items,
        or None (an equal Edge made anew gets a new item)."""
        entry = self._edges.get(id(edge))
        if entry is None or entry[0].edge is not edge or entry[0].src_item is not src_item \
                or entry[0].dst_item is not dst_item:
            return None
        del self._edges[id(edge)]
        return entry[0], entry[1]

    def drop(self) -> list:
        """Forget everything kept (another design opened); returns the items to take out of the
        scene and release, edges first (each holds its two cards)."""
        gone = [e[0] for e in self._edges.values()] + [e[1] for e in self._nodes.values()]
        self._nodes, self._edges = {}, {}
        return gone

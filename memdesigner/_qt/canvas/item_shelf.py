"""Canvas items of layers a bulk delete took out, kept — hidden, still in the scene and its index —
for its undo (and a paste's redo).

Showing a kept item again costs well under a microsecond and its registration a few; building it
again costs ~15-30 µs for a layer card and ~15-20 µs for an edge (their Python and C++ halves, the
port layout, the route), and taking an item out of the scene index and back in 3-40 µs more. The
undo of a 1,000-layer delete rebuilt ~2,000 items in slices, 60-80 ms of UI-thread work in a row;
with the items kept it is a few milliseconds inside the undo itself.

A delete is kept as it came (its Node objects in the design's order, their cards, its edge items):
nothing per item at delete time, where a 10,000-layer delete is one UI-thread turn. Its undo puts
back the very same Node objects in the same order, which is one identity comparison per node; any
other restore looks cards up by node id (and a card is only ever given back for the very Node
object it was made for).
"""

from __future__ import annotations

from operator import is_

# at most this many kept items, or the last delete's if it had more (a whole 10,000-layer design:
# 22,000); the oldest deletes go first. Kept items are hidden but still in the scene and its index.
SHELF_ITEMS = 5_000


class Kept:
    """One delete's items: ``nodes`` (Node objects, as the design listed them), ``cards`` (their
    items, None where a node had none yet), ``edges`` (edge items); the scene's port orientation
    and zoom level (ports shown) then."""

    __slots__ = ("nodes", "cards", "edges", "vertical", "detail", "_ids")

    def __init__(self, nodes, cards, edges, vertical: bool, detail: bool):
        self.nodes, self.cards, self.edges = list(nodes), list(cards), list(edges)
        self.vertical, self.detail = vertical, detail
        self._ids: dict | None = None  # node id -> place, made when a restore asks by id

    def __len__(self) -> int:
        return len(self.cards) - self.cards.count(None) + len(self.edges)

    def items(self) -> list:
        """Its items, edges first (each holds its two cards)."""
        return self.edges + [c for c in self.cards if c is not None]

    def place(self, node) -> int | None:
        if self._ids is None:
            self._ids = {n.id: k for k, n in enumerate(self.nodes)}
        k = self._ids.get(node.id)
        return k if k is not None and self.nodes[k] is node and self.cards[k] is not None else None


class ItemShelf:
    """The kept deletes, oldest first."""

    def __init__(self, limit: int = SHELF_ITEMS):
        self.limit = limit
        self._kept: list[Kept] = []

    def __len__(self) -> int:
        return sum(map(len, self._kept))

    def __bool__(self) -> bool:
        return bool(self._kept)

    def keep(self, nodes, cards, edges, vertical: bool, detail: bool) -> list:
        """Keep one delete's items as they are (see Kept). Returns the items of older deletes let
        go to stay under the limit, for the scene to take out and release in slices."""
        self._kept.append(Kept(nodes, cards, edges, vertical, detail))
        gone = []
        while len(self._kept) > 1 and len(self) > self.limit:
            gone += self._kept.pop(0).items()
        return gone

    def claim(self, nodes, edges) -> tuple:
        """The kept items for a restore of ``nodes`` and ``edges`` (lists): (cards, edge items,
        flags, left over). cards and edge items run parallel to ``nodes`` and ``edges`` (None:
        nothing kept for it; an edge item is the one kept for that very Edge object, or None).
        flags: (vertical, detail) of the scene when they were kept if they all come from one
        delete restored whole — the undo of that delete, the common case — else None (then every
        item is to be checked against the scene). left over: that delete's items the restore did
        not ask for (to release)."""
        whole = next((k for k in reversed(self._kept)
                      if len(k.nodes) == len(nodes) and all(map(is_, k.nodes, nodes))), None)
        if whole is not None:
            self._kept.remove(whole)
            # by id(): a kept item holds its Edge, so no other live Edge has that id
            by_edge = {id(it.edge): it for it in whole.edges}
            items = [by_edge.pop(id(e), None) for e in edges]
            return whole.cards, items, (whole.vertical, whole.detail), list(by_edge.values())
        cards = []
        for n in nodes:
            card = None
            for k in reversed(self._kept):
                place = k.place(n)
                if place is not None:
                    card, k.cards[place] = k.cards[place], None
                    break
            cards.append(card)
        by_edge = {}
        for k in self._kept:
            by_edge.update((id(it.edge), (k, it)) for it in k.edges)
        items = []
        for e in edges:
            found = by_edge.get(id(e))
            if found is not None:
                found[0].edges.remove(found[1])
                items.append(found[1])
            else:
                items.append(None)
        self._kept = [k for k in self._kept if len(k.edges) or any(c is not None for c in k.cards)]
        return cards, items, None, []

    def count(self, nodes) -> int:
        """How many of ``nodes`` (a list) have their cards kept here (cheap for an undo's)."""
        if any(len(k.nodes) == len(nodes) and all(map(is_, k.nodes, nodes)) for k in self._kept):
            return len(nodes)
        return sum(1 for n in nodes if any(k.place(n) is not None for k in self._kept))

    def drop(self) -> list:
        """Forget everything kept (another design opened); returns the items to take out of the
        scene and release, edges first."""
        gone = [it for k in self._kept for it in k.edges] + [c for k in self._kept for c in k.cards if c is not None]
        self._kept = []
        return gone

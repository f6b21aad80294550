"""The design: a graph of layer nodes. Pure Python; views subscribe to changes with callbacks.

Nodes carry a stable id, a layer type from the registry, a display name, property values, a
canvas position and an optional per-layer weight bit width. Edges connect an output port of one
node to an input port of another.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from memdesigner.model import registry

# Node.keep_until of an output a Python reference cycle holds (Keras's merge layers on the PyTorch
# backend): freed only when the cyclic garbage collector runs
GC_HELD = "*gc"
HELD = " (held by a Python name)"  # the end of the op of a module output only a Python name holds


def is_held(node) -> bool:
    """A Generic node the PyTorch importer made for a module output a Python name holds
    (importers/_torch_held.py): the exporter binds it to a name again."""
    return node.type == "Generic" and str(node.props.get("op", "")).endswith(HELD)

@dataclass
class Node:
    id: str
    type: str
    name: str = ""
    props: dict = field(default_factory=dict)
    pos: tuple = (0.0, 0.0)
    bits: int | None = None  # weight bit width (1, 2, 4, 8, 16, 32); None: the run's dtype
    rev: int = 0  # bumped by every edit through Design, so analyses can be cached per node
    scope: str = ""  # module calls this op ran in, '/'-joined ("features/features.3"), from importers
    keep_until: str = ""  # a Python variable holds this node's output until that node ran (importers)
    tied: dict = field(default_factory=dict)  # param name -> "node_id.param" it shares storage with
    fused: str = ""  # inference runs this node's group as one fused kernel (TransformerEncoderLayer)
    # how the source framework orders this node's output, when it differs from the internal
    # channels-first order: "" follows the design (channels_last: image tensors are shown channels
    # last), "moved" shows the first per-sample dimension last (a Keras Conv1D's (C, L) inside is
    # (L, C) in Keras), "as_is" shows it as it is (a tensor already permuted to channels last)
    layout: str = ""
    output: bool = False  # the model returns this value even though other layers read it too (importers)
    trainable: bool = True  # False: its parameters are frozen (requires_grad=False)

    def __post_init__(self):
        if not self.name:
            self.name = self.id

    @property
    def layer(self) -> registry.LayerType:
        return registry.get(self.type)


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    src_port: int = 0
    dst_port: int = 0


BITS = (1, 2, 4, 8, 16, 32)


class Design:
    """A mutable graph with change notifications.

    Listeners get ``(event, payload)``: node_added, node_removed, node_changed, node_moved,
    edge_added, edge_removed, reset, and for bulk edits (one pass over a big selection)
    nodes_removed / nodes_added with ``(nodes, edges)``, nodes_moved with the nodes. The model knows nothing about Qt.
    """

    def __init__(self, name: str = "untitled", channels_last: bool = False):
        self.name = name
        self.channels_last = channels_last
        self.nodes: dict[str, Node] = {}
        self._edges: list[Edge] = []
        self._index: _EdgeIndex | None = None
        self.settings: dict = {}
        self.blocks: dict = {}  # name -> model.blocks.BlockDef (instances are "Block" nodes)
        self.param_order: list = []  # "node name.param" in model.parameters() order (engine/param_order.py)
        self.library_versions: dict = {}  # library -> version the graph follows (torch import, HF config)
        self.verified: dict = {}  # what PyTorch measured of the imported code (importers/_torch_check.py)
        self._listeners: list[Callable[[str, Any], None]] = []
        self._counter = itertools.count(1)

    @property
    def edges(self) -> list[Edge]:
        """The edges in insertion order. Change them through the methods below (or assign a new
        list), so the successor index behind check_edge stays in step."""
        return self._edges

    @edges.setter
    def edges(self, value: list[Edge]) -> None:
        self._edges = value
        self._index = None

    def _edge_index(self) -> _EdgeIndex:
        if self._index is None:
            self._index = _EdgeIndex(self._edges)
        return self._index

    # -- notifications -------------------------------------------------------------------
    def subscribe(self, fn: Callable[[str, Any], None]) -> None:
        self._listeners.append(fn)

    def unsubscribe(self, fn) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _emit(self, event: str, payload: Any = None) -> None:
        for fn in list(self._listeners):
            fn(event, payload)

    # -- editing -------------------------------------------------------------------------
    def new_id(self, type_name: str) -> str:
        base = type_name.lower()
        while True:
            cand = f"{base}{next(self._counter)}"
            if cand not in self.nodes:
                return cand

    def add_node(self, type_name: str, props: dict | None = None, *, id: str | None = None,
                 name: str | None = None, pos=(0.0, 0.0), bits: int | None = None, scope: str = "",
                 keep_until: str = "", tied: dict | None = None, fused: str = "", layout: str = "",
                 output: bool = False, trainable: bool = True) -> Node:
        lt = registry.get(type_name)
        nid = id or self.new_id(lt.name)
        if nid in self.nodes:
            raise ValueError(f"duplicate node id {nid!r}")
        values = lt.defaults()
        values.update(props or {})
        node = Node(nid, lt.name, name or nid, values, tuple(pos), bits, scope=scope, keep_until=keep_until,
                    tied=dict(tied or {}), fused=fused, layout=layout, output=bool(output),
                    trainable=bool(trainable))
        self.nodes[nid] = node
        self._emit("node_added", node)
        return node

    def insert_node(self, node: Node, index: int | None = None) -> None:
        """Re-insert a node object (undo of a delete) at its old place in the node order: the
        order decides which of two ready branches runs first, so it changes the estimate."""
        if node.id in self.nodes:
            raise ValueError(f"duplicate node id {node.id!r}")
        if index is None or index >= len(self.nodes):
            self.nodes[node.id] = node
        else:
            items = list(self.nodes.items())
            items.insert(index, (node.id, node))
            self.nodes.clear()
            self.nodes.update(items)
        self._emit("node_added", node)

    def remove_node(self, nid: str) -> tuple[Node, list[Edge]]:
        node = self.nodes[nid]
        removed = [e for e in self.edges if e.src == nid or e.dst == nid]
        for e in reversed(removed):
            self.remove_edge(e)
        del self.nodes[nid]
        self._emit("node_removed", node)
        return node, removed

    def remove_nodes(self, node_ids, edges=()) -> tuple[list, list]:
        """Remove many nodes (with their edges) and extra edges in one pass over the node and edge
        lists, with one notification: deleting a 10,000-node selection one node at a time is
        quadratic. Returns ([(index, node)], [(index, edge)]) for restore_nodes (undo)."""
        ids = {n for n in node_ids if n in self.nodes}
        extra = set(edges)
        if len(ids) == len(self.nodes) and ids:  # everything (select all, delete): no tests at all
            node_entries, edge_entries = list(enumerate(self.nodes.values())), list(enumerate(self._edges))
            self.nodes.clear()
            self._edges.clear()
        else:
            node_entries = [(i, n) for i, n in enumerate(self.nodes.values()) if n.id in ids]
            # one pass that keeps or takes each edge: no Edge is hashed unless extra edges were given
            # (a set of the gone edges and a second pass was ~60 % of deleting 10,000 layers)
            kept, edge_entries = [], []
            for i, e in enumerate(self._edges):
                if e.src in ids or e.dst in ids or (extra and e in extra):
                    edge_entries.append((i, e))
                else:
                    kept.append(e)
            if not node_entries and not edge_entries:
                return [], []
            self._edges[:] = kept
            for nid in ids:
                del self.nodes[nid]
        self._index = None
        self._emit("nodes_removed", ([n for _, n in node_entries], [e for _, e in edge_entries]))
        return node_entries, edge_entries

    def restore_nodes(self, node_entries, edge_entries) -> None:
        """Undo of remove_nodes: every node and edge back at its old place in the orders."""
        if not self.nodes or (node_entries and node_entries[0][0] >= len(self.nodes)):
            # the undo of select all + Delete (the entries are the whole order), or a paste (they
            # go after every node): no rebuild of the order (a paste of 100 layers into 10,000
            # rebuilt it, 36 ms)
            self.nodes.update((n.id, n) for _, n in node_entries)
        else:
            items = _merged(list(self.nodes.items()), [(i, (n.id, n)) for i, n in node_entries])
            self.nodes.clear()
            self.nodes.update(items)
        self._edges[:] = [e for _, e in edge_entries] if not self._edges else _merged(self._edges, edge_entries)
        self._index = None
        self._emit("nodes_added", ([n for _, n in node_entries], [e for _, e in edge_entries]))

    def node_index(self, nid: str) -> int:
        return list(self.nodes).index(nid)

    def set_prop(self, nid: str, key: str, value: Any) -> None:
        self.nodes[nid].props[key] = value
        self.nodes[nid].rev += 1
        self._emit("node_changed", self.nodes[nid])

    def set_props(self, nid: str, props: dict) -> None:
        self.nodes[nid].props = dict(props)
        self.nodes[nid].rev += 1
        self._emit("node_changed", self.nodes[nid])

    def set_name(self, nid: str, name: str) -> None:
        self.nodes[nid].name = name
        self._emit("node_changed", self.nodes[nid])

    def set_bits(self, nid: str, bits: int | None) -> None:
        if bits is not None and bits not in BITS:
            raise ValueError(f"bits must be one of {BITS}")
        self.nodes[nid].bits = bits
        self.nodes[nid].rev += 1
        self._emit("node_changed", self.nodes[nid])

    def set_trainable(self, nid: str, trainable: bool) -> None:
        """Freeze (False) or unfreeze a layer's parameters."""
        self.nodes[nid].trainable = bool(trainable)
        self.nodes[nid].rev += 1
        self._emit("node_changed", self.nodes[nid])

    def move_node(self, nid: str, pos) -> None:
        self.nodes[nid].pos = (float(pos[0]), float(pos[1]))
        self._emit("node_moved", self.nodes[nid])

    def move_nodes(self, moves: dict) -> None:
        """Many positions at once (auto layout, undo of a drag) with one notification."""
        moved = []
        for nid, pos in moves.items():
            if nid in self.nodes:
                self.nodes[nid].pos = (float(pos[0]), float(pos[1]))
                moved.append(self.nodes[nid])
        if moved:
            self._emit("nodes_moved", moved)

    def add_edge(self, src: str, dst: str, src_port: int = 0, dst_port: int = 0, *,
                 index: int | None = None, check_cycle: bool = True) -> Edge:
        """index: where in the edge order (undo puts an edge back where it was). check_cycle=False
        skips the reachability search; a loader that adds many edges checks once with
        find_cycle_edge() instead (one search per edge is quadratic on long chains)."""
        problem = self.check_edge(src, dst, src_port, dst_port, check_cycle=check_cycle)
        if problem:
            raise ValueError(problem)
        e = Edge(src, dst, src_port, dst_port)
        if index is None:
            self._edges.append(e)
        else:
            self._edges.insert(index, e)
        if self._index is not None:
            self._index.add(e)
        self._emit("edge_added", e)
        return e

    def remove_edge(self, e: Edge) -> int:
        """Returns the edge's place in the edge order, for undo."""
        i = self._edges.index(e)
        del self._edges[i]
        if self._index is not None:
            self._index.discard(e)
        self._emit("edge_removed", e)
        return i

    def check_edge(self, src: str, dst: str, src_port: int = 0, dst_port: int = 0, *,
                   check_cycle: bool = True) -> str | None:
        """Why this connection cannot be made, or None."""
        if src not in self.nodes:
            return f"no node {src!r}"
        if dst not in self.nodes:
            return f"no node {dst!r}"
        if src == dst:
            return "a node cannot feed itself"
        lt = self.nodes[dst].layer
        if lt.max_inputs == 0:
            return f"{lt.name} takes no inputs"
        if lt.max_inputs is not None and dst_port >= lt.max_inputs:
            return f"{lt.name} takes at most {lt.max_inputs} input(s)"
        index = self._edge_index()
        if (dst, dst_port) in index.taken:
            return f"input {dst_port} of {self.nodes[dst].name} is already connected"
        if check_cycle and self._reaches(dst, src):
            return "this connection would make a cycle"
        return None

    def find_cycle_edge(self) -> int | None:
        """The index of the first edge that closes a cycle (None: acyclic), in O((V + E) log E):
        a binary search over edge prefixes, each checked once by Kahn's algorithm."""
        if _acyclic(self.nodes, self._edges):
            return None
        lo, hi = 0, len(self._edges) - 1  # edges[:hi + 1] has a cycle; find the shortest such prefix
        while lo < hi:
            mid = (lo + hi) // 2
            if _acyclic(self.nodes, self._edges[:mid + 1]):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _reaches(self, a: str, b: str) -> bool:
        succ = self._edge_index().succ
        stack, seen = [a], {a}
        while stack:
            n = stack.pop()
            if n == b:
                return True
            for m in succ.get(n, ()):
                if m not in seen:
                    seen.add(m)
                    stack.append(m)
        return False

    def clear(self) -> None:
        self.nodes.clear()
        self._edges.clear()
        self._index = None
        self._emit("reset", None)

    # -- queries -------------------------------------------------------------------------
    def inputs_of(self, nid: str) -> list[Edge]:
        return sorted((e for e in self.edges if e.dst == nid), key=lambda e: e.dst_port)

    def consumers_of(self, nid: str) -> list[Edge]:
        return [e for e in self.edges if e.src == nid]

    def topo_order(self) -> list[str]:
        """The execution order: among the nodes whose inputs are ready, the one inserted first
        runs next. An imported design (nodes added in the order the model ran them) keeps its
        order, and of two parallel branches the earlier-drawn one runs to its end first, as
        eager PyTorch does. Raises ValueError naming a node on a cycle."""
        index = {n: i for i, n in enumerate(self.nodes)}
        # drawn or imported in execution order (the common case): every edge points forward, and
        # then the insertion order is exactly what the ready-queue below would produce
        get = index.get
        for e in self.edges:
            a, b = get(e.src), get(e.dst)
            if a is not None and b is not None and a >= b:
                break
        else:
            return list(self.nodes)
        indeg = dict.fromkeys(self.nodes, 0)
        succ: dict[str, list[str]] = {n: [] for n in self.nodes}
        for e in self.edges:
            if e.src in indeg and e.dst in indeg:
                indeg[e.dst] += 1
                succ[e.src].append(e.dst)
        ready = [index[n] for n, d in indeg.items() if d == 0]
        heapq.heapify(ready)
        names = list(self.nodes)
        order = []
        while ready:
            n = names[heapq.heappop(ready)]
            order.append(n)
            for m in succ[n]:
                indeg[m] -= 1
                if indeg[m] == 0:
                    heapq.heappush(ready, index[m])
        if len(order) != len(self.nodes):
            stuck = next(n for n, d in indeg.items() if d > 0)
            raise ValueError(f"{stuck}: the graph has a cycle through this node")
        return order

    def detached_copy(self) -> Design:
        """Nodes, edges and settings copied (no JSON round trip, no schema check): for the engine's
        transforms and the window's worker snapshot, which run on every estimate or edit."""
        d = Design(self.name, self.channels_last)
        d.settings = dict(self.settings)
        d.param_order = self.param_order
        d.library_versions = self.library_versions
        d.verified = self.verified
        d.nodes = {nid: _node_copy(n) for nid, n in self.nodes.items()}
        d.edges = list(self.edges)
        return d

    def __len__(self) -> int:
        return len(self.nodes)



_NODE_FIELDS = tuple(f.name for f in fields(Node))
_N_FIELDS = len(_NODE_FIELDS)
_node_new = object.__new__


def _node_copy(n: Node) -> Node:
    """A fresh Node with the same field values, its own props and tied dicts and rev 0 (as
    ``Node(...)`` with every field given, at a fraction of the cost: 10,000 nodes per snapshot).
    What else the node carries (analysis' memo of its coerced props) stays behind."""
    d = n.__dict__.copy()
    d.pop("_coerced", None)
    if len(d) != _N_FIELDS:
        d = {k: d[k] if k in d else getattr(n, k) for k in _NODE_FIELDS}
    d["props"] = dict(d["props"])
    d["tied"] = dict(d["tied"])
    d["rev"] = 0
    c = _node_new(Node)
    c.__dict__ = d
    return c


class _EdgeIndex:
    """Successors and taken input ports, kept in step with the edge list so that checking one
    new edge costs what it reaches rather than a pass over all edges."""

    def __init__(self, edges: list[Edge]):
        self.succ: dict[str, list[str]] = {}
        self.taken: set[tuple[str, int]] = set()
        for e in edges:
            self.add(e)

    def add(self, e: Edge) -> None:
        self.succ.setdefault(e.src, []).append(e.dst)
        self.taken.add((e.dst, e.dst_port))

    def discard(self, e: Edge) -> None:
        succ = self.succ.get(e.src)
        if succ and e.dst in succ:
            succ.remove(e.dst)
        self.taken.discard((e.dst, e.dst_port))


def _merged(kept: list, entries) -> list:
    """``kept`` with each (index, item) of ``entries`` back at its index (ascending indices)."""
    if not entries:
        return list(kept)
    first = entries[0][0]  # (nothing before the first entry moves: copied in C)
    at = dict(entries)
    rest = iter(kept[first:])
    return kept[:first] + [at[i] if i in at else next(rest) for i in range(first, len(kept) + len(at))]


def _acyclic(nodes, edges) -> bool:
    """Kahn's algorithm, O(V + E)."""
    indeg = dict.fromkeys(nodes, 0)
    succ: dict[str, list[str]] = {}
    for e in edges:
        if e.src in indeg and e.dst in indeg:
            indeg[e.dst] += 1
            succ.setdefault(e.src, []).append(e.dst)
    ready = [n for n, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for m in succ.get(n, ()):
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    return seen == len(indeg)

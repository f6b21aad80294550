"""Undoable edits. Every change the window makes to the design is one of these commands, and each
command only calls Design methods, so the canvas, the inspector and the estimate follow through
the design's change notifications."""

from __future__ import annotations

from PySide6.QtGui import QUndoCommand

from memdesigner._qt.document import undo_bursts
from memdesigner.model.design import Design, Edge, Node


class AddNodeCmd(QUndoCommand):
    def __init__(self, design: Design, type_name: str, props: dict | None = None, pos=(0.0, 0.0),
                 name: str | None = None, bits: int | None = None, node_id: str | None = None,
                 fields: dict | None = None):
        """``fields``: Design.add_node's other keywords (scope, keep_until, tied, ...; a paste)."""
        super().__init__(f"Add {type_name}")
        self.design = design
        self.args = (type_name, dict(props or {}), tuple(pos), name, bits, node_id)
        self.fields = dict(fields or {})
        self.node: Node | None = None

    def redo(self):
        if self.node is None:
            t, props, pos, name, bits, nid = self.args
            self.node = self.design.add_node(t, props, id=nid, name=name, pos=pos, bits=bits, **self.fields)
        else:
            self.design.insert_node(self.node)

    def undo(self):
        self.design.remove_node(self.node.id)


class RemoveNodeCmd(QUndoCommand):
    """Removes a node with its edges; undo puts both back exactly, each at its old place in the
    node and edge order (the order picks which ready branch runs first, so it moves the peak)."""

    def __init__(self, design: Design, node_id: str):
        super().__init__(f"Delete {design.nodes[node_id].name}")
        self.design = design
        self.node_id = node_id
        self.node: Node | None = None
        self.index = 0
        self.edges: list[tuple[int, Edge]] = []

    def redo(self):
        nid = self.node_id
        self.index = self.design.node_index(nid)
        self.edges = [(i, e) for i, e in enumerate(self.design.edges) if e.src == nid or e.dst == nid]
        self.node, _ = self.design.remove_node(nid)

    def undo(self):
        self.design.insert_node(self.node, self.index)
        for i, e in self.edges:  # ascending: each lands at its old index
            self.design.add_edge(e.src, e.dst, e.src_port, e.dst_port, index=i)


class RemoveNodesCmd(QUndoCommand):
    """Deletes a selection (nodes with their edges, plus selected edges) as one step in one pass
    (Design.remove_nodes); undo restores every node and edge at its old place in the orders."""

    def __init__(self, design: Design, node_ids, edges=(), text: str = "Delete"):
        super().__init__(text)
        self.design = design
        self.node_ids = list(node_ids)
        self.extra = list(edges)
        self.entries: tuple[list, list] = ([], [])

    def redo(self):
        self.entries = self.design.remove_nodes(self.node_ids, self.extra)

    def undo(self):
        self.design.restore_nodes(*self.entries)


class AddNodesCmd(QUndoCommand):
    """Adds many nodes and edges (a paste) at the end of the orders in one notification; undo
    takes them out in one pass (Design.remove_nodes)."""

    def __init__(self, design: Design, nodes: list, edges: list, text: str = "Add layers"):
        super().__init__(text)
        self.design = design
        self.nodes = list(nodes)
        self.edges = list(edges)
        self.entries: tuple[list, list] | None = None

    def redo(self):
        if self.entries is None:
            n, m = len(self.design.nodes), len(self.design.edges)
            self.entries = ([(n + k, node) for k, node in enumerate(self.nodes)],
                            [(m + k, e) for k, e in enumerate(self.edges)])
        self.design.restore_nodes(*self.entries)

    def undo(self):
        self.entries = self.design.remove_nodes([n.id for n in self.nodes])


class AddEdgeCmd(QUndoCommand):
    def __init__(self, design: Design, src: str, dst: str, src_port: int = 0, dst_port: int = 0):
        super().__init__("Connect")
        self.design = design
        self.edge = Edge(src, dst, src_port, dst_port)

    def redo(self):
        e = self.edge
        self.design.add_edge(e.src, e.dst, e.src_port, e.dst_port)

    def undo(self):
        self.design.remove_edge(self.edge)


class RemoveEdgeCmd(QUndoCommand):
    def __init__(self, design: Design, edge: Edge):
        super().__init__("Disconnect")
        self.design = design
        self.edge = edge
        self.index: int | None = None

    def redo(self):
        self.index = self.design.remove_edge(self.edge)

    def undo(self):
        e = self.edge
        self.design.add_edge(e.src, e.dst, e.src_port, e.dst_port, index=self.index)


class SetPropCmd(QUndoCommand):
    """``burst``: the user's edit burst (_qt/document/undo_bursts.py); consecutive changes of the same
    field of the same node in one burst are one undo step. None: never merged."""

    def __init__(self, design: Design, node_id: str, key: str, value, burst: int | None = None):
        super().__init__(f"Set {key}")
        self.design = design
        self.node_id = node_id
        self.key = key
        self.new = value
        self.old = design.nodes[node_id].props.get(key)
        self.burst = burst

    def redo(self):
        self.design.set_prop(self.node_id, self.key, self.new)

    def undo(self):
        self.design.set_prop(self.node_id, self.key, self.old)

    def id(self) -> int:
        return -1 if self.burst is None else undo_bursts.MERGE_ID

    def mergeWith(self, other) -> bool:
        if not isinstance(other, SetPropCmd) or other.burst != self.burst or \
                (other.design, other.node_id, other.key) != (self.design, self.node_id, self.key):
            return False
        self.new = other.new
        self.setObsolete(self.new == self.old)  # stepped back to where it started: no step at all
        return True


class SetNameCmd(QUndoCommand):
    def __init__(self, design: Design, node_id: str, name: str):
        super().__init__("Rename")
        self.design, self.node_id, self.new = design, node_id, name
        self.old = design.nodes[node_id].name

    def redo(self):
        self.design.set_name(self.node_id, self.new)

    def undo(self):
        self.design.set_name(self.node_id, self.old)


class SetBitsCmd(QUndoCommand):
    def __init__(self, design: Design, node_id: str, bits: int | None):
        super().__init__("Set precision")
        self.design, self.node_id, self.new = design, node_id, bits
        self.old = design.nodes[node_id].bits

    def redo(self):
        self.design.set_bits(self.node_id, self.new)

    def undo(self):
        self.design.set_bits(self.node_id, self.old)


class MoveNodesCmd(QUndoCommand):
    """Positions before and after a drag (one step for a whole selection)."""

    def __init__(self, design: Design, moves: dict, text: str = "Move"):
        super().__init__(text)
        self.design = design
        self.moves = moves  # id -> (old_pos, new_pos)

    def redo(self):
        self._move(1)

    def undo(self):
        self._move(0)

    def _move(self, which: int):
        if len(self.moves) > 1:  # one notification for a whole layout (10,000 nodes)
            self.design.move_nodes({nid: m[which] for nid, m in self.moves.items()})
            return
        for nid, m in self.moves.items():
            if nid in self.design.nodes:
                self.design.move_node(nid, m[which])

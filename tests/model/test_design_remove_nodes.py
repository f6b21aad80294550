"""Design.remove_nodes in one pass without hashing an edge: deleting a selection keeps or takes each
edge as it walks them (a set of the gone edges and a second walk over all 12,000 was most of deleting
10,000 layers); undo (restore_nodes) puts every node and edge back at its place in the orders."""

import pytest

from memdesigner.model import design as design_mod
from memdesigner.model.design import Design, Edge


def _chain(n: int) -> Design:
    d = Design("c")
    prev = skip = d.add_node("Input", {"shape": (4, 8)}, id="x").id
    for i in range(n):
        a = d.add_node("Linear", {"out_features": 8}, id=f"fc{i}").id
        d.add_edge(prev, a)
        b = d.add_node("Add", id=f"add{i}").id
        d.add_edge(a, b, 0, 0)
        d.add_edge(skip, b, 0, 1)
        prev = skip = b
    return d


@pytest.fixture
def no_edge_hashing(monkeypatch):
    def refuse(self):
        raise AssertionError("an Edge was hashed")

    monkeypatch.setattr(design_mod.Edge, "__hash__", refuse)


@pytest.mark.parametrize("which", ["half", "all"])
def test_removing_layers_hashes_no_edge_and_undo_restores_the_orders(which, no_edge_hashing):
    d = _chain(40)
    nodes, edges = list(d.nodes), list(d.edges)
    ids = nodes[1::2] if which == "half" else nodes
    node_entries, edge_entries = d.remove_nodes(ids)
    gone = set(ids)
    assert list(d.nodes) == [n for n in nodes if n not in gone]
    assert d.edges == [e for e in edges if e.src not in gone and e.dst not in gone]
    assert [e for _, e in edge_entries] == [e for e in edges if e.src in gone or e.dst in gone]
    assert [i for i, _ in node_entries] == [i for i, n in enumerate(nodes) if n in gone]
    d.restore_nodes(node_entries, edge_entries)
    assert list(d.nodes) == nodes and d.edges == edges


def test_extra_edges_are_taken_too():
    d = _chain(3)
    extra = Edge("x", "add0", 0, 1)
    assert extra in d.edges
    _, edge_entries = d.remove_nodes(["fc2"], [extra])
    assert extra not in d.edges and (d.edges.count(extra) == 0)
    assert {e for _, e in edge_entries} == {extra, Edge("add1", "fc2"), Edge("fc2", "add2", 0, 0)}


def test_a_window_delete_of_layers_hashes_no_edge(no_edge_hashing):
    from PySide6.QtGui import QUndoStack

    from memdesigner._qt.canvas import graph_ops

    d = _chain(10)
    stack = QUndoStack()
    graph_ops.delete(d, stack, ["fc3", "add3"], [])
    assert "fc3" not in d.nodes and all(e.src != "fc3" and e.dst != "fc3" for e in d.edges)


def test_restoring_nodes_after_the_last_one_walks_only_what_comes_back(monkeypatch):
    """A paste's redo (and the undo of deleting the last layers) appends: the order before the
    first restored entry is not rebuilt element by element (a paste of 100 layers into a
    10,000-layer design rebuilt both orders, 36 ms)."""
    d = _chain(50)
    before_nodes, before_edges = list(d.nodes), list(d.edges)
    tail = list(d.nodes)[-6:]
    entries = d.remove_nodes(tail)
    walked = []  # per merge: whether every kept element was walked in Python
    real = design_mod._merged

    class Kept(list):
        def __iter__(self):
            walked[-1] = True
            return super().__iter__()

    def merged(kept, entries):
        walked.append(False)
        return real(Kept(kept), entries)

    monkeypatch.setattr(design_mod, "_merged", merged)
    d.restore_nodes(*entries)
    assert list(d.nodes) == before_nodes and list(d.edges) == before_edges
    assert walked == [False]  # the edges: their tail alone; the nodes: not merged at all
    middle = d.remove_nodes(["fc10", "add10"])  # in the middle: the order is merged from there
    walked.clear()
    d.restore_nodes(*middle)
    assert list(d.nodes) == before_nodes and list(d.edges) == before_edges

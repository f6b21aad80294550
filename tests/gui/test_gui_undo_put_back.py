"""The undo of a delete puts the deleted layers' own items back (_qt/canvas/item_shelf.py,
_qt/canvas/scene_put_back.py) instead of building new ones, and the canvas it shows is the one the
delete took away — positions, ports, edge routes, selection — even where the scene or the nodes
changed while the items were off the canvas. Timings live in benchmarks/gui_latency.py."""

from PySide6.QtCore import QPointF

from memdesigner._qt.canvas.item_shelf import ItemShelf
from memdesigner.model.design import Design, Edge, Node
from tests.gui.gui_helpers import load


def chain(n: int) -> Design:
    """Input → (Linear → Add(skip))*: every Add is variadic (a free third port while wired)."""
    d = Design(f"chain{n}")
    prev = d.add_node("Input", {"shape": (16,)}, id="x", pos=(0, 0)).id
    i = 0
    while len(d.nodes) < n:
        i += 1
        a = d.add_node("Linear", {"out_features": 16}, id=f"fc{i}", pos=(i * 270.0, 0)).id
        d.add_edge(prev, a, check_cycle=False)
        b = d.add_node("Add", id=f"add{i}", pos=(i * 270.0 + 130, 160)).id
        d.add_edge(a, b, 0, 0, check_cycle=False)
        d.add_edge(prev, b, 0, 1, check_cycle=False)
        prev = b
    return d


def canvas(scene) -> dict:
    """What the canvas shows, item by item: each layer's position, size, ports and name; each
    edge's ends (and that they sit on their ports); what is selected and visible."""
    layers = {nid: ((it.pos().x(), it.pos().y()), it.height, it._counts, it.name, it.vertical, it.isVisible())
              for nid, it in scene.nodes.items()}
    edges = {}
    for e, it in scene.edges.items():
        a, b = it.ends()
        assert a == it.src_item.port_point(e.src_port, True), e  # routed to its ports, not stale
        assert b == it.dst_item.port_point(e.dst_port, False), e
        assert it.src_item is scene.nodes[e.src] and it.dst_item is scene.nodes[e.dst]
        edges[e] = ((a.x(), a.y()), (b.x(), b.y()), it.isVisible())
    shown = [it for it in scene.items() if it.parentItem() is None and it.isVisible()]
    assert len(shown) == len(set(shown)) == len(scene.nodes) + len(scene.edges)  # each once, no leftovers
    assert set(shown) == set(scene.nodes.values()) | set(scene.edges.values())
    return {"layers": layers, "edges": edges, "selected": sorted(scene.selected_node_ids()),
            "selected_edges": len(scene.selected_edges())}


def test_undo_and_redo_of_a_big_delete_put_the_same_items_back_as_they_were(window, qtbot):
    d = chain(400)  # 401 layers, 600 edges
    load(window, qtbot, d)
    scene = window.scene
    scene.finish_pending()
    before, items = canvas(scene), dict(scene.nodes)
    edge_items = dict(scene.edges)
    window.select_all()
    window.delete_selection()
    hidden = [it for it in scene.items() if it.parentItem() is None]
    assert not scene.nodes and len(hidden) == len(scene.shelf) == 1001 and not any(it.isVisible() for it in hidden)
    assert not scene.jobs.has("remove")  # nothing taken out of the scene index: no removal slices
    window.stack.undo()
    assert not scene.building  # put back inside the undo itself: nothing left for later slices
    assert all(scene.nodes[k] is v for k, v in items.items())  # the kept items, not new ones
    assert all(scene.edges[e] is it for e, it in edge_items.items())
    assert canvas(scene) == before
    window.stack.redo()
    assert not scene.nodes and not any(it.isVisible() for it in scene.items())
    window.stack.undo()
    assert all(scene.nodes[k] is v for k, v in items.items())
    assert canvas(scene) == before


def test_undo_of_a_partial_delete_keeps_the_selection_and_reroutes_edges_of_layers_that_stayed(window, qtbot):
    d = chain(30)
    load(window, qtbot, d)
    scene = window.scene
    before = canvas(scene)
    add3 = scene.nodes["add3"]
    scene.select_nodes(["fc3", "fc4", "add4"])
    scene.edges[next(e for e in d.edges if e.src == "add5" and e.dst == "fc6")].setSelected(True)
    window.delete_selection()
    assert add3._counts[0] == 2  # one input left: the variadic Add lost its third port (and shrank)
    scene.select_nodes(["fc1"])
    window.stack.undo()
    # add3 grew back: the edge that stayed on the canvas (add2 → add3, port 1) follows its port
    assert scene.nodes["add3"] is add3 and add3._counts[0] == 3
    after = canvas(scene)
    assert after["layers"] == before["layers"] and after["edges"] == before["edges"]
    assert after["selected"] == ["fc1"]  # the selection made meanwhile is left alone


def test_kept_items_follow_what_changed_while_they_were_off_the_canvas(window, qtbot):
    """A kept card is only put back as it is when its node and the scene look as when it was
    kept; here the orientation changed (a top-to-bottom layout) and a node was renamed and moved
    behind the canvas's back: the items put back show that, with their edges re-routed."""
    d = chain(30)
    load(window, qtbot, d)
    scene = window.scene
    fc5 = scene.nodes["fc5"]
    node = d.nodes["fc5"]
    scene.select_nodes(["fc5", "add5", "fc6"])
    window.delete_selection()
    scene.set_vertical(True)
    scene.finish_pending()
    node.name, node.pos = "renamed", (node.pos[0] + 500.0, node.pos[1] + 300.0)
    window.stack.undo()
    assert scene.nodes["fc5"] is fc5  # still the kept item ...
    assert fc5.name == "renamed" and (fc5.pos().x(), fc5.pos().y()) == node.pos  # ... brought up to date
    assert all(it.vertical for it in scene.nodes.values())
    state = canvas(scene)  # every edge, kept or not, ends on its ports
    top = fc5.port_point(0, False)
    assert top == QPointF(node.pos[0] + 100.0, node.pos[1])  # inputs on top now
    assert state["edges"][next(e for e in d.edges if e.dst == "fc5")][1] == (top.x(), top.y())


def test_an_undo_of_another_node_object_with_the_same_id_gets_a_new_card(window, qtbot):
    d = chain(12)
    load(window, qtbot, d)
    scene = window.scene
    old = scene.nodes["fc2"]
    entries = d.remove_nodes(["fc2"])
    twin = Node("fc2", "Linear", "fc2", dict(d.nodes["fc1"].props), (540.0, 0.0))  # not the deleted object
    d.restore_nodes([(entries[0][0][0], twin)], entries[1])
    assert scene.nodes["fc2"] is not old and scene.nodes["fc2"].scene() is scene
    assert canvas(scene)["layers"]["fc2"][0] == (540.0, 0.0)


class _Card:
    type_name = "Linear"


class _Line:
    def __init__(self, edge):
        self.edge = edge


def test_the_shelf_gives_cards_back_only_for_their_own_nodes_and_lets_the_oldest_delete_go():
    shelf = ItemShelf(limit=3)
    a, a_twin, b = Node("a", "Linear"), Node("a", "Linear"), Node("b", "ReLU")
    card_a, card_b = _Card(), _Card()
    e = Edge("a", "b")
    line = _Line(e)
    assert shelf.keep([a, b], [card_a, card_b], [line], vertical=True, detail=False) == []
    assert shelf.count([a, b]) == 2 and shelf.count([a_twin]) == 0
    # the undo of that delete: the same Node objects in the same order, its edge the same object
    assert shelf.claim([a, b], [Edge("a", "b")]) == ([card_a, card_b], [None], (True, False), [line])
    assert len(shelf) == 0  # given back once (the equal Edge made anew gets a new item)
    shelf.keep([a, b], [card_a, card_b], [line], vertical=False, detail=True)
    # another restore (a twin of a, then b alone): cards by id, only for their very own Node
    assert shelf.claim([a_twin, b], [e]) == ([None, card_b], [line], None, [])
    assert shelf.count([a]) == 1 and len(shelf) == 1
    c, d_, e_ = Node("c", "Linear"), Node("d", "Linear"), Node("e", "Linear")
    gone = shelf.keep([c, d_, e_], [_Card(), _Card(), _Card()], [], vertical=False, detail=True)
    assert gone == [card_a] and len(shelf) == 3  # the oldest delete's let go (for the scene to release)
    assert len(shelf.drop()) == 3 and len(shelf) == 0


def test_the_shelf_keeps_the_last_delete_whole_even_past_its_limit():
    shelf = ItemShelf(limit=2)
    shelf.keep([Node("old", "Linear")], [_Card()], [], vertical=False, detail=True)
    big = [Node(f"n{i}", "Linear") for i in range(4)]
    lines = [_Line(Edge(f"n{i}", f"n{i + 1}")) for i in range(3)]
    gone = shelf.keep(big, [_Card() for _ in big], lines, vertical=False, detail=True)
    assert len(gone) == 1 and len(shelf) == 7  # only the older delete's card went
    assert shelf.count(big) == 4


def test_an_export_after_a_delete_frames_what_is_left_not_the_kept_items(window, qtbot):
    from memdesigner._qt.dialogs.exports import _scene_rect

    d = chain(30)
    load(window, qtbot, d)
    scene = window.scene
    scene.select_nodes([n for n in d.nodes if n not in ("x", "fc1", "add1")])
    window.delete_selection()
    assert len(scene.shelf) > 0  # their items are still in the scene, hidden
    rect = _scene_rect(scene)
    assert rect.right() == 270.0 + 130 + 200 + 4 + 30  # add1's card, its 4-px bounds and the margin: not fc15's

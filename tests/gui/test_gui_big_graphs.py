"""Big graphs stay fluid (issue 10 §5): bulk delete, incremental and sliced scene updates, level of
detail, layout off the UI thread, top-to-bottom layout, minimap, Ctrl+F. Timings live in
benchmarks/gui_latency.py; these tests check behaviour."""

from PySide6.QtCore import QPoint, QPointF, QSettings, Qt
from PySide6.QtGui import QTransform
from PySide6.QtWidgets import QStyleOptionGraphicsItem

from memdesigner.model.design import Design
from tests.gui.gui_helpers import load, small_cnn


def chain(n: int, spread: float = 270.0) -> Design:
    """Input → (Linear → ReLU)* → ..., with one residual Add every few layers."""
    d = Design(f"chain{n}")
    prev = d.add_node("Input", {"shape": (16,)}, id="x", pos=(0, 0)).id
    skip = prev
    i = 0
    while len(d.nodes) < n:
        i += 1
        a = d.add_node("Linear", {"out_features": 16}, id=f"fc{i}", pos=(i * spread, 0)).id
        d.add_edge(prev, a, check_cycle=False)
        b = d.add_node("Add", id=f"add{i}", pos=(i * spread + 130, 120)).id
        d.add_edge(a, b, 0, 0, check_cycle=False)
        d.add_edge(skip, b, 0, 1, check_cycle=False)
        prev = skip = b
    return d


# -- bulk delete --------------------------------------------------------------------------------
def test_select_all_delete_is_one_command_one_notification_and_undo_restores_every_edge(window, qtbot):
    d = chain(200)
    load(window, qtbot, d)
    nodes_before, edges_before = list(d.nodes), list(d.edges)
    events = []
    d.subscribe(lambda ev, payload: events.append(ev))
    selections = []
    window.scene.selectionChanged.connect(lambda: selections.append(1))
    depth = window.stack.count()
    window.select_all()
    selections.clear()
    window.delete_selection()
    assert not d.nodes and not d.edges
    assert not window.scene.nodes and not window.scene.edges
    assert events == ["nodes_removed"]  # one pass: not 200 node + 300 edge notifications
    assert len(selections) == 1  # the inspector is rebuilt once, not once per removed item
    assert window.stack.count() == depth + 1
    assert window.stack.command(window.stack.count() - 1).childCount() == 0  # one command, no macro
    window.stack.undo()
    assert list(d.nodes) == nodes_before
    assert list(d.edges) == edges_before  # every edge back, at its place in the order
    assert set(window.scene.edges) == set(edges_before)
    window.stack.redo()
    assert not d.nodes


def test_deleting_a_part_keeps_the_other_items_and_their_inputs(window, qtbot):
    d = chain(30)
    load(window, qtbot, d)
    keep = window.scene.nodes["fc3"]
    window.scene.select_nodes(["fc1", "add1", "fc2"])
    window.delete_selection()
    assert window.scene.nodes["fc3"] is keep  # incremental: not a rebuild of the scene
    assert all(e.src in d.nodes and e.dst in d.nodes for e in d.edges)
    assert set(window.scene.edges) == set(d.edges)
    window.stack.undo()
    assert window.scene.nodes["fc3"] is keep
    assert set(window.scene.edges) == set(d.edges) and len(d.edges) == len(chain(30).edges)


def test_an_edit_relabels_items_without_rebuilding_the_scene(window, qtbot):
    load(window, qtbot, small_cnn())
    items = dict(window.scene.nodes)
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.inspector.show_node("fc")
        window.inspector.commit("out_features", 7)
    assert window.scene.nodes == items
    assert all(window.scene.nodes[k] is v for k, v in items.items())
    assert window.scene.nodes["fc"].shape_text == "1×7"


def test_a_paste_is_one_notification_and_its_undo_and_redo_are_exact(window, qtbot):
    d = chain(120)
    load(window, qtbot, d)
    before_nodes, before_edges = list(d.nodes), list(d.edges)
    window.scene.select_nodes(list(d.nodes)[:40])
    window.copy()
    events = []
    d.subscribe(lambda ev, payload: events.append(ev))
    depth = window.stack.count()
    window.paste()
    assert events == ["nodes_added"]  # not 40 node and ~60 edge notifications, each re-routing edges
    assert window.stack.count() == depth + 1
    new = [n for n in d.nodes if n not in before_nodes]
    assert len(new) == 40 and list(d.nodes)[:len(before_nodes)] == before_nodes  # appended
    internal = [e for e in before_edges if e.src in list(d.nodes)[:40] and e.dst in list(d.nodes)[:40]]
    assert len(d.edges) == len(before_edges) + len(internal)
    assert set(window.scene.nodes) == set(d.nodes) and set(window.scene.edges) == set(d.edges)
    assert sorted(window.scene.selected_node_ids()) == sorted(new)
    names = [n.name for n in d.nodes.values()]
    assert len(set(names)) == len(names)  # copies got fresh names
    after_nodes, after_edges = list(d.nodes), list(d.edges)
    window.stack.undo()
    assert list(d.nodes) == before_nodes and list(d.edges) == before_edges
    assert set(window.scene.nodes) == set(d.nodes)
    window.stack.redo()
    assert list(d.nodes) == after_nodes and list(d.edges) == after_edges
    assert set(window.scene.edges) == set(d.edges)


# -- sliced scene building ----------------------------------------------------------------------
def test_a_big_design_is_built_in_slices_and_then_complete(window, qtbot):
    d = chain(900)
    window.set_design(d, None, layout=False)
    assert window.scene.building  # set_design returned before all 2,000 items existed
    assert window.statusBar().currentMessage().startswith("Building the canvas")
    # (the layers alone can fit in the first 12 ms slice once no full collection lands in it)
    assert len(window.scene.nodes) + len(window.scene.edges) < len(d.nodes) + len(d.edges)
    qtbot.waitUntil(lambda: not window.scene.building, timeout=20000)
    assert set(window.scene.nodes) == set(d.nodes)
    assert set(window.scene.edges) == set(d.edges)
    assert not window.statusBar().currentMessage().startswith("Building")  # it went with the build
    qtbot.waitUntil(lambda: window.scene.nodes["fc400"].shape_text == "1×16", timeout=20000)
    window.select_all()
    window.delete_selection()  # big: hidden at once, kept in the scene for the undo (_qt/canvas/item_shelf.py)
    assert not window.scene.nodes and not any(it.isVisible() for it in window.scene.items())
    assert not window.scene.jobs.has("remove")  # no slices of removals after it
    window.stack.undo()
    qtbot.waitUntil(lambda: not window.scene.building, timeout=20000)
    assert set(window.scene.nodes) == set(d.nodes) and set(window.scene.edges) == set(d.edges)
    assert not window.statusBar().currentMessage().startswith("Building")


# -- level of detail ----------------------------------------------------------------------------
class _Recorder:
    """A stand-in painter that counts text drawing at a given zoom."""

    from PySide6.QtGui import QPainter

    RenderHint = QPainter.RenderHint

    def __init__(self, scale):
        self.t = QTransform.fromScale(scale, scale)
        self.texts = 0

    def worldTransform(self):
        return self.t

    def drawText(self, *a):
        self.texts += 1

    def font(self):
        from PySide6.QtGui import QFont

        return QFont()

    def __getattr__(self, name):
        return lambda *a, **k: None


def test_zoomed_out_nodes_draw_no_text_and_hide_their_ports(window, qtbot, monkeypatch):
    monkeypatch.setattr("memdesigner._qt.canvas.scene.OVERVIEW_MIN_EDGES", 1)
    load(window, qtbot, small_cnn())
    item = window.scene.nodes["conv"]
    near, far = _Recorder(1.0), _Recorder(0.1)
    item.paint(near, QStyleOptionGraphicsItem())
    item.paint(far, QStyleOptionGraphicsItem())
    assert near.texts >= 3 and far.texts == 0
    window.view.resetTransform()
    window.view.zoom_by(1.0)
    assert all(p.isVisible() for p in item.inputs + item.outputs)
    window.view.zoom_by(0.1)
    assert not any(p.isVisible() for p in item.inputs + item.outputs)
    assert window.scene.overview and not any(e.isVisible() for e in window.scene.edges.values())
    window.view.zoom_by(10.0)
    assert all(p.isVisible() for p in item.inputs + item.outputs)
    assert not window.scene.overview and all(e.isVisible() for e in window.scene.edges.values())


# -- layouts ------------------------------------------------------------------------------------
def test_top_to_bottom_layout_puts_successors_below_and_is_remembered(window, qtbot):
    d = small_cnn()
    load(window, qtbot, d)
    window.layout_runner.actions["top_down"].trigger()
    for e in d.edges:
        assert d.nodes[e.dst].pos[1] > d.nodes[e.src].pos[1]
    conv = window.scene.nodes["conv"]
    assert conv.inputs[0].pos().y() == 0 and conv.outputs[0].pos().y() == conv.height  # ports top/bottom
    assert QSettings().value("canvas/layout_style") == "top_down"
    from memdesigner._qt.canvas.layout_runner import LayoutRunner

    assert LayoutRunner(window, window.scene, window.view, window.stack, window.statusBar().showMessage).style == "top_down"
    window.stack.undo()  # one step
    assert d.nodes["conv"].pos == (270, 0)


def test_a_deep_chain_laid_out_top_down_is_fitted_readable_from_its_start(window, qtbot):
    d = chain(300)
    load(window, qtbot, d)
    window.layout_runner.run("top_down", wait=True)
    view = window.view
    rect = window.scene.content_rect()
    assert rect.height() > 40 * rect.width()  # one tall column
    assert view.transform().m11() >= 0.4  # cards readable, not a column one pixel wide
    shown = view.visible_scene_rect()
    top = min(d.nodes.values(), key=lambda n: n.pos[1])
    assert top.id == "x" and shown.contains(QPointF(top.pos[0] + 100, top.pos[1] + 40))  # the start
    assert shown.width() >= rect.width()  # its whole width
    view.fit_all()  # Fit to View (F) does the same
    assert view.transform().m11() >= 0.4 and view.visible_scene_rect().contains(QPointF(top.pos[0] + 100,
                                                                                      top.pos[1] + 40))
    load(window, qtbot, chain(300, spread=270.0))
    window.layout_runner.run("bands", wait=True)  # a wrapped layout still fits as a whole
    rect, shown = window.scene.content_rect(), view.visible_scene_rect()
    assert shown.contains(rect)


def test_auto_layout_of_a_big_design_runs_off_the_ui_thread_as_one_step(window, qtbot):
    d = chain(400, spread=0.0)  # every layer on one spot
    load(window, qtbot, d)
    depth = window.stack.count()
    window.auto_layout()
    assert window.layout_runner.running  # returned at once; positions come from the worker
    qtbot.waitUntil(lambda: not window.layout_runner.running, timeout=20000)
    assert window.stack.count() == depth + 1
    assert len({n.pos for n in d.nodes.values()}) == len(d.nodes)
    x = window.scene.nodes["fc5"]
    assert (x.pos().x(), x.pos().y()) == d.nodes["fc5"].pos


# -- minimap and find ---------------------------------------------------------------------------
def _center(view):
    return view.mapToScene(view.viewport().rect().center())


def test_minimap_click_and_drag_pan_the_canvas(window, qtbot):
    load(window, qtbot, chain(60, spread=600.0))
    window.view.resetTransform()
    window.view.zoom_by(1.0)
    mm = window.minimap
    mm.fit()
    qtbot.waitExposed(mm)
    target = QPoint(mm.viewport().width() - 30, mm.viewport().height() // 2)
    want = mm.mapToScene(target)
    qtbot.mouseClick(mm.viewport(), Qt.LeftButton, pos=target)
    got = _center(window.view)
    assert abs(got.x() - want.x()) < 5 and abs(got.y() - want.y()) < 60
    start = QPoint(30, mm.viewport().height() // 2)
    qtbot.mousePress(mm.viewport(), Qt.LeftButton, pos=start)
    qtbot.mouseMove(mm.viewport(), pos=start + QPoint(20, 0))
    qtbot.mouseRelease(mm.viewport(), Qt.LeftButton, pos=start + QPoint(20, 0))
    want = mm.mapToScene(start + QPoint(20, 0))
    assert abs(_center(window.view).x() - want.x()) < 5


def test_ctrl_f_finds_a_layer_by_name_selects_and_centres_it(window, qtbot):
    load(window, qtbot, chain(60, spread=600.0))
    window.view.resetTransform()
    window.view.centerOn(0, 0)
    window.activateWindow()
    window.view.setFocus()
    qtbot.keyClick(window.view, Qt.Key_F, Qt.ControlModifier)
    box = window.find_layer
    assert box.isVisible() and box.edit.hasFocus()
    qtbot.keyClicks(box.edit, "fc25")
    qtbot.keyClick(box.edit, Qt.Key_Return)
    assert window.scene.selected_node_ids() == ["fc25"]
    item = window.scene.nodes["fc25"]
    c = _center(window.view)
    mid = item.sceneBoundingRect().center()
    assert abs(c.x() - mid.x()) < 5 and abs(c.y() - mid.y()) < 5
    assert box.resolve("ADD7") == (None, "add7")  # names match whatever the case
    assert box.resolve("nosuchlayer") is None


def test_find_opens_the_block_a_layer_is_in(window, qtbot):
    d = small_cnn()
    load(window, qtbot, d)
    window.scene.select_nodes(["conv", "relu"])
    inst = window.blocks_nav.group()
    assert inst
    box = window.find_layer
    box.open()
    inner = next(t for t in box._targets.values() if t[0] == inst)
    assert box.jump_to(next(k for k, v in box._targets.items() if v == inner)) == inner[1]
    assert window.blocks_nav.path and window.scene.selected_node_ids() == [inner[1]]


def test_dragging_a_layer_drags_its_edges_along_and_undo_brings_them_back(window, qtbot):
    from PySide6.QtCore import QPointF

    load(window, qtbot, small_cnn())
    item = window.scene.nodes["relu"]
    window.view.resetTransform()
    window.view.centerOn(item)
    into = next(it for e, it in window.scene.edges.items() if e.dst == "relu")
    out = next(it for e, it in window.scene.edges.items() if e.src == "relu")
    vp = window.view.viewport()
    a = window.view.mapFromScene(item.sceneBoundingRect().center() + QPointF(0, 10))
    qtbot.mousePress(vp, Qt.LeftButton, pos=a)
    qtbot.mouseMove(vp, pos=a + QPoint(30, 40))
    qtbot.mouseMove(vp, pos=a + QPoint(60, 80))
    assert into.ends()[1] == item.port_point(0, False)  # followed while the button is still down
    qtbot.mouseRelease(vp, Qt.LeftButton, pos=a + QPoint(60, 80))
    assert out.ends()[0] == item.port_point(0, True) and item.pos() != QPointF(540, 0)
    window.stack.undo()
    assert item.pos() == QPointF(540, 0)
    assert into.ends()[1] == item.port_point(0, False) and out.ends()[0] == item.port_point(0, True)

"""Big canvases stay cheap (issue 10 §5): opening a big file reads it off the UI thread, port items
exist only for layers painted in detail, the zoomed-out overview is drawn by the scene (its
items paint nothing), edges are routed without building their curves, tooltips are composed
when asked. Timings live in benchmarks/gui_latency.py; these tests check the behaviour."""

import threading

from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsItem

from memdesigner._qt import theme
from memdesigner._qt.canvas.edge_item import EdgeItem
from memdesigner._qt.canvas.node_item import NodeItem
from memdesigner._qt.jobs import open_file
from memdesigner.io.design_file import save_design
from tests.gui.gui_helpers import load, small_cnn
from tests.gui.test_gui_big_graphs import chain


def test_a_big_file_is_read_and_laid_out_off_the_ui_thread(window, qtbot, tmp_path, monkeypatch):
    d = chain(700, spread=0.0)  # every layer on one spot: it needs a layout
    path = tmp_path / "big.json"
    save_design(d, path)
    assert path.stat().st_size >= open_file.BACKGROUND_BYTES
    threads = []
    real = open_file.load_design

    def recording(p):
        threads.append(threading.current_thread())
        return real(p)

    monkeypatch.setattr(open_file, "load_design", recording)
    before = window.design
    assert window.open_path(str(path), remember=False) is True
    assert window.design is before  # returned at once: the file is read on the worker
    qtbot.waitUntil(lambda: window.design is not before, timeout=30000)
    assert threads and threads[0] is not threading.main_thread()
    assert window.path == str(path) and set(window.design.nodes) == set(d.nodes)
    assert len({n.pos for n in window.design.nodes.values()}) == len(d.nodes)  # laid out there too
    qtbot.waitUntil(lambda: not window.scene.building, timeout=30000)
    assert set(window.scene.nodes) == set(d.nodes)


def test_a_small_file_still_opens_before_open_path_returns(window, qtbot, tmp_path):
    path = tmp_path / "small.json"
    save_design(small_cnn(), path)
    assert window.open_path(str(path), remember=False) is True
    assert set(window.design.nodes) == set(small_cnn().nodes)


def test_port_items_only_for_layers_painted_in_detail(window, qtbot):
    d = chain(900)
    window.set_design(d, None, layout="always")  # in bands: fitted zoomed out (one row is a strip)
    qtbot.waitUntil(lambda: not window.scene.building, timeout=30000)
    scene, view = window.scene, window.view
    assert not any(it._made for it in scene.nodes.values())  # built zoomed out: 2,700 ports not made
    view.resetTransform()
    view.zoom_by(1.0)
    view.centerOn(scene.nodes["fc10"])
    view.viewport().repaint()  # the detailed paint asks for the ports of what it drew
    qtbot.waitUntil(lambda: scene.nodes["fc10"]._made, timeout=5000)
    item = scene.nodes["fc10"]
    assert all(p.isVisible() for p in item.inputs + item.outputs)
    assert not scene.nodes["fc400"]._made  # off screen: still none
    made = sum(it._made for it in scene.nodes.values())
    assert 0 < made < 60


def test_zoomed_out_overview_is_drawn_by_the_scene_with_selection_and_errors(window, qtbot, monkeypatch):
    d = chain(400, spread=600.0)
    load(window, qtbot, d)
    scene, view = window.scene, window.view
    view.resetTransform()
    view.zoom_by(0.1)
    assert scene.overview
    item = scene.nodes["fc3"]
    view.centerOn(item)
    asked = _count_item_calls(monkeypatch)
    view.viewport().repaint()
    assert asked == []  # the view asked no item to paint, nor for its bounds: the scene drew it all
    img = view.viewport().grab().toImage()
    at = view.mapFromScene(item.sceneBoundingRect().center())
    assert QColor(img.pixel(at)) == QColor(theme.family_color(item.family))  # the scene drew it
    families, bad = scene.overview_blocks()
    assert sum(p.elementCount() for p in families.values()) == 5 * len(d.nodes)  # a rectangle each
    assert bad.isEmpty()
    scene.select_nodes(["fc3"])
    view.viewport().repaint()
    img = view.viewport().grab().toImage()
    edge = view.mapFromScene(item.sceneBoundingRect().topLeft() + QPointF(200.0 / 2, 0))
    near = [QColor(img.pixel(edge.x(), edge.y() + dy)) for dy in (-1, 0, 1)]
    assert QColor(theme.canvas_colors()["select"]) in near  # the selection outline
    other = scene.nodes["add3"]
    edge = view.mapFromScene(other.sceneBoundingRect().topLeft() + QPointF(200.0 / 2, 0))
    window.select_all()
    view.viewport().repaint()
    img = view.viewport().grab().toImage()
    near = [QColor(img.pixel(edge.x(), edge.y() + dy)) for dy in (-1, 0, 1)]
    assert QColor(theme.canvas_colors()["select"]) in near  # every layer outlined
    view.zoom_by(10.0)  # (anchored under the mouse, wherever an earlier test left it)
    assert not scene.overview
    view.centerOn(item)
    # (an estimate landing meanwhile may re-build items: the viewport paints once that is done)
    qtbot.waitUntil(lambda: view.viewport().updatesEnabled(), timeout=10000)
    view.viewport().repaint()
    assert "paint" in asked  # zoomed in: the items paint themselves again


def _count_item_calls(monkeypatch) -> list:
    """Names of the NodeItem / EdgeItem methods Qt calls from now on (paint, boundingRect)."""
    asked = []
    for cls in (NodeItem, EdgeItem):
        for name in ("paint", "boundingRect"):
            real = getattr(cls, name)

            def spy(self, *a, _real=real, _name=name):
                asked.append(_name)
                return _real(self, *a)

            monkeypatch.setattr(cls, name, spy)
    return asked


def test_overview_rectangles_follow_a_delete_and_its_undo(window, qtbot):
    d = chain(200, spread=600.0)
    load(window, qtbot, d)
    window.view.resetTransform()
    window.view.zoom_by(0.1)
    count = lambda: sum(p.elementCount() for p in window.scene.overview_blocks()[0].values()) // 5  # noqa: E731
    assert count() == len(d.nodes)
    window.scene.select_nodes(["fc1", "add1"])
    window.delete_selection()
    assert count() == len(d.nodes)
    window.stack.undo()
    qtbot.waitUntil(lambda: not window.scene.building, timeout=10000)
    assert count() == len(d.nodes)
    lines = window.scene._overview_lines()
    assert lines.elementCount() == 2 * len(d.edges)


def test_edge_bounds_hold_the_curve_without_building_it(window, qtbot):
    load(window, qtbot, small_cnn())
    scene = window.scene
    a, b = scene.nodes["conv"], scene.nodes["relu"]
    it = next(e for k, e in scene.edges.items() if k.src == "conv")
    for pos, vertical in (((540, 0), False), ((540, 400), False), ((-600, 300), False), ((-600, 0.5), False),
                          ((100, 500), True), ((300, -500), True)):
        b.setPos(*pos)
        a.set_vertical(vertical)
        b.set_vertical(vertical)
        it.update_path()
        assert it._path is None  # routed by arithmetic: the curve is made when first needed
        curve, box = it.path.boundingRect(), it.boundingRect()
        assert (box.left() <= curve.left() and box.right() >= curve.right() and box.top() <= curve.top()
                and box.bottom() >= curve.bottom()), (pos, vertical)
        it.set_label("1×16×32×32")
        mid = it.path.pointAtPercent(0.5)
        c = it._label_rect.center()
        assert abs(c.x() - mid.x()) < 0.5 and abs(c.y() - mid.y()) < 0.5, (pos, vertical)
        it.set_label("")


def test_tooltips_are_composed_when_asked(window, qtbot):
    load(window, qtbot, small_cnn())
    item = window.scene.nodes["conv"]
    assert isinstance(item, NodeItem)
    assert QGraphicsItem.toolTip(item) == ""  # nothing kept per item
    tip = item.toolTip()
    assert "conv" in tip and "Conv2d" in tip and "output: 1×16×32×32" in tip
    edge = next(e for k, e in window.scene.edges.items() if k.src == "conv")
    assert isinstance(edge, EdgeItem) and edge.toolTip() == "conv → relu: 1×16×32×32"
    from PySide6.QtCore import QEvent, QPoint
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QApplication, QToolTip

    view = window.view
    view.resetTransform()
    view.centerOn(item)
    vp = view.viewport()
    at = view.mapFromScene(item.sceneBoundingRect().center())
    QApplication.sendEvent(vp, QHelpEvent(QEvent.ToolTip, at, vp.mapToGlobal(at)))
    assert QToolTip.isVisible() and "Conv2d" in QToolTip.text()
    QApplication.sendEvent(vp, QHelpEvent(QEvent.ToolTip, QPoint(2, 2), vp.mapToGlobal(QPoint(2, 2))))
    qtbot.waitUntil(lambda: not QToolTip.isVisible(), timeout=3000)  # nothing there: the tip goes


def test_selection_is_asked_once_per_change_and_follows_every_way_of_selecting(window, qtbot, monkeypatch):
    d = chain(60, spread=600.0)
    load(window, qtbot, d)
    scene = window.scene
    walks = []
    real = type(scene).selectedItems
    monkeypatch.setattr(type(scene), "selectedItems", lambda self: walks.append(1) or real(self))
    scene.select_nodes(["fc2", "add2", "fc2"])
    assert scene.selected_node_ids() == ["fc2", "add2"] and scene.selected_edges() == []
    assert walks == []  # select_nodes said what it selected: the window and inspector asked nothing of Qt
    scene.nodes["add2"].setSelected(False)  # a click elsewhere, a rubber band: Qt's own selection change
    assert scene.selected_node_ids() == ["fc2"]
    edge = next(it for e, it in scene.edges.items() if e.src == "fc2")
    edge.setSelected(True)
    assert scene.selected_edges() == [edge.edge] and scene.selected_node_ids() == ["fc2"]
    n = len(walks)
    scene.selected_node_ids()
    scene.selected_edges()
    assert len(walks) == n  # asked again without a change: no second walk
    window.delete_selection()
    assert "fc2" not in d.nodes and edge.edge not in d.edges and scene.selected_node_ids() == []


def test_a_deep_top_to_bottom_layout_stays_reachable(window, qtbot):
    d = chain(700)
    load(window, qtbot, d)
    window.layout_runner.actions["top_down"].trigger()
    qtbot.waitUntil(lambda: not window.layout_runner.running, timeout=30000)
    qtbot.waitUntil(lambda: not window.scene.jobs.busy, timeout=30000)
    last = max(d.nodes.values(), key=lambda n: n.pos[1])
    assert last.pos[1] > 50000  # past the default scene rect
    item = window.scene.nodes[last.id]
    assert window.scene.sceneRect().contains(item.sceneBoundingRect())
    assert item in window.scene.items(item.sceneBoundingRect().center())  # in the index: drawn and hit
    window.view.resetTransform()
    window.view.centerOn(item)  # the view can scroll there
    c = window.view.mapToScene(window.view.viewport().rect().center())
    assert abs(c.y() - item.sceneBoundingRect().center().y()) < 5


def test_a_big_build_leaves_nothing_for_the_index_to_take_in_at_once(window, qtbot, monkeypatch):
    """Items built in slices are indexed as they come: Qt's index timer took in all of them in
    one turn after the build (60-70 ms at 10,000 layers), asking each item for its bounds."""
    from PySide6.QtCore import QRectF

    d = chain(900)
    window.set_design(d, None, layout="always")
    qtbot.waitUntil(lambda: not window.scene.building, timeout=30000)
    asked = _count_item_calls(monkeypatch)
    window.scene.items(QRectF(-1e7, -1e7, 1.0, 1.0))  # (where no item is: only indexing asks)
    assert asked.count("boundingRect") < 50


def test_a_big_delete_frees_its_items_slice_by_slice(window, qtbot, monkeypatch):
    """A delete's items are kept for its undo (_qt/canvas/item_shelf.py); once they can no longer come
    back (another design opened) each is let go in the slice that takes it out of the scene:
    holding them all to the end of the job freed 22,000 items in one 60-110 ms turn."""
    d = chain(900)
    window.set_design(d, None, layout="always")
    qtbot.waitUntil(lambda: not window.scene.jobs.busy, timeout=30000)
    freed = []
    monkeypatch.setattr(NodeItem, "__del__", lambda self: freed.append(1), raising=False)
    monkeypatch.setattr(EdgeItem, "__del__", lambda self: freed.append(1), raising=False)
    total = len(window.scene.nodes) + len(window.scene.edges)
    window.select_all()
    window.delete_selection()
    assert not window.scene.jobs.has("remove")
    assert not freed and not any(it.isVisible() for it in window.scene.items())  # kept, hidden, for the undo
    window.set_design(chain(3), None, layout="always")  # they can never come back now
    assert window.scene.jobs.has("remove")
    window.scene.jobs.budget = 0.002  # a short slice
    window.scene.jobs._tick()
    assert 0 < len(freed) < total  # freed slice by slice, not all at the job's end
    window.scene.finish_pending()
    assert len(freed) == total


def test_a_big_designs_content_rect_is_kept_until_its_layout_changes(window, qtbot):
    d = chain(2100)
    window.set_design(d, None, layout="always")
    scene = window.scene
    first = scene.content_rect()
    far = max(d.nodes.values(), key=lambda n: n.pos[0])
    far.pos = (far.pos[0] + 5000.0, far.pos[1])  # (behind the design's back: no notification)
    assert scene.content_rect() == first  # kept: not a walk over 2,100 positions per question
    d.move_node(far.id, (far.pos[0] + 1000.0, far.pos[1]))  # a move through the design
    assert scene.content_rect().right() == first.right() + 6000.0


def test_a_paste_into_a_big_design_grows_its_content_rect_without_a_walk(window, qtbot):
    d = chain(2100)
    window.set_design(d, None, layout="always")
    scene = window.scene
    first = scene.content_rect()
    hidden = max(d.nodes.values(), key=lambda n: n.pos[1])
    hidden.pos = (hidden.pos[0], hidden.pos[1] + 3000.0)  # (behind the design's back: seen only by a walk)
    window.scene.select_nodes(["fc1", "add1"])
    window.copy()
    window.paste()
    pasted = [n for n in d.nodes.values() if n.id not in ("fc1", "add1")][-2:]
    rect = scene.content_rect()
    assert rect.bottom() == first.bottom()  # grown by the pasted layers, not made again from all
    for n in pasted:
        assert rect.contains(n.pos[0], n.pos[1])
    window.stack.undo()  # a removal: made again
    assert scene.content_rect().bottom() == first.bottom() + 3000.0

"""The node editor driven like a user: drops, drags, keys, undo."""

from gui_helpers import load, small_cnn
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from memdesigner._qt.canvas.view import LAYER_MIME
from memdesigner.model.design import Design


def _drop(view, type_name: str, at: QPoint):
    md = QMimeData()
    md.setData(LAYER_MIME, type_name.encode())
    vp = view.viewport()
    for cls in (QDragEnterEvent, QDragMoveEvent):
        QApplication.sendEvent(vp, cls(at, Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier))
    QApplication.sendEvent(vp, QDropEvent(QPointF(at), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier))


def test_drop_from_palette_adds_node_at_drop_point(window, qtbot):
    item = window.palette.items["Conv2d"]
    md = window.palette.tree.mimeData([item])  # what the palette puts on a drag
    assert bytes(md.data(LAYER_MIME)).decode() == "Conv2d"
    at = QPoint(300, 200)
    _drop(window.view, "Conv2d", at)
    assert len(window.design.nodes) == 1
    node = next(iter(window.design.nodes.values()))
    assert node.type == "Conv2d"
    target = window.view.mapToScene(at)
    rect = window.scene.nodes[node.id].sceneBoundingRect()
    assert rect.contains(target)  # the card sits under the cursor
    assert window.scene.selected_node_ids() == [node.id]
    window.stack.undo()
    assert not window.design.nodes


def _drag(qtbot, view, a: QPointF, b: QPointF):
    vp = view.viewport()
    pa, pb = view.mapFromScene(a), view.mapFromScene(b)
    qtbot.mousePress(vp, Qt.LeftButton, pos=pa)
    qtbot.mouseMove(vp, pos=(pa + pb) / 2)
    qtbot.mouseMove(vp, pos=pb)
    qtbot.mouseRelease(vp, Qt.LeftButton, pos=pb)


def test_drag_between_ports_connects_and_refusal_is_explained(window, qtbot):
    d = Design()
    d.add_node("Input", {"shape": (64,)}, id="x", pos=(0, 0))
    d.add_node("Linear", id="fc", pos=(320, 0))
    load(window, qtbot, d)
    window.view.resetTransform()
    window.view.centerOn(260, 40)
    src = window.scene.nodes["x"].outputs[0].scene_center()
    dst = window.scene.nodes["fc"].inputs[0].scene_center()
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        _drag(qtbot, window.view, src, dst)
    assert [(e.src, e.dst) for e in window.design.edges] == [("x", "fc")]
    assert window.scene.edges[window.design.edges[0]].label == "1×64"
    # a refused connection: the reason reaches the status bar, nothing changes
    back_src = window.scene.nodes["fc"].outputs[0].scene_center()
    back_dst = window.scene.nodes["x"].scene_center() if hasattr(window.scene.nodes["x"], "scene_center") else \
        window.scene.nodes["x"].sceneBoundingRect().center()
    _drag(qtbot, window.view, back_src, back_dst)
    assert len(window.design.edges) == 1
    assert "takes no inputs" in window.statusBar().currentMessage()


def test_delete_selection_is_one_undo_step(window, qtbot):
    load(window, qtbot, small_cnn())
    n_nodes, n_edges = len(window.design.nodes), len(window.design.edges)
    window.scene.select_nodes(["conv", "relu"])
    window.view.setFocus()
    qtbot.keyClick(window.view, Qt.Key_Delete)
    assert set(window.design.nodes) == {"x", "flat", "fc"}
    assert len(window.design.edges) == 1
    window.stack.undo()
    assert len(window.design.nodes) == n_nodes and len(window.design.edges) == n_edges
    assert window.stack.index() == 0


def test_copy_paste_and_duplicate_are_single_steps(window, qtbot):
    load(window, qtbot, small_cnn())
    window.scene.select_nodes(["conv", "relu"])
    window.copy()
    window.paste()
    assert len(window.design.nodes) == 7
    assert len(window.design.edges) == 5  # the conv→relu edge came along
    assert len(window.scene.selected_node_ids()) == 2
    window.duplicate()
    assert len(window.design.nodes) == 9
    window.stack.undo()
    window.stack.undo()
    assert len(window.design.nodes) == 5 and len(window.design.edges) == 4


def test_move_is_undoable(window, qtbot):
    load(window, qtbot, small_cnn())
    item = window.scene.nodes["relu"]
    window.view.resetTransform()
    window.view.centerOn(item)
    start = item.sceneBoundingRect().center() + QPointF(0, 10)
    _drag(qtbot, window.view, start, start + QPointF(60, 80))
    assert window.design.nodes["relu"].pos != (540, 0)
    window.stack.undo()
    assert window.design.nodes["relu"].pos == (540.0, 0.0)
    assert (item.pos().x(), item.pos().y()) == (540.0, 0.0)


def test_fit_zoom_and_auto_layout(window, qtbot):
    d = small_cnn()
    for n in d.nodes.values():
        n.pos = (0.0, 0.0)
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.set_design(d, None)  # all on one spot: laid out on load
    xs = sorted(n.pos[0] for n in window.design.nodes.values())
    assert len(set(xs)) == 5
    window.view.zoom_by(2.0)
    window.view.fit_all()
    vis = window.view.mapToScene(window.view.viewport().rect()).boundingRect()
    for item in window.scene.nodes.values():
        assert vis.contains(item.sceneBoundingRect())
    window.auto_layout()
    assert window.stack.count() <= 1

"""Right-click menus on layers, connections and the empty canvas, driven by real right-clicks
and clicks on the menu entries."""

from gui_helpers import load, menu_click, menu_texts, right_click, small_cnn
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtTest import QTest

from memdesigner.model.design import Edge


def _node_point(window, nid) -> QPoint:
    item = window.scene.nodes[nid]
    return window.view.mapFromScene(item.mapToScene(QPointF(40, 12)))  # on the header, not a port


def _open_on_node(window, nid):
    window.view.fit_all()
    right_click(window.view.viewport(), _node_point(window, nid))
    return window.canvas_menus.menu


def test_node_menu_deletes_the_layer_it_points_at(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("x")  # another layer selected: the menu acts on the one under the pointer
    menu = _open_on_node(window, "relu")
    assert menu.isVisible()
    texts = menu_texts(menu)
    for entry in ("Rename…", "Duplicate", "Copy", "Cut", "Delete", "Group into Block", "Show in Layer Table"):
        assert entry in texts, entry
    assert window.scene.selected_node_ids() == ["relu"]
    menu_click(menu, "Delete")
    assert "relu" not in window.design.nodes and "x" in window.design.nodes
    window.stack.undo()
    assert "relu" in window.design.nodes


def test_node_menu_duplicates(window, qtbot):
    load(window, qtbot, small_cnn())
    menu_click(_open_on_node(window, "conv"), "Duplicate")
    assert len(window.design.nodes) == 6
    (new,) = window.scene.selected_node_ids()
    assert window.design.nodes[new].type == "Conv2d" and window.design.nodes[new].props["out_channels"] == 16


def test_node_menu_freezes_and_unfreezes_in_one_undo_step(window, qtbot):
    load(window, qtbot, small_cnn())
    menu = _open_on_node(window, "conv")
    assert "Freeze layer" in menu_texts(menu)
    n0 = window.stack.count()
    menu_click(menu, "Freeze layer")
    assert window.design.nodes["conv"].trainable is False
    assert window.stack.count() == n0 + 1
    menu = _open_on_node(window, "conv")
    assert "Unfreeze layer" in menu_texts(menu)
    menu_click(menu, "Unfreeze layer")
    assert window.design.nodes["conv"].trainable is True
    assert "Freeze layer" not in menu_texts(_open_on_node(window, "relu"))  # nothing to freeze in a ReLU


def test_node_menu_rename_types_into_the_name_field(window, qtbot):
    load(window, qtbot, small_cnn())
    menu_click(_open_on_node(window, "conv"), "Rename")
    edit = window.inspector.name_edit
    assert edit.hasFocus() and edit.selectedText() == window.design.nodes["conv"].name
    qtbot.keyClicks(edit, "stem")
    qtbot.keyClick(edit, Qt.Key_Return)
    assert window.design.nodes["conv"].name == "stem"


def test_node_menu_shows_the_layer_in_the_table(window, qtbot):
    load(window, qtbot, small_cnn())
    window.tabs.setCurrentIndex(0)
    menu_click(_open_on_node(window, "fc"), "Show in Layer Table")
    assert window.tabs.currentWidget() is window.table
    rows = window.table.selectionModel().selectedRows()
    assert len(rows) == 1
    src = window.table.proxy.mapToSource(rows[0])
    assert window.table.model_.rows[src.row()].id == "fc"


def test_node_menu_groups_into_a_block(window, qtbot):
    load(window, qtbot, small_cnn())
    window.scene.select_nodes(["conv", "relu"])
    menu = _open_on_node(window, "relu")  # inside the selection: acts on the whole selection
    assert sorted(window.scene.selected_node_ids()) == ["conv", "relu"]
    menu_click(menu, "Group into Block")
    assert "conv" not in window.design.nodes
    assert [n.type for n in window.design.nodes.values()].count("Block") == 1


def test_edge_menu_deletes_the_connection(window, qtbot):
    load(window, qtbot, small_cnn())
    window.view.fit_all()
    item = window.scene.edges[Edge("conv", "relu")]
    p = window.view.mapFromScene(item.mapToScene(item.path.pointAtPercent(0.25)))
    right_click(window.view.viewport(), p)
    menu = window.canvas_menus.menu
    assert menu_texts(menu) == ["Delete Connection conv → relu"]
    menu_click(menu, "Delete Connection")
    assert Edge("conv", "relu") not in window.design.edges
    assert {"conv", "relu"} <= set(window.design.nodes)


def test_canvas_menu_adds_a_layer_at_the_pointer(window, qtbot):
    from PySide6.QtWidgets import QApplication

    QApplication.clipboard().setText("")  # an earlier test's copy
    load(window, qtbot, small_cnn())
    window.view.fit_all()
    vp = window.view.viewport()
    p = QPoint(vp.width() // 2, vp.height() - 20)  # below the row of layers: empty canvas
    right_click(vp, p)
    menu = window.canvas_menus.menu
    texts = menu_texts(menu)
    assert texts[:2] == ["Add Layer Here", "Paste Here"]
    assert {"Select All", "Auto Layout", "Fit to View"} <= set(texts)
    assert not menu.actions()[1].isEnabled()  # nothing copied yet
    dense = next(a.menu() for a in menu.actions()[0].menu().actions() if a.text() == "Dense & embedding")
    next(a for a in dense.actions() if a.text() == "Linear").trigger()
    (nid,) = window.scene.selected_node_ids()
    item = window.scene.nodes[nid]
    at = window.view.mapToScene(p)
    assert window.design.nodes[nid].type == "Linear"
    assert abs(item.sceneBoundingRect().center().x() - at.x()) < 2  # centred on the pointer


def test_canvas_menu_pastes_at_the_pointer_and_selects_all(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    window.view.setFocus()
    QTest.keyClick(window.view, Qt.Key_C, Qt.ControlModifier)
    vp = window.view.viewport()
    p = QPoint(vp.width() // 3, vp.height() - 20)
    right_click(vp, p)
    menu_click(window.canvas_menus.menu, "Paste Here")
    (nid,) = window.scene.selected_node_ids()
    at = window.view.mapToScene(p)
    assert window.design.nodes[nid].pos == (at.x(), at.y())
    right_click(vp, QPoint(vp.width() - 10, vp.height() - 10))
    menu_click(window.canvas_menus.menu, "Select All")
    assert len(window.scene.selected_node_ids()) == 6

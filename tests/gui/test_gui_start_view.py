"""The start view an empty canvas shows: examples with thumbnails, templates, imports and recent
files, each driven by real clicks."""

from gui_helpers import small_cnn
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from memdesigner._qt.dialogs import thumbnails
from memdesigner.model.design import Design


def _wait_thumbnails(window, qtbot):
    qtbot.waitUntil(lambda: not window.start_view._pending, timeout=20000)


def _click_example(window, name):
    lst = window.start_view.examples
    item = next(lst.item(i) for i in range(lst.count()) if lst.item(i).text() == name)
    lst.scrollToItem(item)
    QTest.mouseClick(lst.viewport(), Qt.LeftButton, Qt.NoModifier, lst.visualItemRect(item).center())


def test_empty_canvas_shows_the_start_view_with_example_thumbnails(window, qtbot, tmp_path):
    sv = window.start_view
    thumbnails._MEMORY.clear()  # all drawn afresh, into this test's empty cache folder
    sv._pending = list(range(sv.examples.count()))
    qtbot.waitUntil(sv.isVisible, timeout=5000)
    names = [sv.examples.item(i).text() for i in range(sv.examples.count())]
    assert len(names) == 10 and "resnet18" in names and "seed keras audio" in names
    assert sv.geometry() == window.view.viewport().rect()  # covers the whole canvas
    assert window.view.horizontalScrollBarPolicy() == Qt.ScrollBarAlwaysOff  # nothing to scroll to
    _wait_thumbnails(window, qtbot)
    pngs = list((tmp_path / "cache" / "thumbnails").glob("*.png"))
    assert len(pngs) == 10  # rendered once, kept on disk
    from importlib import resources

    with resources.as_file(resources.files("memdesigner.resources").joinpath("examples", "lenet5.json")) as p:
        pm = thumbnails.cached(p)
    assert pm is not None and pm.size() == thumbnails.SIZE
    img = pm.toImage()
    colours = {img.pixel(x, y) for x in range(0, img.width(), 4) for y in range(0, img.height(), 4)}
    assert len(colours) > 3  # the layers are drawn, not an empty placeholder


def test_clicking_an_example_opens_it_and_hides_the_start_view(window, qtbot):
    qtbot.waitUntil(window.start_view.isVisible, timeout=5000)
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        _click_example(window, "lenet5")
    assert window.design.name == "lenet5" and len(window.design.nodes) == 13
    assert window.path is None  # an example is a template: Save asks where
    assert not window.start_view.isVisible()
    assert window.view.horizontalScrollBarPolicy() == Qt.ScrollBarAsNeeded  # the canvas scrolls again


def test_examples_open_with_their_own_settings(window, qtbot):
    from importlib import resources

    seed_fc = resources.files("memdesigner.resources").joinpath("examples", "seed_fc.json")
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window._open_example(seed_fc)  # training, batch 256, SGD
    assert window.settings_bar.settings().mode == "train" and window.settings_bar.batch.value() == 256
    window.stack.setClean()
    window.new_design()
    qtbot.waitUntil(window.start_view.isVisible, timeout=5000)
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        _click_example(window, "lenet5")  # a file without settings: the defaults, not seed_fc's
    s = window.settings_bar.settings()
    assert (s.mode, s.batch, s.optimizer) == ("inference", 1, "none")
    assert window.result.report.settings["batch"] == 1


def test_templates_start_a_design(window, qtbot):
    sv = window.start_view
    qtbot.waitUntil(sv.isVisible, timeout=5000)
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        QTest.mouseClick(sv.template_buttons["mlp"], Qt.LeftButton)
    rep = window.result.report
    assert sum(r.params for r in rep.layers) == 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10
    assert (rep.settings["mode"], rep.settings["batch"], rep.settings["optimizer"]) == ("train", 64, "adam")
    assert not sv.isVisible()
    window.stack.setClean()
    window.new_design()
    qtbot.waitUntil(sv.isVisible, timeout=5000)
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        QTest.mouseClick(sv.template_buttons["transformer"], Qt.LeftButton)
    # LayerNorm 2*256, attention 4*(256*256+256), MLP 256*1024+1024 + 1024*256+256
    assert sum(r.params for r in window.result.report.layers) == 2 * 256 * 2 + 4 * (256 * 256 + 256) + \
        256 * 1024 + 1024 + 1024 * 256 + 256


def test_llama_template_imports_the_shipped_config(window, qtbot):
    sv = window.start_view
    qtbot.waitUntil(sv.isVisible, timeout=5000)
    QTest.mouseClick(sv.template_buttons["llama"], Qt.LeftButton)
    qtbot.waitUntil(lambda: bool(window.design.nodes and window.result is not None and window.result.report is not None
                                 and window.result.report.layers), timeout=30000)
    rep = window.result.report
    assert any(n.type == "Block" for n in window.design.nodes.values())
    assert sum(r.params for r in rep.layers) == 8_030_261_248  # Llama-3-8B's published count
    # ~2 FLOPs per weight per token over 2,048 tokens: tens of TFLOP, shown as such (not 32000 GFLOP)
    assert 2 * 7.5e9 * 2048 < rep.flops < 2 * 8.1e9 * 2048 * 1.3
    assert window.summary.flops.value.text().endswith(" TFLOP")


def test_import_buttons_call_the_import_actions(window, qtbot, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    asked = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: asked.append(a[1]) or ("", ""))
    sv = window.start_view
    qtbot.waitUntil(sv.isVisible, timeout=5000)
    for key in ("torch", "keras", "onnx", "hf"):
        QTest.mouseClick(sv.import_buttons[key], Qt.LeftButton)
    assert asked == ["Import PyTorch model (runs the file's code)", "Import Keras model", "Import ONNX model",
                     "Import Hugging Face config"]


def test_recent_files_reopen(window, qtbot, tmp_path):
    from memdesigner.io.design_file import save_design

    path = tmp_path / "mine.json"
    save_design(small_cnn(), path)
    window._add_recent(str(path))
    window._add_recent(str(tmp_path / "gone.json"))  # deleted since: not offered
    sv = window.start_view
    sv.fill_recent()
    assert [b.text() for b in sv.recent_buttons] == ["mine.json"]
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        QTest.mouseClick(sv.recent_buttons[0], Qt.LeftButton)
    assert window.path == str(path) and len(window.design.nodes) == 5


def test_empty_canvas_button_and_new_design(window, qtbot):
    sv = window.start_view
    qtbot.waitUntil(sv.isVisible, timeout=5000)
    QTest.mouseClick(sv.empty_button, Qt.LeftButton)
    assert not sv.isVisible()
    window.set_design(Design(), None)  # File > New: shown again
    qtbot.waitUntil(sv.isVisible, timeout=5000)


def test_adding_a_layer_from_the_palette_hides_it(window, qtbot):
    sv = window.start_view
    qtbot.waitUntil(sv.isVisible, timeout=5000)
    tree = window.palette.tree
    item = window.palette.items["Linear"]
    tree.scrollToItem(item)
    QTest.mouseClick(tree.viewport(), Qt.LeftButton, Qt.NoModifier, tree.visualItemRect(item).center())
    QTest.keyClick(tree, Qt.Key_Return)  # Enter (or a double-click) adds the selected layer
    assert [n.type for n in window.design.nodes.values()] == ["Linear"]
    qtbot.waitUntil(lambda: not sv.isVisible(), timeout=5000)


def test_no_start_view_in_a_headless_render_window():
    from memdesigner._qt.main_window import MainWindow

    win = MainWindow(headless=True)
    try:
        assert win.start_view is None
    finally:
        win.service.shutdown()
        win.close()
        win.deleteLater()


def test_a_palette_drop_on_the_start_view_lands_on_the_canvas_calmly(window, qtbot):
    """A layer dragged from the palette and dropped over the start view lands where it was
    dropped; alone and unconnected, it is "not connected yet", not an error."""
    from PySide6.QtCore import QMimeData, QPoint, QPointF
    from PySide6.QtGui import QDragEnterEvent, QDropEvent
    from PySide6.QtWidgets import QApplication

    from memdesigner._qt.canvas.scene import NOT_CONNECTED
    from memdesigner._qt.canvas.view import LAYER_MIME

    sv = window.start_view
    qtbot.waitUntil(sv.isVisible, timeout=5000)
    target = sv.examples.viewport()  # over a thumbnail
    md = QMimeData()
    md.setData(LAYER_MIME, b"Linear")
    p = QPoint(40, 30)
    assert QApplication.sendEvent(target, QDragEnterEvent(p, Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier))
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        QApplication.sendEvent(target, QDropEvent(QPointF(p), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier))
    (nid,) = window.design.nodes
    item = window.scene.nodes[nid]
    at = window.view.mapToScene(target.mapTo(window.view.viewport(), p))
    assert abs(item.sceneBoundingRect().center().x() - at.x()) < 2
    assert item.pending == NOT_CONNECTED and item.issue == "" and not item.in_error
    qtbot.waitUntil(lambda: not sv.isVisible(), timeout=5000)


def test_the_start_view_fits_a_1366x768_laptop_without_scrolling(window, qtbot, tmp_path):
    """Issue 10 §2: every part (examples, templates, imports, recent files) is in view on the
    canvas a 1366x768 screen leaves beside the docks; the examples' own list may scroll."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QScrollArea

    from memdesigner._qt.document import recent
    from memdesigner._qt.window_fit import place

    for i in range(6):  # as many recent files as it lists
        p = tmp_path / f"a_design_with_a_name_{i}.json"
        p.write_text("{}")
        recent.add(str(p))
    place(window, None, available=QRect(0, 0, 1366, 768 - 32))
    sv = window.start_view
    sv.fill_recent()
    qtbot.waitUntil(sv.isVisible, timeout=5000)
    qtbot.wait(50)
    page = sv.findChild(QScrollArea)
    assert page.verticalScrollBar().maximum() == 0 and page.horizontalScrollBar().maximum() == 0
    shown = sv.rect()
    buttons = [*sv.template_buttons.values(), *sv.import_buttons.values(), *sv.recent_buttons]
    assert len(sv.recent_buttons) == 6
    for b in buttons:
        assert shown.contains(QRect(b.mapTo(sv, b.rect().topLeft()), b.size())), b.text()
    ex = sv.examples
    assert shown.contains(QRect(ex.mapTo(sv, ex.rect().topLeft()), ex.size()))
    assert not window.minimap.isVisible()  # an overview of nothing would cover the recent files
    window.set_design(small_cnn(), None, layout=False)
    qtbot.waitUntil(lambda: window.minimap.isVisible() and not sv.isVisible(), timeout=5000)

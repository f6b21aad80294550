"""File -> Import -> ONNX Model… loads the file into the window and estimates it."""

import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.importers.test_onnx_import import _cnn  # noqa: E402


def test_import_onnx_from_the_menu(window, qtbot, tmp_path):
    path = tmp_path / "cnn.onnx"
    onnx.save(_cnn(), str(path))
    file_menu = window.menuBar().actions()[0].menu()
    imp = next(a.menu() for a in file_menu.actions() if a.menu() and "Import" in a.text())
    assert window.act_import_onnx in imp.actions()
    window.import_onnx(str(path))  # imports run off the UI thread, as the PyTorch ones
    qtbot.waitUntil(lambda: [n.type for n in window.design.nodes.values()][1:3] == ["Conv2d", "BatchNorm2d"],
                    timeout=20000)
    # then the estimate of the imported design (not the empty one it replaced) arrives
    qtbot.waitUntil(lambda: window.result is not None and window.result.report is not None
                    and any(r.type == "Conv2d" for r in window.result.report.layers), timeout=20000)
    assert window.result.report.peak_bytes > 0


def test_import_onnx_asks_for_a_dynamic_shape(window, qtbot, tmp_path, monkeypatch):
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    asked = []
    monkeypatch.setattr("memdesigner._qt.main_window.QInputDialog.getText",
                        lambda *a, **k: (asked.append(a[2]), ("3, 16, 16", True))[1])
    window.import_onnx(str(path))  # off the UI thread; the empty design's own estimate may land first
    qtbot.waitUntil(lambda: "x" in window.design.nodes, timeout=10000)
    assert "(N, 3, H, W)" in asked[0]
    assert tuple(window.design.nodes["x"].props["shape"]) == (3, 16, 16)


def test_an_empty_shape_is_asked_for_in_the_windows_words(window, qtbot, tmp_path, monkeypatch):
    """Leaving the asked-for shape empty: one line that says "enter an input shape", not the
    command line's "pass --input-shape"."""
    from onnx import TensorProto, helper
    from PySide6.QtWidgets import QMessageBox

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    monkeypatch.setattr("memdesigner._qt.main_window.QInputDialog.getText", lambda *a, **k: ("", True))
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: shown.append(a[2])))
    window.import_onnx(str(path))
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=20000)
    assert shown[0].endswith("enter an input shape") and "--input-shape" not in shown[0] and "\n" not in shown[0]

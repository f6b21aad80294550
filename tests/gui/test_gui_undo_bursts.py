"""Issue 10 §2: a spin box's arrow clicks, wheel steps, Up keys and typed values on one field are
one undo step (merged until the field loses focus or another field changes); Ctrl+Z undoes the
whole burst. Driven with real input events."""

from gui_helpers import load, small_cnn
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionSpinBox

from memdesigner._qt.document import undo_bursts


def _click_up(spin):
    opt = QStyleOptionSpinBox()
    spin.initStyleOption(opt)
    up = spin.style().subControlRect(QStyle.CC_SpinBox, opt, QStyle.SC_SpinBoxUp, spin)
    QTest.mouseClick(spin, Qt.LeftButton, Qt.NoModifier, up.center())


def _wheel_up(spin):
    at = QPointF(spin.width() / 3, spin.height() / 2)
    ev = QWheelEvent(at, spin.mapToGlobal(at), QPoint(), QPoint(0, 120), Qt.NoButton, Qt.NoModifier,
                     Qt.NoScrollPhase, False)
    QApplication.sendEvent(spin, ev)


def _type(spin, text):
    spin.lineEdit().selectAll()
    QTest.keyClicks(spin.lineEdit(), text)
    QTest.keyClick(spin, Qt.Key_Return)


def _ctrl_z(window):
    window.view.setFocus()
    QTest.keyClick(window.view, Qt.Key_Z, Qt.ControlModifier)


def test_a_burst_on_one_inspector_field_is_one_undo_step(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    spin = window.inspector.fields["out_features"].editor
    start = window.stack.index()
    _click_up(spin)
    _click_up(spin)
    _wheel_up(spin)
    QTest.keyClick(spin, Qt.Key_Up)
    assert window.design.nodes["fc"].props["out_features"] == 14
    _type(spin, "64")
    assert window.design.nodes["fc"].props["out_features"] == 64
    assert window.stack.index() == start + 1  # five changes, one step
    _ctrl_z(window)  # the canvas took the focus: the burst is over
    assert window.design.nodes["fc"].props["out_features"] == 10

    # focus out ends a burst: two bursts, two steps
    _click_up(spin)
    _click_up(spin)
    window.view.setFocus()
    _click_up(spin)
    assert window.stack.index() == start + 2 and window.design.nodes["fc"].props["out_features"] == 13
    _ctrl_z(window)
    assert window.design.nodes["fc"].props["out_features"] == 12
    _ctrl_z(window)
    assert window.design.nodes["fc"].props["out_features"] == 10 and window.stack.index() == start


def test_stepping_back_to_the_start_leaves_no_step(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    spin = window.inspector.fields["out_features"].editor
    start = window.stack.index()
    _click_up(spin)
    QTest.keyClick(spin, Qt.Key_Down)
    assert window.stack.index() == start and window.design.nodes["fc"].props["out_features"] == 10


def test_another_field_ends_the_burst(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    burst = undo_bursts.current()
    start = window.stack.index()
    for key, value in (("out_features", 11), ("out_features", 12), ("bias", False), ("out_features", 13)):
        window.inspector.commit(key, value, burst=burst)
    assert window.stack.index() == start + 3
    window.select_node("conv")  # the same field name on another node is another field
    window.inspector.commit("out_channels", 20, burst=burst)
    window.inspector.commit("out_channels", 21, burst=burst)
    assert window.stack.index() == start + 4
    window.stack.undo()
    assert window.design.nodes["conv"].props["out_channels"] == 16


def test_a_burst_on_batch_is_one_undo_step(window, qtbot):
    load(window, qtbot, small_cnn())
    spin = window.settings_bar.batch
    start = window.stack.index()
    _click_up(spin)
    _click_up(spin)
    _wheel_up(spin)
    _type(spin, "32")
    assert window.settings_bar.settings().batch == 32 and window.stack.index() == start + 1
    assert window.stack.undoText() == "Set batch to 32"
    _ctrl_z(window)
    assert window.settings_bar.settings().batch == 1 and window.stack.index() == start
    # a setting changed through a menu (no burst: Apply of a fit suggestion, an example's settings)
    window.settings_bar.apply_dict({"batch": 2})
    window.settings_bar.apply_dict({"batch": 3})
    assert window.stack.index() == start + 2

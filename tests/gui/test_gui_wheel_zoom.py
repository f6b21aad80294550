"""Issue 21 §7: the mouse wheel over the canvas of a big design zooms at once, driven by real
wheel events sent to the view's viewport: while the design's items are still being built in
slices (the canvas's repaints are held back then), and where fit-to-view put the zoom below the
wheel's range (a 10,000-layer chain fitted to a 1366×768 window: 0.015)."""

import pytest
from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from memdesigner._qt.canvas import view as view_mod
from tests.gui.test_gui_big_graphs import chain


def wheel(view, steps: int = 1):
    """One real wheel event over the middle of the canvas (120 per notch; negative: away)."""
    vp = view.viewport()
    at = QPointF(vp.width() / 2, vp.height() / 2)
    ev = QWheelEvent(at, QPointF(vp.mapToGlobal(at.toPoint())), QPoint(), QPoint(0, 120 * steps), Qt.NoButton,
                     Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(vp, ev)


class Paints(QObject):
    """Counts the paint events the canvas's viewport receives."""

    def __init__(self, widget):
        super().__init__(widget)
        self.count = 0
        widget.installEventFilter(self)

    def eventFilter(self, obj, ev):  # noqa: N802 (Qt's name)
        if ev.type() == QEvent.Type.Paint:
            self.count += 1
        return False


def test_the_wheel_zooms_and_paints_while_a_big_canvas_is_being_built(window, qtbot):
    window.scene.jobs.budget = 0.0002  # the build takes many event-loop turns, as 10,000 layers do
    d = chain(400)  # 1,000 items: built in slices
    window.set_design(d, None, layout=False)
    view = window.view
    assert window.scene.building
    paints = Paints(view.viewport())
    before = view.transform().m11()
    wheel(view)
    assert view.transform().m11() > before  # zoomed inside the wheel's own event
    qtbot.waitUntil(lambda: paints.count > 0, timeout=10000)
    assert window.scene.building  # painted before the build ended, not after it
    n = paints.count
    for _ in range(5):  # a burst of notches in one turn: one frame, not one per notch
        wheel(view, -1)
    qtbot.waitUntil(lambda: paints.count > n, timeout=10000)
    assert window.scene.building and paints.count == n + 1
    qtbot.waitUntil(lambda: not window.scene.building, timeout=30000)


def test_the_wheel_zooms_in_from_below_its_range(window, qtbot):
    window.set_design(chain(20), None, layout=False)
    view = window.view
    view.resetTransform()
    view.scale(0.015, 0.015)  # where fit-to-view puts a 10,000-layer chain in a 1366×768 window
    wheel(view, -1)
    assert view.transform().m11() == 0.015  # not further out
    wheel(view)
    assert view.transform().m11() > 0.015
    for _ in range(40):
        wheel(view)
    assert view.transform().m11() == pytest.approx(view_mod.MAX_ZOOM)  # clamped at the end, not refused short of it
    for _ in range(200):
        wheel(view, -1)
    assert view.transform().m11() == pytest.approx(view_mod.MIN_ZOOM)

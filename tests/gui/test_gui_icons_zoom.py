"""Toolbar icons that say what they do and read on dark themes; the timeline's zoom reset
(button, Ctrl+0, double-click)."""

import pytest
from gui_helpers import load, small_cnn
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QStyle

DARK_BG, DARK_TEXT = QColor("#202124"), QColor("#E8EAED")


def _ink_lightness(icon, size=24) -> float:
    """Mean lightness of the icon's opaque pixels."""
    img = icon.pixmap(size, size).toImage()
    vals = [QColor.fromRgba(img.pixel(x, y)) for x in range(img.width()) for y in range(img.height())]
    vals = [c.lightness() for c in vals if c.alpha() > 160]
    assert vals, "an empty icon"
    return sum(vals) / len(vals)


@pytest.fixture
def dark_palette(qapp):
    old = qapp.palette()
    pal = QPalette(old)
    for role, c in ((QPalette.Window, DARK_BG), (QPalette.Base, DARK_BG), (QPalette.Button, DARK_BG),
                    (QPalette.WindowText, DARK_TEXT), (QPalette.Text, DARK_TEXT), (QPalette.ButtonText, DARK_TEXT)):
        pal.setColor(role, c)
    qapp.setPalette(pal)
    yield pal
    qapp.setPalette(old)


def test_fit_and_layout_icons_read_on_a_dark_toolbar(dark_palette, qtbot):
    from memdesigner._qt.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    try:
        for act in (win.act_fit, win.act_layout):
            assert _ink_lightness(act.icon()) - DARK_BG.lightness() > 90, act.text()
        # not the style's stand-ins (a maximise button, a list view)
        st = win.style()
        for act, std in ((win.act_fit, QStyle.SP_TitleBarMaxButton), (win.act_layout, QStyle.SP_FileDialogListView)):
            assert act.icon().pixmap(24).toImage() != st.standardIcon(std).pixmap(24).toImage()
        assert win.act_fit.toolTip() == "Show the whole design"
        assert win.act_layout.toolTip() == "Arrange layers in columns"
    finally:
        win.service.shutdown()
        win.close()


def test_icons_follow_a_light_palette_too(qapp):
    from memdesigner._qt.icons import action_icon

    light = qapp.palette().color(QPalette.Window).lightness()
    if light < 128:
        pytest.skip("the test palette is dark")
    for name in ("fit", "layout", "zoom_reset"):
        assert light - _ink_lightness(action_icon(name)) > 90, name


def _zoomed(tl):
    tl.setXRange(2, 4, padding=0)
    assert tl.getViewBox().viewRange()[0] == [2, 4]


def test_timeline_zoom_reset_button_ctrl0_and_double_click(window, qtbot):
    assert not window.timeline.zoom_reset_button.isVisible()  # an empty timeline: nothing to reset
    load(window, qtbot, small_cnn())
    tl = window.timeline
    full = tl.getViewBox().viewRange()
    assert full[0] == [0, len(tl.events)]
    b = tl.zoom_reset_button
    assert b.isVisible() and b.text() == "Reset zoom" and "Ctrl+0" in b.toolTip()
    assert tl.rect().contains(b.geometry())
    _zoomed(tl)
    QTest.mouseClick(b, Qt.LeftButton)
    assert tl.getViewBox().viewRange() == full
    _zoomed(tl)
    tl.setFocus()
    QTest.keyClick(tl, Qt.Key_0, Qt.ControlModifier)
    assert tl.getViewBox().viewRange() == full
    _zoomed(tl)
    vp = tl.viewport()
    at = QPoint(vp.width() // 2, vp.height() // 2)
    top = tl.window()
    QTest.mouseDClick(top.windowHandle(), Qt.LeftButton, Qt.NoModifier, vp.mapTo(top, at))
    qtbot.waitUntil(lambda: tl.getViewBox().viewRange() == full, timeout=3000)
    QApplication.processEvents()

"""Designs and waits shared by the GUI tests."""

from memdesigner.model.design import Design


def small_cnn() -> Design:
    d = Design("small-cnn")
    d.add_node("Input", {"shape": (3, 32, 32)}, id="x", pos=(0, 0))
    d.add_node("Conv2d", {"out_channels": 16, "padding": 1}, id="conv", pos=(270, 0))
    d.add_node("ReLU", id="relu", pos=(540, 0))
    d.add_node("Flatten", id="flat", pos=(810, 0))
    d.add_node("Linear", {"out_features": 10}, id="fc", pos=(1080, 0))
    for a, b in (("x", "conv"), ("conv", "relu"), ("relu", "flat"), ("flat", "fc")):
        d.add_edge(a, b)
    return d


def load(window, qtbot, design):
    """Show a design and wait for its first estimate."""
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.set_design(design, None, layout=False)
    return window.result.report


def right_click(widget, pos):
    """A real right-click: through the window, so Qt makes the context-menu event from it as it
    does for a mouse (QTest's widget overload skips that step)."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    top = widget.window()
    QTest.mouseClick(top.windowHandle(), Qt.RightButton, Qt.NoModifier, widget.mapTo(top, pos))


def menu_click(menu, text):
    """Click the entry whose text (without '&') starts with ``text``; returns the action."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    act = next(a for a in menu.actions() if a.text().replace("&", "").startswith(text))
    assert act.isEnabled(), text
    QTest.mouseClick(menu.windowHandle(), Qt.LeftButton, Qt.NoModifier, menu.actionGeometry(act).center())
    return act


def menu_texts(menu) -> list:
    return [a.text().replace("&", "") for a in menu.actions() if not a.isSeparator()]


def autosave_landed(window, qtbot) -> None:
    """Wait for the worker's full autosave write (document._writing) to land or be dropped."""
    qtbot.waitUntil(lambda: window.document._writing is None, timeout=10000)


# -- the settings bar, driven by keys and clicks as a user does ----------------------------------
def choose(qtbot, combo, data):
    """Pick an entry with the keyboard, as a user tabbing through the bar does."""
    from PySide6.QtCore import Qt

    combo.setFocus()
    if combo.isEditable():  # (the device picker: Home moves the text cursor there)
        for _ in range(combo.currentIndex()):
            qtbot.keyClick(combo, Qt.Key_Up)
    else:
        qtbot.keyClick(combo, Qt.Key_Home)
    for _ in range(combo.count()):
        if combo.currentData() == data:
            return
        qtbot.keyClick(combo, Qt.Key_Down)
    assert combo.currentData() == data, data


def type_into(qtbot, spin, value):
    from PySide6.QtCore import Qt

    spin.setFocus()
    spin.lineEdit().selectAll()
    qtbot.keyClicks(spin, str(value))
    qtbot.keyClick(spin, Qt.Key_Return)


def toggle_to(qtbot, box, on: bool):
    """Space on a check box until it shows ``on``."""
    from PySide6.QtCore import Qt

    if box.isChecked() != on:
        box.setFocus()
        qtbot.keyClick(box, Qt.Key_Space)
    assert box.isChecked() == on


def open_panel(qtbot, button):
    from PySide6.QtCore import Qt

    qtbot.mouseClick(button, Qt.LeftButton)
    assert button.panel.isVisible()

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

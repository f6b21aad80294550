"""A new user's first window starts on a common 24 GB card, and later windows on the device used
last (it said "No device selected" with no verdict until one was picked)."""

from PySide6.QtCore import Qt
from test_gui_same_truth import choose

from memdesigner.engine import devices as devmod


def _window(qtbot):
    from memdesigner._qt.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    return win


def test_first_window_on_a_24_gb_card_then_on_the_last_used(qtbot, monkeypatch):
    monkeypatch.setattr("memdesigner._qt.settings.settings_bar.load_devices", devmod.all_devices)
    first = _window(qtbot)
    assert first.settings_bar.device_id() == "rtx4090"
    assert first.settings_bar.current_device().memory_bytes == 24564 * 2**20
    assert not first.dirty and first.stack.count() == 0  # (no edit of the user's)
    with qtbot.waitSignal(first.service.result_ready, timeout=10000):
        choose(qtbot, first.settings_bar.device, "h100-80gb")
    first.stack.setClean()
    qtbot.keyClick(first.view, Qt.Key_N, Qt.ControlModifier)  # a new design keeps the device
    assert first.settings_bar.device_id() == "h100-80gb"
    second = _window(qtbot)
    assert second.settings_bar.device_id() == "h100-80gb"
    for w in (first, second):
        w.stack.setClean()
        w.close()


def test_headless_render_window_gets_no_device(qtbot, monkeypatch):
    from memdesigner._qt.main_window import MainWindow

    monkeypatch.setattr("memdesigner._qt.settings.settings_bar.load_devices", devmod.all_devices)
    win = MainWindow(headless=True)
    qtbot.addWidget(win)
    assert win.settings_bar.device_id() is None


def test_device_picker_is_searched_by_typing(window, qtbot, monkeypatch):
    monkeypatch.setattr("memdesigner._qt.settings.settings_bar.load_devices", devmod.all_devices)
    bar = window.settings_bar
    bar.reload_devices()
    edit = bar.device.lineEdit()
    for typed, want in (("3080", "rtx3080-10gb"), ("jetson", "jetson-orin-nano-8gb"), ("m2 max", "apple-m2-max-32gb")):
        bar.device.setFocus()
        edit.selectAll()
        qtbot.keyClicks(edit, typed)
        with qtbot.waitSignal(window.service.result_ready, timeout=10000):
            qtbot.keyClick(edit, Qt.Key_Return)
        assert bar.device_id() == want, typed
        assert edit.text() == bar.device.currentText() and edit.cursorPosition() == 0  # the name from its start
    edit.selectAll()
    qtbot.keyClicks(edit, "nvidia")  # names many: nothing changes, the shown name comes back
    qtbot.keyClick(edit, Qt.Key_Return)
    assert bar.device_id() == "apple-m2-max-32gb" and edit.text() == bar.device.currentText()

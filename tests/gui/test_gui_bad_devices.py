"""A bad user devices.json must not stop the window: it starts, the good user profile and the
shipped ones are in the device menu, and the status bar says what was skipped."""

import json

import pytest

from memdesigner._qt.settings import settings_bar
from memdesigner.engine import devices

GOOD = {"id": "lab-gpu", "name": "Lab GPU", "kind": "cuda", "memory_bytes": 2 * 2**30}


@pytest.mark.parametrize("content, n_user, expected", [
    ('{"devices": 5}', 0, "devices: expected a list"),
    ('[null]', 0, "(top level): expected an object"),
    (f'{{"devices": [null, {json.dumps(GOOD)}, {{"id": "x", "memory_bytes": 1e400}}]}}', 1, "devices[2] (id 'x')"),
])
def test_window_starts_with_a_bad_user_device_file(qtbot, monkeypatch, tmp_path, content, n_user, expected):
    from memdesigner._qt.main_window import MainWindow

    monkeypatch.setattr(settings_bar, "load_devices", devices.all_devices)  # the real list, not the fixture's
    path = devices.user_devices_path()
    path.write_text(content)
    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    ids = [win.settings_bar.device.itemData(i) for i in range(win.settings_bar.device.count())]
    assert "h200" in ids and ("lab-gpu" in ids) == bool(n_user)
    note = win.settings_bar.device_warning
    assert note.isVisible() and win.statusBar().isAncestorOf(note)
    assert "devices.json" in note.text()
    assert expected in note.toolTip() and str(path) in note.toolTip()
    win.stack.setClean()
    win.close()


def test_no_note_without_problems(window):
    assert not window.settings_bar.device_warning.isVisible()


def _fifo(path):
    import os

    os.mkfifo(path)


def _char_device(path):
    path.symlink_to("/dev/null")


def _deep(path):
    path.write_text('{"devices": ' + "[" * 100_000 + "]" * 100_000 + "}")


@pytest.mark.parametrize("make, expected", [
    (_fifo, "cannot read: a FIFO (named pipe), not a devices file"),
    (_char_device, "cannot read: a character device, not a devices file"),
    (_deep, "nested deeper than 64 levels (set MEMDESIGNER_MAX_JSON_DEPTH to raise it)"),
], ids=["fifo", "char-device", "nested-100000"])
def test_window_starts_with_a_hostile_user_device_file(qtbot, monkeypatch, make, expected):
    """A FIFO (which blocked the start forever), a device and a 100,000-deep file: the window
    starts with the shipped profiles and shows the one problem line."""
    import threading

    from helpers import unblock_fifo_later

    from memdesigner._qt.main_window import MainWindow

    monkeypatch.setattr(settings_bar, "load_devices", devices.all_devices)
    path = devices.user_devices_path()
    make(path)
    stop = threading.Event()
    unblock_fifo_later(path, stop)  # without the bounded reader the FIFO would hang the test: fail it instead
    try:
        win = MainWindow()
    finally:
        stop.set()
    qtbot.addWidget(win)
    win.show()
    ids = [win.settings_bar.device.itemData(i) for i in range(win.settings_bar.device.count())]
    assert "h200" in ids
    note = win.settings_bar.device_warning
    assert note.isVisible() and "1 problem," in note.text()
    assert note.toolTip() == f"{path}: {expected}; no user devices loaded"
    win.stack.setClean()
    win.close()

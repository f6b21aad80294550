"""GUI tests run offscreen with throw-away QSettings and recovery folders."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

from memdesigner.engine.devices import Device

BIG = Device("big", "Big GPU 80 GiB", "cuda", 80 * 1024**3, runtime_overhead_bytes=500 * 1024**2)
SMALL = Device("small", "Small GPU 1 GiB", "cuda", 1024**3, runtime_overhead_bytes=300 * 1024**2)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch, qapp):
    from PySide6.QtCore import QSettings

    qapp.setOrganizationName("memdesigner-tests")
    qapp.setApplicationName("memdesigner-tests")
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp_path / "settings"))
    monkeypatch.setenv("MEMDESIGNER_RECOVERY_DIR", str(tmp_path / "recovery"))
    monkeypatch.setenv("MEMDESIGNER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("memdesigner._qt.settings.settings_bar.load_devices", lambda: [BIG, SMALL])
    monkeypatch.setattr("memdesigner.engine.devices.user_devices_path", lambda: tmp_path / "devices.json")


@pytest.fixture
def window(qtbot):
    from memdesigner._qt.main_window import MainWindow

    win = MainWindow()
    win.show()
    yield win
    win.stack.setClean()
    win.close()
    win.deleteLater()


@pytest.fixture(autouse=True)
def _no_modal_prompts(monkeypatch):
    """A modal question would hang an offscreen test run: fail instead."""
    from PySide6.QtWidgets import QMessageBox

    def refuse(*a, **k):
        raise AssertionError(f"unexpected modal dialog: {a[1:3]}")

    monkeypatch.setattr(QMessageBox, "question", refuse)
    monkeypatch.setattr(QMessageBox, "warning", refuse)

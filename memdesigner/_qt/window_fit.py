"""Where the main window opens: 1500x950 where the screen has room, else the screen's available
area (a 1366x768 laptop), and a saved geometry only when it still fits a screen (a window saved on
a monitor that is gone, or bigger than this screen, would open off-screen or overflow it)."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QGuiApplication

DEFAULT_SIZE = QSize(1500, 950)
FRAME = QSize(16, 40)  # title bar and borders the window manager adds around the client area


def fitted_frame(available: QRect, preferred: QSize = DEFAULT_SIZE) -> QRect:
    """The window's outer rectangle (frame included): the preferred client size plus the frame,
    shrunk to the available area and centred in it."""
    w = min(preferred.width() + FRAME.width(), available.width())
    h = min(preferred.height() + FRAME.height(), available.height())
    return QRect(available.x() + (available.width() - w) // 2, available.y() + (available.height() - h) // 2, w, h)


def _screens_available() -> list[QRect]:
    return [s.availableGeometry() for s in QGuiApplication.screens()]


def place(win, saved_geometry=None, available: QRect | None = None, headless: bool = False) -> None:
    """Restore ``saved_geometry`` (QWidget.saveGeometry bytes) when it fits a screen, else fit the
    default size to ``available`` (the window's screen's available geometry by default). A
    headless window (renders) keeps the default size whatever the virtual screen is."""
    if headless:
        win.resize(DEFAULT_SIZE)
        return
    screens = [available] if available is not None else _screens_available()
    if saved_geometry is not None and win.restoreGeometry(saved_geometry):
        if any(s.contains(win.geometry()) for s in screens if s is not None):  # client area on one screen
            return
    if available is None:
        screen = win.screen() or QGuiApplication.primaryScreen()
        available = screen.availableGeometry() if screen is not None else QRect(0, 0, 1500 + 16, 950 + 40)
    frame = fitted_frame(available)
    win.resize(frame.size() - FRAME)
    win.move(frame.topLeft())  # move() places the frame's corner

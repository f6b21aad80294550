"""The window fits the screen it opens on: 1366x768 laptops included; saved geometry is restored
only when it still fits."""

from PySide6.QtCore import QRect, QSize

from memdesigner._qt.window_fit import DEFAULT_SIZE, FRAME, fitted_frame, place

LAPTOP = QRect(0, 0, 1366, 768 - 32)  # a 1366x768 screen less a 32-pixel panel


def test_fitted_frame_on_a_laptop_and_a_big_screen():
    f = fitted_frame(LAPTOP)
    assert f == QRect(0, 0, 1366, 736)
    big = QRect(1920, 0, 2560, 1440)  # a second monitor to the right
    f = fitted_frame(big)
    assert f.size() == DEFAULT_SIZE + FRAME
    assert big.contains(f) and f.x() == 1920 + (2560 - 1516) // 2


def test_window_fits_a_1366x768_screen(window):
    place(window, None, available=LAPTOP)
    assert window.width() <= 1366 - FRAME.width() and window.height() <= 736 - FRAME.height()
    assert window.minimumSizeHint().width() <= 1366 and window.minimumSizeHint().height() <= 736
    assert window.size() == QSize(1350, 696)


def test_saved_geometry_restored_only_when_it_fits(window, monkeypatch):
    # the offscreen test screen is 800x800 and Qt clamps real restores to it, so a saved geometry
    # here is the rectangle restoreGeometry would give on the user's screen
    monkeypatch.setattr(window, "restoreGeometry", lambda rect: window.setGeometry(QRect(*rect)) or True)
    place(window, (100, 60, 1200, 800), available=QRect(0, 0, 1900, 1100))
    assert window.geometry() == QRect(100, 60, 1200, 800)
    place(window, (10, 30, 1500, 950), available=LAPTOP)  # saved on a bigger monitor
    assert window.size() == QSize(1350, 696)
    place(window, (2000, 30, 1200, 800), available=QRect(0, 0, 1900, 1100))  # on a monitor now gone
    assert window.size() == DEFAULT_SIZE

"""``memdesigner`` with no sub-command: open the designer window."""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt, QTimer


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from PySide6.QtWidgets import QApplication

    if QApplication.instance() is None:
        from memdesigner._qt.preflight import window_problem

        problem = window_problem()
        if problem:
            sys.stderr.write(f"memdesigner: error: {problem}\n")
            return 2
    from PySide6.QtGui import QGuiApplication

    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "memdesigner", *argv])
    app.setApplicationName("memdesigner")
    app.setOrganizationName("memdesigner")
    app.setApplicationDisplayName("memdesigner")
    from memdesigner._qt.icons import family_icon
    from memdesigner._qt.main_window import MainWindow

    app.setWindowIcon(family_icon("dense"))
    win = MainWindow()
    win.show()
    path = next((a for a in argv if not a.startswith("-")), None)

    QTimer.singleShot(0, lambda: start(win, path))
    return app.exec()


def start(win, path: str | None, ask=None) -> None:
    """Offer every crashed instance's autosave (each one), then open the file named on the
    command line as well: in this window while it is empty, else beside the recovered work."""
    from memdesigner._qt.document.recovery_prompt import window_for

    win.offer_recovery(ask)
    if path:
        window_for(win).open_path(path)


if __name__ == "__main__":
    raise SystemExit(main())

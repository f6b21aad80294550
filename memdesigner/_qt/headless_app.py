"""A QApplication for headless use (render, the report's canvas picture): below the window and
the modules that build one, so that none of them imports another to get an application."""

from __future__ import annotations

import os
import sys


def ensure_app():
    """A QApplication, offscreen when there is no display (CI, ssh, the CLI)."""
    if not os.environ.get("QT_QPA_PLATFORM") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) \
            and sys.platform.startswith("linux"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication([sys.argv[0] if sys.argv else "memdesigner"])
        app.setApplicationName("memdesigner")
        app.setOrganizationName("memdesigner")
    return app

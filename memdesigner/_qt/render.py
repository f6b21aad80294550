"""Headless render: the whole window (graph, timeline, summary) for one design, as a PNG."""

from __future__ import annotations

import sys

from memdesigner._qt.headless_app import ensure_app
from memdesigner.document.run_settings import settings_dict
from memdesigner.engine.settings import Settings
from memdesigner.model.design import Design


def render_design(design: Design, out_png, settings: Settings | None = None, device_id: str | None = None,
                  size=(1600, 1000)) -> None:
    """Lay the design out, estimate synchronously and save a screenshot of the window."""
    app = ensure_app()
    from memdesigner._qt.main_window import MainWindow

    settings = settings or Settings()
    from PySide6.QtCore import qInstallMessageHandler

    previous = qInstallMessageHandler(_without_offscreen_noise)
    win = MainWindow(headless=True)
    try:
        win.resize(*size)
        win.set_design(design, None, layout="always")
        d = settings_dict(settings)  # every setting (LoRA, GPUs, generate ...), not only the bar's six
        if device_id is not None:
            if not win.settings_bar.set_device(device_id):
                raise KeyError(f"unknown device {device_id!r}")
            d["device"] = device_id
        win.settings_bar.apply_dict(d)
        win.service._timer.stop()
        win.show()
        app.processEvents()
        win.estimate_now()
        win.scene.finish_pending()
        win.minimap.hide()  # a picture of the design, not of the window's navigation aids
        win.view.fit_all()
        app.processEvents()
        from memdesigner._qt.dialogs.exports import save_picture

        save_picture(win.grab(), out_png)  # in memory, then written atomically
    finally:
        win.service.shutdown()
        win.close()
        win.deleteLater()
        app.processEvents()
        qInstallMessageHandler(previous)


def _without_offscreen_noise(mode, context, message: str) -> None:
    """Qt's messages to stderr as usual, less the offscreen platform's "does not support
    propagateSizeHints()" that every headless render printed: an error must stay one line."""
    if "propagateSizeHints" not in message:
        sys.stderr.write(f"{message}\n")

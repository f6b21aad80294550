"""File -> Open without freezing the window: a big design file is read, validated and (where its
positions are missing) laid out on the worker (worker.py, the one background-work mechanism),
and the window shows it when it arrives; the canvas then builds in slices (scene.py). Reading a
10,000-layer file is about half a second of parsing and checking, a 1,000-layer one 100 ms: both
were one frozen turn of the UI thread. Small files (the examples, a hand-written design) open
before this returns, as before."""

from __future__ import annotations

import os
from pathlib import Path

import superqt.utils  # noqa: F401  (the worker's; first imported at start-up, not in the first open's turn)
from PySide6.QtWidgets import QMessageBox

from memdesigner._qt.canvas.layout import needs_layout, positions
from memdesigner._qt.document.opened_settings import opened_settings
from memdesigner._qt.scheduling import worker
from memdesigner.engine.gc_pause import gc_paused, promote_survivors
from memdesigner.io.design_file import DesignFileError, load_design
from memdesigner.text import first_line

BACKGROUND_BYTES = 64 * 1024  # bigger files are read on the worker (the examples are under 41 KB)


def read_placed(path: str, style: str, cancel=None):
    """The design in ``path`` with its opening settings, laid out when it needs it (no Qt: runs
    on the worker). DesignFileError when the file cannot be read. Parsed with the collector paused:
    the objects it makes trigger full collections that hold the GIL ~60 ms (the window stalls).
    What it made is moved to the oldest generation before the collector runs again: paused,
    Python still counts the allocations, and the first one after the pause (building the canvas,
    on the UI thread) started a young collection over the whole design, 50 ms of a 10,000-layer
    open that finds nothing (the design has no garbage). Full collections still see it."""
    with gc_paused():
        d = _read_placed(path, style, cancel)
        promote_survivors()
        return d


def _read_placed(path: str, style: str, cancel):
    d = load_design(path)
    if cancel is not None and cancel.is_set():
        raise worker.Cancelled()
    d.settings = opened_settings(d.settings)  # its own settings, not the previous design's
    if needs_layout(d):
        for nid, pos in positions(d, style).items():
            d.nodes[nid].pos = pos
    return d


def open_path(win, path: str, remember: bool = True) -> bool:
    """Open ``path`` in ``win``. A small file (or any file in a headless window, unless its
    ``background_open`` says otherwise) is shown before this returns (False when it cannot be read, after saying why). A big one is read on the
    worker: True means the reading started; the design replaces the window's when it arrives,
    unless the user cancelled (the old design stays)."""
    path = str(path)
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0  # read at once: the one-line error comes from load_design
    if not getattr(win, "background_open", not win.headless) or size < BACKGROUND_BYTES:
        return _open_now(win, path, remember)
    from memdesigner._qt.canvas.layout_runner import saved_style

    prev = getattr(win, "open_task", None)
    if prev is not None and prev.running:
        prev.cancel()
    style = saved_style()
    name = Path(path).name
    task = worker.run(win, lambda cancel: read_placed(path, style, cancel), title="Open design",
                      label=f"Opening {name}…", on_result=lambda d: _show(win, d, path, remember),
                      on_error=lambda err: _failed(win, err, path))
    win.open_task = task
    win.busy_label.setText(f"opening {name}…")
    task.ended.connect(lambda: win.busy_label.setText(""))
    task.cancelled.connect(lambda: win.statusBar().showMessage(f"Opening {name} cancelled", 6000))
    return True


def _open_now(win, path: str, remember: bool) -> bool:
    try:
        d = win.document.read(path)
    except DesignFileError as err:
        if win.headless:
            raise
        QMessageBox.warning(win, "Cannot open design", str(err))
        return False
    d.settings = opened_settings(d.settings)  # its own settings, not the previous design's
    _show(win, d, path, remember, layout=True)
    return True


def _show(win, design, path: str, remember: bool, layout: bool = False) -> None:
    win.set_design(design, path, layout=layout)
    if remember:
        win._add_recent(win.path)
    win.statusBar().showMessage(f"Opened {path}", 4000)


def _failed(win, err, path: str) -> None:
    text = str(err) if isinstance(err, DesignFileError) else f"{path}: {type(err).__name__}: {first_line(err)}"
    QMessageBox.warning(win, "Cannot open design", text)

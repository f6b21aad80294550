"""Thumbnails of design files for the start view: the canvas rendered offscreen (exports.py)
and kept in memory and on disk, keyed by the file's bytes, the size and the light/dark palette,
so only the first start after an install or an example's change pays for rendering."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from PySide6.QtCore import QSize, QStandardPaths
from PySide6.QtGui import QImage, QPixmap, QUndoStack

from memdesigner._qt import theme
from memdesigner.io.bounded_read import BoundedReadError, read_bytes

SIZE = QSize(168, 100)
VERSION = "1"  # bump when the drawing changes: old cached pictures are then ignored
_MEMORY: dict[str, QPixmap] = {}


def cache_dir() -> Path:
    """MEMDESIGNER_CACHE_DIR (tests), else the platform's cache folder."""
    env = os.environ.get("MEMDESIGNER_CACHE_DIR")
    base = Path(env) if env else Path(QStandardPaths.writableLocation(QStandardPaths.CacheLocation))
    return base / "thumbnails"


def _key(data: bytes, size: QSize) -> str:
    h = hashlib.sha1(data + VERSION.encode()).hexdigest()[:20]
    return f"{h}-{size.width()}x{size.height()}-{'dark' if theme.is_dark() else 'light'}"


def cached(path, size: QSize = SIZE) -> QPixmap | None:
    """The thumbnail when it is already in memory or on disk (no rendering)."""
    try:
        key = _key(read_bytes(path, "design file"), size)
    except BoundedReadError:  # a FIFO among the recent files must not hang the start view
        return None
    if key in _MEMORY:
        return _MEMORY[key]
    f = cache_dir() / f"{key}.png"
    if f.is_file():
        img = QImage(str(f))
        if not img.isNull():
            _MEMORY[key] = QPixmap.fromImage(img)
            return _MEMORY[key]
    return None


def thumbnail(path, size: QSize = SIZE) -> QPixmap | None:
    """The design file drawn at ``size``; None when the file cannot be read as a design."""
    hit = cached(path, size)
    if hit is not None:
        return hit
    from memdesigner._qt.canvas.layout import layered_positions, needs_layout
    from memdesigner._qt.canvas.scene import GraphScene
    from memdesigner._qt.dialogs.exports import scene_image
    from memdesigner.io.design_file import DesignFileError, load_design

    try:
        data = read_bytes(path, "design file")
        design = load_design(path)
    except (BoundedReadError, DesignFileError):
        return None
    if needs_layout(design):
        for nid, pos in layered_positions(design).items():
            design.nodes[nid].pos = pos
    scene = GraphScene(QUndoStack())
    scene.set_design(design)
    img = scene_image(scene, size)
    scene.clear()
    key = _key(data, size)
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        from memdesigner._qt.dialogs.exports import encoded
        from memdesigner.io.atomic_write import write_atomic

        # atomically: a kill mid-write must not leave a torn picture that later starts read as valid
        write_atomic(cache_dir() / f"{key}.png", encoded(img, "thumbnail.png"), fsync=False)
    except OSError:
        pass  # a read-only cache only costs the next start a render
    _MEMORY[key] = QPixmap.fromImage(img)
    return _MEMORY[key]

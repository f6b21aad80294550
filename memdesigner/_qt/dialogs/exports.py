"""Pictures and tables out of the window: canvas as PNG/SVG, timeline as PNG, table as CSV.
Each picture is drawn into memory and written atomically (io/atomic_write.py), never by Qt
straight into the file: a full disk leaves the old picture whole."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter

from memdesigner.io.atomic_write import write_atomic


def encoded(picture, path) -> bytes:
    """A QImage or QPixmap in the format its file name asks for (.png, .jpg, ...), as bytes;
    OSError when Qt has no writer for it (as QImage.save(path) would fail)."""
    fmt = Path(str(path)).suffix.lstrip(".").upper()
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.WriteOnly)
    ok = bool(fmt) and picture.save(buf, fmt)
    buf.close()
    if not ok:
        raise OSError(f"{path}: cannot write: Qt could not save the image (name it .png)")
    return bytes(data)


def save_picture(picture, path) -> None:
    """Write a QImage or QPixmap to ``path`` atomically."""
    write_atomic(path, encoded(picture, path))


def svg_available() -> bool:
    try:
        from PySide6.QtSvg import QSvgGenerator  # noqa: F401  (absent from some PySide6 builds)
        return True
    except ImportError:
        return False


def _scene_rect(scene) -> QRectF:
    if hasattr(scene, "finish_pending"):
        scene.finish_pending()  # a big design's items are built in slices: all of them first
    rect = QRectF()
    for it in scene.items():
        if it.parentItem() is None and it.isVisible():  # (a deleted layer's item is kept hidden for its undo)
            rect = rect.united(it.sceneBoundingRect())
    return rect.adjusted(-30, -30, 30, 30) if not rect.isNull() else QRectF(0, 0, 400, 300)


def canvas_png(scene, path: str, scale: float = 2.0) -> None:
    rect = _scene_rect(scene)
    size = QSize(max(1, int(rect.width() * scale)), max(1, int(rect.height() * scale)))
    while size.width() * size.height() > 12000 * 12000:  # stay within what QImage can allocate
        scale /= 2
        size = QSize(max(1, int(rect.width() * scale)), max(1, int(rect.height() * scale)))
    img = QImage(size, QImage.Format_ARGB32_Premultiplied)
    img.fill(scene.backgroundBrush().color() if scene.backgroundBrush().style() else QColor("white"))
    p = QPainter(img)
    p.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
    scene.render(p, QRectF(0, 0, size.width(), size.height()), rect, Qt.KeepAspectRatio)
    p.end()
    save_picture(img, path)


def scene_image(scene, size: QSize) -> QImage:
    """The whole scene scaled into ``size`` (thumbnails): the same offscreen render as canvas_png."""
    img = QImage(size, QImage.Format_ARGB32_Premultiplied)
    img.fill(scene.backgroundBrush().color() if scene.backgroundBrush().style() else QColor("white"))
    p = QPainter(img)
    p.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing | QPainter.SmoothPixmapTransform)
    scene.render(p, QRectF(0, 0, size.width(), size.height()), _scene_rect(scene), Qt.KeepAspectRatio)
    p.end()
    return img


def canvas_svg(scene, path: str, title: str = "memdesigner") -> None:
    from PySide6.QtSvg import QSvgGenerator

    rect = _scene_rect(scene)
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(buf)
    gen.setSize(QSize(int(rect.width()), int(rect.height())))
    gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
    gen.setTitle(title)
    p = QPainter(gen)
    scene.render(p, QRectF(0, 0, rect.width(), rect.height()), rect)
    p.end()
    buf.close()
    write_atomic(path, bytes(data))


def widget_png(widget, path: str) -> None:
    save_picture(widget.grab(), path)


class ExportRefused(Exception):
    """The design has a layer the PyTorch exporter cannot write (its message: one line, which one)."""


def torch_code(design, path: str) -> None:
    """The design as a runnable nn.Module (exporters/torch_code.py, as `memdesigner export torch`)."""
    from memdesigner.exporters.torch_code import ExportError, to_python

    try:
        code = to_python(design)
    except ExportError as err:
        raise ExportRefused(str(err)) from None
    write_atomic(path, code)

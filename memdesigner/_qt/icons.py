"""Layer-family icons: SVGs in resources/icons/, with a drawn fallback so a missing file never
breaks the palette."""

from __future__ import annotations

from functools import cache
from importlib import resources

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap

from memdesigner._qt.theme import family_color


def _svg_bytes(family: str) -> bytes | None:
    try:
        f = resources.files("memdesigner.resources").joinpath("icons", f"{family}.svg")
        return f.read_bytes() if f.is_file() else None
    except (OSError, ModuleNotFoundError):
        return None


def _render(family: str, size: int) -> QPixmap:
    pm = QPixmap(size, size)
    pm.fill(Qt.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.Antialiasing)
    data = _svg_bytes(family)
    drawn = False
    if data:
        try:
            from PySide6.QtSvg import QSvgRenderer

            r = QSvgRenderer(QByteArray(data))
            if r.isValid():
                r.render(p, QRectF(0, 0, size, size))
                drawn = True
        except ImportError:  # PySide6 without QtSvg: fall back to a drawn chip
            pass
    if not drawn:
        c = family_color(family)
        p.setPen(Qt.NoPen)
        p.setBrush(c)
        p.drawRoundedRect(QRectF(size * 0.1, size * 0.1, size * 0.8, size * 0.8), size * 0.2, size * 0.2)
        p.setPen(QColor("white"))
        f = p.font()
        f.setPixelSize(int(size * 0.55))
        f.setBold(True)
        p.setFont(f)
        p.drawText(QRectF(0, 0, size, size), Qt.AlignCenter, family[:1].upper())
    p.end()
    return pm


@cache
def family_icon(family: str) -> QIcon:
    """A crisp icon at the common sizes (high-DPI screens pick the larger pixmaps)."""
    icon = QIcon()
    for s in (16, 24, 32, 48, 64):
        icon.addPixmap(_render(family, s))
    return icon


@cache
def family_pixmap(family: str, size: int) -> QPixmap:
    return _render(family, size)

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


# -- toolbar actions: drawn in the palette's text colour, so they read on light and dark themes
# alike (the style's stand-ins, a maximise button for "fit" and a list view for "layout", said
# nothing about what the buttons do and were near-black on a dark toolbar)


def _ink():
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    return app.palette().color(QPalette.ButtonText) if app is not None else QColor("#1F2328")


def _draw_action(name: str, p: QPainter, s: float, ink: QColor, accent: QColor) -> None:
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QPen

    pen = QPen(ink, max(1.0, s / 12), Qt.SolidLine, Qt.RoundCap, Qt.RoundJoin)
    p.setPen(pen)
    p.setBrush(Qt.NoBrush)
    if name == "fit":  # four corner brackets around a small graph: "show everything"
        m, c = s * 0.1, s * 0.28
        for x, y, dx, dy in ((m, m, 1, 1), (s - m, m, -1, 1), (m, s - m, 1, -1), (s - m, s - m, -1, -1)):
            p.drawLine(QPointF(x, y), QPointF(x + dx * c, y))
            p.drawLine(QPointF(x, y), QPointF(x, y + dy * c))
        p.setBrush(accent)
        p.setPen(Qt.NoPen)
        r = s * 0.09
        for cx, cy in ((0.36, 0.42), (0.64, 0.42), (0.5, 0.62)):
            p.drawEllipse(QPointF(cx * s, cy * s), r, r)
    elif name == "layout":  # boxes in two columns, wired left to right: "arrange in columns"
        w, h = s * 0.28, s * 0.2
        boxes = [(0.08, 0.14), (0.08, 0.62), (0.64, 0.38)]
        p.drawLine(QPointF((0.08 * s) + w, 0.24 * s), QPointF(0.64 * s, 0.48 * s))
        p.drawLine(QPointF((0.08 * s) + w, 0.72 * s), QPointF(0.64 * s, 0.48 * s))
        p.setBrush(accent)
        for x, y in boxes:
            p.drawRoundedRect(QRectF(x * s, y * s, w, h), s * 0.04, s * 0.04)
    elif name == "zoom_reset":  # a magnifier with the whole range under it
        p.drawEllipse(QRectF(s * 0.12, s * 0.12, s * 0.5, s * 0.5))
        p.drawLine(QPointF(s * 0.55, s * 0.55), QPointF(s * 0.86, s * 0.86))
        p.setPen(QPen(accent, max(1.0, s / 12), Qt.SolidLine, Qt.RoundCap))
        p.drawLine(QPointF(s * 0.24, s * 0.37), QPointF(s * 0.5, s * 0.37))
    else:
        raise KeyError(name)


def _render_action(name: str, size: int, ink: QColor) -> QPixmap:
    pm = QPixmap(size, size)
    pm.fill(Qt.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.Antialiasing)
    _draw_action(name, p, float(size), ink, family_color("convolution" if name != "layout" else "dense"))
    p.end()
    return pm


def action_icon(name: str) -> QIcon:
    """'fit', 'layout' or 'zoom_reset' in the current palette's button-text colour."""
    ink = _ink()
    return _action_icon(name, ink.rgba())


@cache
def _action_icon(name: str, rgba: int) -> QIcon:
    ink = QColor.fromRgba(rgba)
    icon = QIcon()
    for s in (16, 24, 32, 48):
        icon.addPixmap(_render_action(name, s, ink))
    return icon

"""Colours and fonts shared by every widget, chosen to read well on light and dark palettes."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from memdesigner.colors import (  # noqa: F401  (re-exported: widgets read them as theme.X)
    BAD_COLOR,
    CATEGORY_COLORS,
    CATEGORY_LABELS,
    OK_COLOR,
    PHASE_COLORS,
    PHASE_LABELS,
    WARN_COLOR,
)

# one hue per layer family: the node header, the palette icon and the table agree
FAMILY_COLORS = {
    "inputs": "#4C9F70",
    "convolution": "#3E7CB1",
    "dense": "#6C5CE7",
    "pooling": "#2A9D8F",
    "normalization": "#E9A23B",
    "activation": "#E76F51",
    "merge": "#8D6E63",
    "tensor": "#607D8B",
    "recurrent": "#AB47BC",
    "attention": "#D6457A",
    "output": "#C0392B",
    "generic": "#7F8C8D",
}


def family_color(family: str) -> QColor:
    return QColor(FAMILY_COLORS.get(family, FAMILY_COLORS["generic"]))


def is_dark() -> bool:
    """Dark when the window background is darker than its text (follows the system palette)."""
    app = QApplication.instance()
    if app is None:
        return False
    pal = app.palette()
    return pal.color(QPalette.Window).lightness() < pal.color(QPalette.WindowText).lightness()


def muted() -> str:
    """Secondary text: the text colour blended 40 % towards the background, readable on light and
    dark palettes alike (a palette's placeholder colour is often too faint on dark ones)."""
    app = QApplication.instance()
    if app is None:
        return "#6b7280"
    pal = app.palette()
    fg, bg = pal.color(QPalette.WindowText), pal.color(QPalette.Window)
    mix = [round(0.6 * a + 0.4 * b) for a, b in zip(fg.getRgb()[:3], bg.getRgb()[:3])]
    return "#" + "".join(f"{c:02x}" for c in mix)


_CACHE: dict = {}


def canvas_colors() -> dict:
    """Background, grid, node body and text colours for the node editor (cached per palette:
    items ask on every paint)."""
    key = QApplication.instance().palette().cacheKey()
    if _CACHE.get("key") != key:
        _CACHE["key"], _CACHE["colors"] = key, _canvas_colors()
    return _CACHE["colors"]


def _canvas_colors() -> dict:
    pal = QApplication.instance().palette()
    if is_dark():
        return {"bg": QColor("#1E1F22"), "grid": QColor("#2A2C30"), "grid_major": QColor("#34373C"),
                "body": QColor("#2B2D31"), "text": QColor("#E8E8E8"), "muted": QColor("#A0A4AA"),
                "edge": QColor("#8A9099"), "select": QColor("#4EA1FF"), "border": QColor("#45484E")}
    return {"bg": QColor("#F7F8FA"), "grid": QColor("#ECEEF1"), "grid_major": QColor("#E0E3E8"),
            "body": pal.color(QPalette.Base) if pal.color(QPalette.Base).lightness() > 200 else QColor("#FFFFFF"),
            "text": QColor("#1F2328"), "muted": QColor("#5F6670"), "edge": QColor("#7A828C"),
            "select": QColor("#1A73E8"), "border": QColor("#C9CED6")}


def plot_colors() -> dict:
    if is_dark():
        return {"bg": "#1E1F22", "fg": "#D0D3D8", "grid": 60}
    return {"bg": "#FFFFFF", "fg": "#3A3F45", "grid": 40}

"""A connection: a smooth curve from an output port to an input port, labelled with the tensor
shape that flows along it."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF, QPainter, QPainterPath, QPainterPathStroker, QPen
from PySide6.QtWidgets import QGraphicsItem

from memdesigner._qt import theme
from memdesigner.model.design import Edge


def curve(a: QPointF, b: QPointF) -> QPainterPath:
    """An S-curve from an output port to an input port on its right; an edge that runs backwards
    (a deep network wrapped into bands) goes round: out to the right, along the gap between the
    bands, and into the input from the left, instead of cutting across the band."""
    p = QPainterPath(a)
    if b.x() >= a.x() - 1.0 or abs(b.y() - a.y()) < 1.0:
        dx = max(40.0, abs(b.x() - a.x()) * 0.5)
        p.cubicTo(QPointF(a.x() + dx, a.y()), QPointF(b.x() - dx, b.y()), b)
        return p
    r = 24.0
    ymid = (a.y() + b.y()) / 2
    down = 1.0 if b.y() > a.y() else -1.0
    x1, x2 = a.x() + 2 * r, b.x() - 2 * r
    p.cubicTo(QPointF(x1, a.y()), QPointF(x1, a.y()), QPointF(x1, a.y() + down * r))
    p.lineTo(QPointF(x1, ymid - down * r))
    p.cubicTo(QPointF(x1, ymid), QPointF(x1, ymid), QPointF(x1 - r, ymid))
    p.lineTo(QPointF(x2 + r, ymid))
    p.cubicTo(QPointF(x2, ymid), QPointF(x2, ymid), QPointF(x2, ymid + down * r))
    p.lineTo(QPointF(x2, b.y() - down * r))
    p.cubicTo(QPointF(x2, b.y()), QPointF(x2, b.y()), b)
    return p


_SELECTABLE = QGraphicsItem.GraphicsItemFlag.ItemIsSelectable  # enum lookups are slow in PySide6 6.x
_NO_BRUSH = Qt.BrushStyle.NoBrush
_SOLID, _ROUND, _CENTER = Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap, Qt.AlignmentFlag.AlignCenter
_ELIDE = Qt.TextElideMode.ElideRight
_AA = QPainter.RenderHint.Antialiasing
_NO_RECT = QRectF()

_FONT = QFont()
_FONT.setPointSizeF(7.5)
_METRICS: list = []  # QFontMetricsF(_FONT), made once a QGuiApplication exists


_SIZES: dict = {}  # label -> (width, height) of its box: 12,000 edges share a few labels


def _metrics() -> QFontMetricsF:
    if not _METRICS:
        _METRICS.append(QFontMetricsF(_FONT))
    return _METRICS[0]


def _label_size(text: str) -> tuple[float, float]:
    size = _SIZES.get(text)
    if size is None:
        if len(_SIZES) > 4096:
            _SIZES.clear()
        fm = _metrics()
        size = _SIZES[text] = (fm.horizontalAdvance(text) + 10, fm.height() + 2)
    return size
DETAIL_LOD = 0.4  # below this zoom an edge is a thin aliased line without its label
LABEL_LOD = 0.5  # the shape label is drawn from this zoom on
LABEL_BOX = (240.0, 24.0)  # room kept for the label at the curve's middle (a longer one is elided):
# the bounds do not depend on the text, so it can be composed when first painted


def vcurve(a: QPointF, b: QPointF) -> QPainterPath:
    """The top-to-bottom layout's edge: down out of the output port, into the input from above."""
    p = QPainterPath(a)
    dy = max(40.0, abs(b.y() - a.y()) * 0.5)
    p.cubicTo(QPointF(a.x(), a.y() + dy), QPointF(b.x(), b.y() - dy), b)
    return p


def curve_bounds(a: tuple, b: tuple, vertical: bool) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) holding curve(a, b) (or vcurve): the box of its control points,
    which holds a Bézier curve, found by arithmetic instead of building the path (a 10,000-layer
    design routes 12,000 edges at open; the path itself is made when first painted)."""
    (ax, ay), (bx, by) = a, b
    if vertical:
        dy = max(40.0, abs(by - ay) * 0.5)
        return min(ax, bx), min(ay, by - dy), max(ax, bx), max(ay + dy, by)
    if bx >= ax - 1.0 or abs(by - ay) < 1.0:
        dx = max(40.0, abs(bx - ax) * 0.5)
        return min(ax, bx - dx), min(ay, by), max(ax + dx, bx), max(ay, by)
    return bx - 48.0, min(ay, by), ax + 48.0, max(ay, by)  # round the back: 2 r either side


class EdgeItem(QGraphicsItem):
    _label = ""
    _labeler = None  # the scene: label_gen and fill_edge (the label is composed when needed)
    _lgen = 0
    _shown = False  # its label was painted: a new result re-labels it at once

    def __init__(self, edge: Edge, src_item, dst_item):
        super().__init__()
        self.edge = edge
        self.src_item = src_item
        self.dst_item = dst_item
        self._path: QPainterPath | None = None
        self.setFlag(_SELECTABLE)
        self._a, self._b = self._ports()  # (not in a scene yet: no geometry change to announce)
        self._layout_label()

    def _ports(self) -> tuple[tuple, tuple]:
        e, dst = self.edge, self.dst_item
        a = self.src_item.port_xy(e.src_port, True)
        b = dst.port_xy(e.dst_port, False) if dst._counts[0] else (dst.x(), dst.y())
        return a, b

    def update_path(self):
        """The ends moved (or the ports): new bounds now, the curve itself when next needed."""
        self.prepareGeometryChange()
        self._a, self._b = self._ports()
        self._path = None
        self._layout_label()
        self.update()

    @property
    def path(self) -> QPainterPath:
        if self._path is None:
            a, b = QPointF(*self._a), QPointF(*self._b)
            self._path = vcurve(a, b) if getattr(self.src_item, "vertical", False) else curve(a, b)
        return self._path

    def ends(self) -> tuple[QPointF, QPointF]:
        """Output and input port centres (the scene's zoomed-out overview draws a line between)."""
        return QPointF(*self._a), QPointF(*self._b)

    @property
    def label(self) -> str:
        """The shape flowing along it, from the scene's last result."""
        lab = self._labeler
        if lab is not None and self._lgen != lab.label_gen:
            lab.fill_edge(self, quiet=True)
        return self._label

    def set_label(self, text: str, quiet: bool = False):
        """quiet: from inside this item's paint (no repaint). The bounds keep room for any label."""
        if text != self._label:
            self._label = text
            self._place_label()
            if not quiet:
                self.update()

    def toolTip(self) -> str:  # noqa: N802 (Qt's name)
        """Composed when asked (the scene's helpEvent), not kept for every edge."""
        return f"{self.edge.src} → {self.edge.dst}: {self.label}" if self.label else ""

    def _font(self) -> QFont:
        return _FONT

    def _place_label(self):
        if not self._label:
            self._label_rect = _NO_RECT
        else:  # at the middle of the curve: each curve is point-symmetric about its ends' midpoint
            w, h = _label_size(self._label)
            w, h = min(w, LABEL_BOX[0]), min(h, LABEL_BOX[1])
            mx, my = (self._a[0] + self._b[0]) / 2, (self._a[1] + self._b[1]) / 2
            self._label_rect = QRectF(mx - w / 2, my - h / 2, w, h)

    def _layout_label(self):
        self._place_label()
        # computed once per change, not per call: Qt asks for it many times per frame
        x0, y0, x1, y1 = curve_bounds(self._a, self._b, getattr(self.src_item, "vertical", False))
        mx, my = (self._a[0] + self._b[0]) / 2, (self._a[1] + self._b[1]) / 2
        w, h = LABEL_BOX[0] / 2, LABEL_BOX[1] / 2
        x0, y0, x1, y1 = min(x0 - 6, mx - w), min(y0 - 6, my - h), max(x1 + 6, mx + w), max(y1 + 6, my + h)
        self._bounds = QRectF(x0, y0, x1 - x0, y1 - y0)

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        s = QPainterPathStroker()
        s.setWidth(10)
        p = s.createStroke(self.path)
        if self.label and not self._label_rect.isNull():
            p.addRect(self._label_rect)
        return p

    def paint(self, painter, option, widget=None):
        c = theme.canvas_colors()
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        color = c["select"] if self.isSelected() else c["edge"]
        if lod < DETAIL_LOD:  # zoomed out: a one-pixel cosmetic line is all the eye can see
            painter.setRenderHint(_AA, False)
            painter.setPen(QPen(color, 2 if self.isSelected() else 0))
            painter.drawPath(self.path)
            return
        painter.setRenderHint(_AA)
        painter.setPen(QPen(color, 2.4 if self.isSelected() else 1.6, _SOLID, _ROUND))
        painter.setBrush(_NO_BRUSH)
        painter.drawPath(self.path)
        if lod >= LABEL_LOD:
            self._shown = True
        if lod >= LABEL_LOD and self.label:  # the shape label only where it is readable
            painter.setPen(QPen(c["border"], 0.8))
            painter.setBrush(c["bg"])
            painter.drawRoundedRect(self._label_rect, 6, 6)
            painter.setFont(self._font())
            painter.setPen(c["muted"])
            text = self._label
            if _label_size(text)[0] > LABEL_BOX[0]:
                text = _metrics().elidedText(text, _ELIDE, LABEL_BOX[0] - 10)
            painter.drawText(self._label_rect, _CENTER, text)

"""A connection: a smooth curve from an output port to an input port, labelled with the tensor
shape that flows along it."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF, QPainterPath, QPainterPathStroker, QPen
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


_FONT = QFont()
_FONT.setPointSizeF(7.5)
DETAIL_LOD = 0.4  # below this zoom an edge is a thin aliased line without its label


def vcurve(a: QPointF, b: QPointF) -> QPainterPath:
    """The top-to-bottom layout's edge: down out of the output port, into the input from above."""
    p = QPainterPath(a)
    dy = max(40.0, abs(b.y() - a.y()) * 0.5)
    p.cubicTo(QPointF(a.x(), a.y() + dy), QPointF(b.x(), b.y() - dy), b)
    return p


class EdgeItem(QGraphicsItem):
    def __init__(self, edge: Edge, src_item, dst_item):
        super().__init__()
        self.edge = edge
        self.src_item = src_item
        self.dst_item = dst_item
        self.label = ""
        self.path = QPainterPath()
        self._label_rect = QRectF()
        self._bounds = QRectF()
        self.setFlag(QGraphicsItem.ItemIsSelectable)
        self.setZValue(0)
        self.setAcceptHoverEvents(True)
        self.update_path()

    def _ports(self):
        e = self.edge
        a = self.src_item.port_point(e.src_port, True)
        b = self.dst_item.port_point(e.dst_port, False) if self.dst_item._counts[0] else self.dst_item.scenePos()
        return a, b

    def update_path(self):
        self.prepareGeometryChange()
        a, b = self._ports()
        self.path = vcurve(a, b) if getattr(self.src_item, "vertical", False) else curve(a, b)
        self._layout_label()
        self.update()

    def ends(self) -> tuple[QPointF, QPointF]:
        """Output and input port centres (the scene's zoomed-out overview draws a line between)."""
        return self.path.pointAtPercent(0.0), self.path.currentPosition()

    def set_label(self, text: str):
        if text != self.label:
            self.prepareGeometryChange()
            self.label = text
            self._layout_label()
            self.setToolTip(f"{self.edge.src} → {self.edge.dst}: {text}" if text else "")
            self.update()

    def _font(self) -> QFont:
        return _FONT

    def _layout_label(self):
        if not self.label:
            self._label_rect = QRectF()
        else:
            fm = QFontMetricsF(_FONT)
            w, h = fm.horizontalAdvance(self.label) + 10, fm.height() + 2
            mid = self.path.pointAtPercent(0.5)
            self._label_rect = QRectF(mid.x() - w / 2, mid.y() - h / 2, w, h)
        # computed once per change, not per call: Qt asks for it many times per frame
        self._bounds = self.path.boundingRect().adjusted(-6, -6, 6, 6).united(self._label_rect)

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        s = QPainterPathStroker()
        s.setWidth(10)
        p = s.createStroke(self.path)
        if not self._label_rect.isNull():
            p.addRect(self._label_rect)
        return p

    def paint(self, painter, option, widget=None):
        c = theme.canvas_colors()
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        color = c["select"] if self.isSelected() else c["edge"]
        if lod < DETAIL_LOD:  # zoomed out: a one-pixel cosmetic line is all the eye can see
            painter.setRenderHint(painter.RenderHint.Antialiasing, False)
            painter.setPen(QPen(color, 2 if self.isSelected() else 0))
            painter.drawPath(self.path)
            return
        painter.setRenderHint(painter.RenderHint.Antialiasing)
        painter.setPen(QPen(color, 2.4 if self.isSelected() else 1.6, Qt.SolidLine, Qt.RoundCap))
        painter.setBrush(Qt.NoBrush)
        painter.drawPath(self.path)
        if self.label and lod >= 0.5:  # the shape label only where it is readable
            painter.setPen(QPen(c["border"], 0.8))
            painter.setBrush(c["bg"])
            painter.drawRoundedRect(self._label_rect, 6, 6)
            painter.setFont(self._font())
            painter.setPen(c["muted"])
            painter.drawText(self._label_rect, Qt.AlignCenter, self.label)

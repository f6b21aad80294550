"""The plots' horizontal grid, drawn as a few lines straight into the view.

pyqtgraph draws a grid as part of the axis: the left axis then spans the whole plot, and its
cached pixmap (the axis is cached so a hover does not replay its picture) is the size of the plot.
Each change of the y-range (an estimate with another peak: a batch or settings change) replayed
the picture into that plot-sized translucent pixmap again, ~4 ms of the repaint. Here the axis
stays a strip (its pixmap the labels and ticks alone) and the grid lines, at the axis's own tick
values and with its alphas, are drawn uncached: a handful of one-pixel lines."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen


class YGrid(pg.GraphicsObject):
    """Horizontal lines across the view at ``axis``'s tick values (each tick level fainter, as
    pyqtgraph's own grid: alpha·255/(level+1), thinned when the ticks are dense)."""

    def __init__(self, axis: pg.AxisItem, color, alpha: float = 0.15):
        super().__init__()
        self.axis = axis
        self.color = QColor(color)
        self.alpha = alpha
        self._lines: tuple = (None, [])  # (view rect and height, lines): ticks found once per range
        self.setZValue(-19)  # over the (opaque) phase bands, under every other plot item
        self.setFlag(self.GraphicsItemFlag.ItemIgnoresParentOpacity, True)

    def viewRangeChanged(self):
        self.prepareGeometryChange()
        self.update()

    def boundingRect(self) -> QRectF:
        vr = self.viewRect()
        return QRectF() if vr is None else QRectF(vr)

    def lines(self) -> list[tuple[float, int]]:
        """(y, alpha 0-255) of each line drawn now, in data units."""
        vr = self.viewRect()
        height = self.axis.geometry().height()
        if vr is None or height <= 0:
            return []
        y0, y1 = sorted((vr.top(), vr.bottom()))
        key = (y0, y1, height)
        if self._lines[0] == key:
            return self._lines[1]
        out, seen = [], set()
        for i, (_spacing, values) in enumerate(self.axis.tickValues(y0, y1, height)):
            a = 255 / (i + 1) * self.alpha * min(max(0.05 * height / (len(values) + 1), 0.0), 1.0)
            for v in values:
                if y0 <= v <= y1 and v not in seen:
                    seen.add(v)
                    out.append((v, int(a)))
        self._lines = (key, out)
        return out

    def paint(self, p: QPainter, *_):
        vr = self.viewRect()
        if vr is None:
            return
        p.setRenderHint(QPainter.Antialiasing, False)
        x0, x1 = vr.left(), vr.right()
        for y, a in self.lines():
            c = QColor(self.color)
            c.setAlpha(a)
            pen = QPen(c, 0, Qt.SolidLine)
            pen.setCosmetic(True)
            p.setPen(pen)
            p.drawLine(QLineF(x0, y, x1, y))


def add_y_grid(pw: pg.PlotWidget, color, alpha: float = 0.15) -> YGrid:
    """``pw``'s y grid as a YGrid in its view (instead of ``showGrid(y=True)``)."""
    grid = YGrid(pw.getAxis("left"), color, alpha)
    pw.addItem(grid, ignoreBounds=True)
    return grid

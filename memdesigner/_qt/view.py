"""The canvas widget: zoom with the wheel, pan with the middle button (or Space+drag), rubber-band
selection, fit to view, and drops from the palette."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsView, QStyle, QStyleOptionRubberBand

LAYER_MIME = "application/x-memdesigner-layer"
STRIP_ZOOM = 0.4  # fit-to-view below this zoom (cards unreadable) ...
STRIP_SHARE = 0.2  # ... of a design filling less than this share of the other side: a strip


class GraphView(QGraphicsView):
    layer_dropped = Signal(str, QPointF)  # layer type, scene position
    view_changed = Signal()  # zoom or scroll moved (the minimap follows)

    def __init__(self, scene, parent=None):
        super().__init__(scene, parent)
        self.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing | QPainter.SmoothPixmapTransform)
        self.setDragMode(QGraphicsView.RubberBandDrag)
        self.setRubberBandSelectionMode(Qt.IntersectsItemShape)
        self.setTransformationAnchor(QGraphicsView.AnchorUnderMouse)
        # one rectangle per frame: with the smart mode, selecting 1,000 layers left a clip region of
        # 1,000 rectangles that every edge's stroke was clipped against (1.4 s per frame)
        self.setViewportUpdateMode(QGraphicsView.BoundingRectViewportUpdate)
        self.setAcceptDrops(True)
        self.setFocusPolicy(Qt.StrongFocus)
        self._panning = None
        self._space = False
        # (the scene rect is the scene's: ±50,000, grown to hold a design that runs further)
        if hasattr(scene, "building_changed"):
            scene.building_changed.connect(self._building)
        self.horizontalScrollBar().valueChanged.connect(self.view_changed)
        self.verticalScrollBar().valueChanged.connect(self.view_changed)

    def _building(self, on: bool):
        """While a big design's items arrive in slices, the canvas is not repainted after each
        slice (every frame would paint all items built so far: quadratic); the window still takes
        input, and the finished canvas is painted once."""
        self.viewport().setUpdatesEnabled(not on)
        if not on:
            self.viewport().update()

    def paintEvent(self, ev):  # noqa: N802 (Qt's name)
        """Zoomed far out on a big design the scene draws everything itself in drawBackground (its
        overview): the items are not asked at all. Qt's own paint would still walk the index for
        every item on screen, sort them and ask each its bounds — 22,000 Python calls, 60-100 ms
        a frame at 10,000 layers, for items that paint nothing at that zoom."""
        scene = self.scene()
        if not getattr(scene, "overview", False):
            super().paintEvent(ev)
            return
        p = QPainter(self.viewport())
        p.setClipRegion(ev.region())
        p.setTransform(self.viewportTransform())
        scene.drawBackground(p, self.mapToScene(ev.rect()).boundingRect())
        p.resetTransform()
        band = self.rubberBandRect()
        if not band.isNull():  # what Qt's paint draws over the items while selecting
            opt = QStyleOptionRubberBand()
            opt.initFrom(self.viewport())
            opt.rect = band
            opt.shape = QStyleOptionRubberBand.Shape.Rectangle  # (QRubberBand.Rectangle)
            self.style().drawControl(QStyle.ControlElement.CE_RubberBand, opt, p, self.viewport())
        p.end()

    def _zoomed(self):
        """Tell the scene the zoom (level of detail) and the minimap the new viewport."""
        scene = self.scene()
        if hasattr(scene, "set_zoom"):
            scene.set_zoom(self.transform().m11())
        self.view_changed.emit()

    def visible_scene_rect(self) -> QRectF:
        return self.mapToScene(self.viewport().rect()).boundingRect()

    # -- zoom / pan / fit -------------------------------------------------------------------
    def zoom_by(self, factor: float):
        s = self.transform().m11() * factor
        if 0.02 <= s <= 4.0:
            self.scale(factor, factor)
            self._zoomed()

    def wheelEvent(self, ev):
        if ev.modifiers() & Qt.ShiftModifier or ev.angleDelta().y() == 0:
            return super().wheelEvent(ev)
        self.zoom_by(1.0015 ** ev.angleDelta().y())
        ev.accept()

    def fit_all(self):
        scene = self.scene()
        # from the design's positions (cheap at 10,000 layers, right while items are being built)
        rect = scene.content_rect() if hasattr(scene, "content_rect") else scene.itemsBoundingRect()
        if rect.isNull():
            self.resetTransform()
            self.centerOn(0, 0)
            self._zoomed()
            return
        rect = rect.adjusted(-40, -40, 40, 40)
        vp = self.viewport().rect()
        sx, sy = vp.width() / max(rect.width(), 1.0), vp.height() / max(rect.height(), 1.0)
        if min(sx, sy) < STRIP_ZOOM and min(sx, sy) < STRIP_SHARE * max(sx, sy):
            # a long strip (a deep chain laid out top to bottom is one column 100 times taller than
            # wide): the whole of it would be a line of specks one pixel wide. Fill its narrow side
            # instead, at most 1:1, from its start (the top of a column, the left end of a row).
            s = min(max(sx, sy), 1.0)
            self.resetTransform()
            self.scale(s, s)
            if sy < sx:
                self.centerOn(rect.center().x(), rect.top() + vp.height() / s / 2)
            else:
                self.centerOn(rect.left() + vp.width() / s / 2, rect.center().y())
            self._zoomed()
            return
        self.fitInView(rect, Qt.KeepAspectRatio)
        if self.transform().m11() > 1.2:  # a tiny design should not be blown up
            self.resetTransform()
            self.scale(1.2, 1.2)
            self.centerOn(rect.center())
        self._zoomed()

    def keyPressEvent(self, ev):
        if ev.key() == Qt.Key_Space and not ev.isAutoRepeat():
            self._space = True
            self.setDragMode(QGraphicsView.ScrollHandDrag)
            return
        super().keyPressEvent(ev)

    def keyReleaseEvent(self, ev):
        if ev.key() == Qt.Key_Space and not ev.isAutoRepeat():
            self._space = False
            self.setDragMode(QGraphicsView.RubberBandDrag)
            return
        super().keyReleaseEvent(ev)

    def mousePressEvent(self, ev):
        if ev.button() == Qt.MiddleButton:
            self._panning = ev.position()
            self.setCursor(Qt.ClosedHandCursor)
            ev.accept()
            return
        super().mousePressEvent(ev)

    def mouseMoveEvent(self, ev):
        if self._panning is not None:
            d = ev.position() - self._panning
            self._panning = ev.position()
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - int(d.x()))
            self.verticalScrollBar().setValue(self.verticalScrollBar().value() - int(d.y()))
            ev.accept()
            return
        super().mouseMoveEvent(ev)

    def mouseReleaseEvent(self, ev):
        if ev.button() == Qt.MiddleButton and self._panning is not None:
            self._panning = None
            self.unsetCursor()
            ev.accept()
            return
        super().mouseReleaseEvent(ev)

    # -- drops from the palette -------------------------------------------------------------
    def dragEnterEvent(self, ev):
        if ev.mimeData().hasFormat(LAYER_MIME):
            ev.acceptProposedAction()
        else:
            super().dragEnterEvent(ev)

    def dragMoveEvent(self, ev):
        if ev.mimeData().hasFormat(LAYER_MIME):
            ev.acceptProposedAction()
        else:
            super().dragMoveEvent(ev)

    def dropEvent(self, ev):
        if ev.mimeData().hasFormat(LAYER_MIME):
            name = bytes(ev.mimeData().data(LAYER_MIME)).decode()
            self.layer_dropped.emit(name, self.mapToScene(ev.position().toPoint()))
            ev.acceptProposedAction()
        else:
            super().dropEvent(ev)

"""The canvas widget: zoom with the wheel, pan with the middle button (or Space+drag), rubber-band
selection, fit to view, and drops from the palette."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsView, QStyle, QStyleOptionRubberBand

LAYER_MIME = "application/x-memdesigner-layer"
STRIP_ZOOM = 0.4  # fit-to-view below this zoom (cards unreadable) ...
STRIP_SHARE = 0.2  # ... of a design filling less than this share of the other side: a strip
MIN_ZOOM, MAX_ZOOM = 0.02, 4.0  # the wheel's range (fit-to-view may go below: the wheel still zooms back in)


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
        self._frozen = False  # repaints held back while a big design is built in slices
        self._frame = QTimer(self)  # one frame for the user's zooms and scrolls meanwhile (coalesced)
        self._frame.setSingleShot(True)
        self._frame.setInterval(0)
        self._frame.timeout.connect(self._paint_frame)
        # (the scene rect is the scene's: ±50,000, grown to hold a design that runs further)
        if hasattr(scene, "building_changed"):
            scene.building_changed.connect(self._building)
        self.horizontalScrollBar().valueChanged.connect(self.view_changed)
        self.verticalScrollBar().valueChanged.connect(self.view_changed)
        self.view_changed.connect(self._moved)

    def _building(self, on: bool):
        """While a big design's items arrive in slices, the canvas is not repainted after each
        slice (every frame would paint all items built so far: quadratic); the window still takes
        input, and the finished canvas is painted once. A zoom or scroll meanwhile is painted
        (one frame per burst of wheel steps): the wheel over a 10,000-layer canvas being built
        used to change nothing on screen until the build ended (seconds, 20 s on a busy machine)."""
        self._frozen = on
        self.viewport().setUpdatesEnabled(not on)
        if not on:
            self._frame.stop()
            self.viewport().update()

    def _moved(self):
        if self._frozen and not self._frame.isActive():
            self._frame.start()

    def _paint_frame(self):
        """One frame of the canvas as far as it is built, then repaints held back again."""
        if not self._frozen:
            return
        vp = self.viewport()
        vp.setUpdatesEnabled(True)
        vp.repaint()
        vp.setUpdatesEnabled(False)

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
        """Zoom within MIN_ZOOM..MAX_ZOOM, clamped at the ends; from outside the range only
        towards it (a 10,000-layer design fitted to the view sits below MIN_ZOOM: a wheel step
        in that stayed below it was refused, and the wheel did nothing there)."""
        s = self.transform().m11()
        want = s * factor
        if factor > 1.0:
            want = min(want, max(MAX_ZOOM, s)) if s < MAX_ZOOM else s
        else:
            want = max(want, min(MIN_ZOOM, s)) if s > MIN_ZOOM else s
        if want != s:
            self.scale(want / s, want / s)
        self._zoomed()  # (zoom_by(1.0) tells the scene the zoom)

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

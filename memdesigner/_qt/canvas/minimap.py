"""A minimap: a small overview of the whole canvas in a corner of the canvas, with the main view's
visible area as a rectangle. Click or drag in it to move the main view there.

A QGraphicsView of the same scene (its mapping and fitting), but it paints a cached picture of
its own — layers as coloured blocks, edges as one batch of lines — instead of asking every item
to paint: at 10,000 layers that is tens of ms once after a change instead of a second per frame."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QFrame, QGraphicsView

from memdesigner._qt import theme
from memdesigner._qt.canvas.node_item import WIDTH

SIZE = (220, 150)


class Minimap(QGraphicsView):
    def __init__(self, view):
        super().__init__(view.scene(), view)
        self.main = view
        self.setObjectName("minimap")
        self.setFixedSize(*SIZE)
        self.setInteractive(False)  # no selecting or dragging layers in here
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Box)
        self.setRenderHints(QPainter.RenderHint(0))
        self.setViewportUpdateMode(QGraphicsView.NoViewportUpdate)  # repainted when this says so
        self._picture: QPixmap | None = None
        self.setToolTip("Overview: click or drag to move the canvas")
        self.setCursor(Qt.PointingHandCursor)
        self._dragging = False
        self._fit = QTimer(self)  # coalesce: a big design's items arrive in slices
        self._fit.setSingleShot(True)
        self._fit.setInterval(300)
        self._fit.timeout.connect(self.fit)
        view.view_changed.connect(self.viewport().update)
        scene = view.scene()
        if hasattr(scene, "layout_changed"):  # layers added, removed or moved (not every repaint)
            scene.layout_changed.connect(self._fit.start)
        else:
            scene.changed.connect(lambda _rects: self._fit.start())
        self.place()
        self.fit()

    def place(self):
        """Bottom-right corner of the canvas."""
        vp = self.main.viewport()
        self.move(vp.x() + vp.width() - self.width() - 8, vp.y() + vp.height() - self.height() - 8)

    def fit(self):
        scene = self.scene()
        rect = scene.content_rect() if hasattr(scene, "content_rect") else scene.itemsBoundingRect()
        if rect.isNull():
            rect = QRectF(-200, -150, 400, 300)
        self.fitInView(rect.adjusted(-60, -60, 60, 60), Qt.KeepAspectRatio)
        self._picture = None
        self.viewport().update()

    def _render(self) -> QPixmap:
        scene, vp = self.scene(), self.viewport()
        pm = QPixmap(vp.size())
        c = theme.canvas_colors()
        pm.fill(c["bg"])
        p = QPainter(pm)
        p.setTransform(self.viewportTransform())
        if hasattr(scene, "_overview_lines"):
            p.setPen(QPen(c["edge"], 0))
            p.drawPath(scene._overview_lines())
        p.setPen(Qt.NoPen)
        if hasattr(scene, "overview_blocks"):  # the scene's cached rectangles (its overview fills them)
            for family, path in scene.overview_blocks()[0].items():  # one call per colour
                p.setBrush(theme.family_color(family))
                p.drawPath(path)
        else:
            by_family: dict[str, list] = {}
            for it in getattr(scene, "nodes", {}).values():
                pos = it.pos()
                by_family.setdefault(it.family, []).append(QRectF(pos.x(), pos.y(), WIDTH, it.height))
            for family, rects in by_family.items():
                p.setBrush(theme.family_color(family))
                p.drawRects(rects)
        p.end()
        return pm

    def paintEvent(self, ev):
        if self._picture is None or self._picture.size() != self.viewport().size():
            self._picture = self._render()
        p = QPainter(self.viewport())
        p.drawPixmap(0, 0, self._picture)
        p.setTransform(self.viewportTransform())
        fill = QColor("#1A73E8")
        fill.setAlpha(40)
        p.setBrush(fill)
        p.setPen(QPen(QColor("#1A73E8"), 0))
        p.drawRect(self.main.visible_scene_rect())
        p.end()

    def pan_to(self, scene_pos: QPointF):
        self.main.centerOn(scene_pos)
        self.viewport().update()

    def mousePressEvent(self, ev):
        if ev.button() == Qt.LeftButton:
            self._dragging = True
            self.pan_to(self.mapToScene(ev.position().toPoint()))
            ev.accept()
            return
        super().mousePressEvent(ev)

    def mouseMoveEvent(self, ev):
        if self._dragging:
            self.pan_to(self.mapToScene(ev.position().toPoint()))
            ev.accept()
            return
        super().mouseMoveEvent(ev)

    def mouseReleaseEvent(self, ev):
        if ev.button() == Qt.LeftButton and self._dragging:
            self._dragging = False
            ev.accept()
            return
        super().mouseReleaseEvent(ev)

    def wheelEvent(self, ev):
        ev.ignore()  # no zooming the overview


def install(view) -> Minimap:
    """A minimap over the canvas's bottom-right corner, kept there when the canvas resizes."""
    from PySide6.QtCore import QEvent, QObject

    mm = Minimap(view)

    class _Follow(QObject):
        def eventFilter(self, obj, ev):
            if ev.type() == QEvent.Resize:
                mm.place()
                mm._fit.start()
            return False

    f = _Follow(mm)
    view.viewport().installEventFilter(f)
    mm._follow = f
    mm.show()
    return mm

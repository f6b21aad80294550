"""A layer on the canvas: a card with a family-coloured header, the node's name, its output shape,
its parameter count and a memory badge; ports on the left (inputs) and right (outputs)."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsEllipseItem, QGraphicsItem

from memdesigner._qt import theme
from memdesigner._qt.icons import family_pixmap
from memdesigner.model.design import Node

WIDTH = 200.0
HEADER = 26.0
LINE = 18.0
PORT_R = 6.0
PORT_GAP = 20.0
BLOCK_LOD = 0.4  # below this zoom a node is a coloured block (no name, shapes, ports)
LABEL_LOD = 0.2  # below this zoom even the layer type on the block is left out

# Enum members looked up once: in PySide6 6.x each ``Qt.X`` costs 1-7 µs and ``flag | flag`` 2 µs
# more, a third of building 10,000 items and a good part of each paint.
_FLAGS = QGraphicsItem.GraphicsItemFlag.ItemIsMovable | QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
_CACHE = QGraphicsItem.CacheMode.DeviceCoordinateCache
_NO_PEN = Qt.PenStyle.NoPen
_DASH = Qt.PenStyle.DashLine
_NO_BRUSH = Qt.BrushStyle.NoBrush
_LEFT = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft
_CENTER = Qt.AlignmentFlag.AlignCenter
_WRAP = Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft | Qt.TextFlag.TextWordWrap
_ELIDE = Qt.TextElideMode.ElideRight
_AA = QPainter.RenderHint.Antialiasing
_WHITE: list = []  # QColor("white"), made on first paint
_HEAD: list = []  # the header's shape (rounded on top only), made once


_FACTS: dict = {}


def _type_facts(lt) -> tuple:
    """(family, name, input names, min inputs, max inputs, outputs) of a layer type, once per type."""
    got = _FACTS.get(id(lt))
    if got is None or got[0] is not lt:  # (the type kept alive beside its facts: ids stay unique)
        got = _FACTS[id(lt)] = (lt, (lt.family, lt.name, tuple(lt.input_names), lt.min_inputs, lt.max_inputs,
                                     max(1, lt.n_outputs)))
    return got[1]


def _height(n_in: int, n_out: int) -> float:
    return max(HEADER + 3 * LINE + 12, HEADER + 14 + PORT_GAP * max(n_in, n_out, 1))


def _white() -> QColor:
    if not _WHITE:
        _WHITE.append(QColor("white"))
    return _WHITE[0]


def _head() -> QPainterPath:
    if not _HEAD:
        head = QPainterPath()
        head.addRoundedRect(QRectF(0, 0, WIDTH, HEADER + 8), 8, 8)
        clip = QPainterPath()
        clip.addRect(QRectF(0, 0, WIDTH, HEADER))
        _HEAD.append(head.intersected(clip))
    return _HEAD[0]


class PortItem(QGraphicsEllipseItem):
    """A connection point; ``is_output`` ports start drags, input ports accept them."""

    def __init__(self, parent: NodeItem, index: int, is_output: bool, label: str = ""):
        super().__init__(-PORT_R, -PORT_R, 2 * PORT_R, 2 * PORT_R, parent)
        self.node_item = parent
        self.index = index
        self.is_output = is_output
        self.label = label
        self.setAcceptHoverEvents(True)
        self.setCursor(Qt.CrossCursor)
        self.setZValue(2)
        what = "output" if is_output else "input"
        self.setToolTip(f"{what} {index}{': ' + label if label else ''} — drag to connect")
        self._hover = False
        self.restyle()

    @property
    def node_id(self) -> str:
        return self.node_item.node_id

    def restyle(self):
        c = theme.canvas_colors()
        fill = theme.family_color(self.node_item.family) if self.is_output else c["body"]
        if self._hover:
            fill = c["select"]
        self.setBrush(QBrush(fill))
        self.setPen(QPen(c["edge"], 1.6))

    def hoverEnterEvent(self, ev):
        self._hover = True
        self.restyle()
        super().hoverEnterEvent(ev)

    def hoverLeaveEvent(self, ev):
        self._hover = False
        self.restyle()
        super().hoverLeaveEvent(ev)

    def scene_center(self) -> QPointF:
        return self.mapToScene(QPointF(0, 0))


class NodeItem(QGraphicsItem):
    # Defaults live on the class and an item stores only what differs (each attribute set on a
    # Qt object costs about 0.5 µs; a 10,000-layer design builds 10,000 of these at open).
    # the texts, composed from the scene's last result when first asked (the properties below)
    _shape_text = _params_text = _mem_text = _mem_tip = _issue = _blocked = _pending = ""
    _labeler = None  # the scene: label_gen and fill_node
    _lgen = 0  # the scene's label_gen these texts are from
    _err = False  # in error, known without composing the texts (the overview outlines it)
    _shown = 0  # painted as a block (1) or in detail (2): a new result repaints it
    highlight = False
    vertical = False  # ports on top (inputs) and bottom (outputs): the top-to-bottom layout
    ports_shown = True  # the scene hides ports when zoomed out (specks nobody can hit)
    _made = False  # port items exist
    _inputs: list = []  # (replaced, never appended to, when port items are made)
    _outputs: list = []

    def __init__(self, node: Node, n_connected: int = 0):
        """n_connected: inputs already wired (a bulk build knows them: no second port layout)."""
        super().__init__()
        self.node_id = node.id
        self.name = node.name
        (self.family, self.type_name, self.input_names, self.min_inputs, self.max_inputs,
         self.n_outputs) = _type_facts(node.layer)
        self.n_connected = n_connected
        n_in, n_out = self._n_inputs(), self.n_outputs
        self._counts = (n_in, n_out)  # (inputs, outputs)
        self.height = _height(n_in, n_out)
        self._bounds = QRectF(-4.0, -4.0, WIDTH + 8, self.height + 8)
        # no itemChange override: Qt would call into Python for every change of every item (47,000
        # calls to show 1,000 layers); the scene re-routes edges where it moves nodes instead.
        # No hover events either (only the ports react to hovering; tooltips are help events).
        self.setFlags(_FLAGS)
        self.setCacheMode(_CACHE)
        self.setZValue(1)
        self.setPos(*node.pos)

    # -- ports -----------------------------------------------------------------------------------
    # Port items (hover, drag to connect, tooltip) are made only for layers painted in detail:
    # the first detailed paint draws the port circles itself and asks the scene for the items,
    # which it makes in the next event-loop turn. A 10,000-layer design would otherwise build
    # 30,000 of them at open (0.75 s), or on zooming in. Edges ask port_xy(), which is
    # arithmetic, so they need no port items either.
    def _n_inputs(self) -> int:
        if self.max_inputs is not None:
            return self.max_inputs
        return max(self.min_inputs, self.n_connected + 1)  # variadic: always one free port

    @property
    def inputs(self) -> list[PortItem]:
        self._make_ports()
        return self._inputs

    @property
    def outputs(self) -> list[PortItem]:
        self._make_ports()
        return self._outputs

    def _rebuild_ports(self):
        n_in, n_out = self._n_inputs(), self.n_outputs
        if (n_in, n_out) == self._counts and self.height:
            return
        self.prepareGeometryChange()
        self._counts = (n_in, n_out)
        self.height = _height(n_in, n_out)
        self._bounds = QRectF(-4.0, -4.0, WIDTH + 8, self.height + 8)
        had = self._made
        self._drop_ports()
        if had:
            self._make_ports()
        self.update()

    def _drop_ports(self):
        for p in self._inputs + self._outputs:
            p.setParentItem(None)
            if p.scene():
                p.scene().removeItem(p)
        self._inputs, self._outputs, self._made = [], [], False

    def _make_ports(self):
        if self._made:
            return
        self._made = True
        n_in, n_out = self._counts
        self._inputs = [PortItem(self, i, False, self.input_names[i] if i < len(self.input_names) else "")
                        for i in range(n_in)]
        self._outputs = [PortItem(self, i, True) for i in range(n_out)]
        if not self.ports_shown:
            for p in self._inputs + self._outputs:
                p.setVisible(False)
        self._place_ports()

    def port_local(self, index: int, is_output: bool) -> QPointF:
        """Left/right (the bands layout, data flowing right) or top/bottom (top-to-bottom)."""
        n = self._counts[1] if is_output else self._counts[0]
        index = max(0, min(index, n - 1))
        end = 1.0 if is_output else 0.0
        if self.vertical:
            return QPointF(WIDTH * (index + 1) / (n + 1), end * self.height)
        return QPointF(end * WIDTH, HEADER + (self.height - HEADER) * (index + 1) / (n + 1))

    def port_point(self, index: int, is_output: bool) -> QPointF:
        """A port's centre in scene coordinates (made port item or not)."""
        return QPointF(*self.port_xy(index, is_output))

    def port_xy(self, index: int, is_output: bool) -> tuple[float, float]:
        """port_point as two floats (edges are routed from these: no QPointF arithmetic)."""
        # two float getters, no QPointF made and read, no min/max calls: 12,000 edges route twice each at open
        x, y = self.x(), self.y()
        n = self._counts[1] if is_output else self._counts[0]
        if index >= n:
            index = n - 1
        if index < 0:
            index = 0
        if self.vertical:
            return x + WIDTH * (index + 1) / (n + 1), y + (self.height if is_output else 0.0)
        return x + (WIDTH if is_output else 0.0), y + HEADER + (self.height - HEADER) * (index + 1) / (n + 1)

    def _place_ports(self):
        for p in self._inputs + self._outputs:
            p.setPos(self.port_local(p.index, p.is_output))

    def set_vertical(self, on: bool):
        if on != self.vertical:
            self.vertical = on
            self._place_ports()
            self.update()

    def set_connected_inputs(self, n: int):
        self.n_connected = n
        self._rebuild_ports()

    def show_ports(self, on: bool):
        """Zoomed in enough to use them (made when this layer is next painted in detail)."""
        if on != self.ports_shown:
            self.ports_shown = on
            for p in self._inputs + self._outputs:
                p.setVisible(on)

    def ensure_ports(self):
        """Make the port items if they are to be shown (the scene calls this after a detailed
        paint of a layer that had none)."""
        if self.ports_shown and not self._made and self.scene() is not None:
            self._make_ports()

    def _paint_ports(self, painter):
        """The port circles, drawn by the card until its port items exist (and in exports)."""
        c = theme.canvas_colors()
        painter.setPen(QPen(c["edge"], 1.6))
        n_in, n_out = self._counts
        painter.setBrush(c["body"])
        for i in range(n_in):
            painter.drawEllipse(self.port_local(i, False), PORT_R, PORT_R)
        painter.setBrush(theme.family_color(self.family))
        for i in range(n_out):
            painter.drawEllipse(self.port_local(i, True), PORT_R, PORT_R)

    def set_outputs(self, n: int):
        self.n_outputs = max(1, n)
        self._rebuild_ports()

    # -- content ---------------------------------------------------------------------------------
    def _fresh(self):
        lab = self._labeler
        if lab is not None and self._lgen != lab.label_gen:
            lab.fill_node(self, quiet=True)

    @property
    def shape_text(self) -> str:
        self._fresh()
        return self._shape_text

    @property
    def params_text(self) -> str:
        self._fresh()
        return self._params_text

    @property
    def mem_text(self) -> str:
        self._fresh()
        return self._mem_text

    @property
    def mem_tip(self) -> str:
        self._fresh()
        return self._mem_tip

    @property
    def issue(self) -> str:
        """The reason this node is in error."""
        self._fresh()
        return self._issue

    @property
    def blocked(self) -> str:
        """The upstream node in error."""
        self._fresh()
        return self._blocked

    @property
    def pending(self) -> str:
        """A calm note: not connected yet."""
        self._fresh()
        return self._pending

    def set_name(self, name: str):
        self.name = name
        self.update()

    def set_info(self, shape: str, params: str, mem: str, mem_tip: str, issue: str, blocked: str,
                 pending: str = "", quiet: bool = False):
        """pending: a calm note instead of an error (a layer not connected yet). quiet: set from
        inside this item's paint (no repaint)."""
        if (shape, params, mem, mem_tip, issue, blocked, pending) == (
                self._shape_text, self._params_text, self._mem_text, self._mem_tip, self._issue, self._blocked,
                self._pending):
            return
        self._shape_text, self._params_text, self._mem_text, self._mem_tip = shape, params, mem, mem_tip
        self._issue, self._blocked, self._pending = issue, blocked, pending
        self._err = bool(issue)
        if not quiet:
            self.update()

    def toolTip(self) -> str:  # noqa: N802 (Qt's name)
        """Composed when asked (the scene's helpEvent): 10,000 labelled layers kept 10,000 rich
        texts that nobody hovered."""
        lines = [f"<b>{self.name}</b> — {self.type_name}"]
        if self.issue:
            lines.append(f"<span style='color:{theme.BAD_COLOR}'><b>Error:</b> {self.issue}</span>")
        elif self.pending:
            lines.append(f"<i>{self.pending}</i>")
        elif self.blocked:
            lines.append(f"<span style='color:{theme.WARN_COLOR}'>Not checked: upstream node "
                         f"<b>{self.blocked}</b> has an error</span>")
        if self.shape_text:
            lines.append(f"output: {self.shape_text}")
        if self.mem_tip:
            lines.append(self.mem_tip)
        return "<br>".join(lines)

    @property
    def in_error(self) -> bool:
        return bool(self.issue)

    def set_highlight(self, on: bool):
        if on != self.highlight:
            self.highlight = on
            self.update()

    # -- painting --------------------------------------------------------------------------------
    def boundingRect(self) -> QRectF:
        return self._bounds  # computed when the ports change: Qt asks many times per frame

    def shape(self) -> QPainterPath:
        p = QPainterPath()
        p.addRoundedRect(QRectF(0, 0, WIDTH, self.height), 8, 8)
        return p

    def paint(self, painter, option, widget=None):
        c = theme.canvas_colors()
        rect = QRectF(0, 0, WIDTH, self.height)
        fam = theme.family_color(self.family)
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        if lod < BLOCK_LOD:  # zoomed far out: text would be unreadable specks, draw a coloured block
            self._shown = max(self._shown, 1)
            painter.setPen(QPen(QColor(theme.BAD_COLOR), 6) if self._err else
                           QPen(c["select"], 4) if self.isSelected() else _NO_PEN)
            painter.setBrush(fam)
            painter.drawRect(rect)
            if lod >= LABEL_LOD:  # still big enough on screen for a short label: the layer type
                f = QFont(painter.font())
                f.setPixelSize(max(1, int(round(8.5 / lod))))  # ~8.5 px on screen
                f.setBold(True)
                painter.setFont(f)
                painter.setPen(_white())
                fm = QFontMetricsF(f)
                painter.drawText(rect, _CENTER, fm.elidedText(self.type_name, _ELIDE, WIDTH - 8))
            return
        self._shown = 2
        self._fresh()  # (the texts of the last result, composed now if it came after the last paint)
        painter.setRenderHint(_AA)
        # body
        painter.setPen(_NO_PEN)
        painter.setBrush(c["body"])
        painter.drawRoundedRect(rect, 8, 8)
        # header
        painter.setBrush(fam)
        painter.drawPath(_head())
        painter.drawPixmap(QRectF(7, 5, 16, 16), family_pixmap(self.family, 32), QRectF(0, 0, 32, 32))
        f = QFont(painter.font())
        f.setPointSizeF(9.0)
        f.setBold(True)
        painter.setFont(f)
        painter.setPen(_white())
        fm = QFontMetricsF(f)
        painter.drawText(QRectF(28, 0, WIDTH - 34, HEADER), _LEFT, fm.elidedText(self.type_name, _ELIDE, WIDTH - 34))
        # name
        y = HEADER + 4
        painter.setPen(c["text"])
        painter.drawText(QRectF(12, y, WIDTH - 24, LINE), _LEFT, fm.elidedText(self.name, _ELIDE, WIDTH - 24))
        f.setBold(False)
        f.setPointSizeF(8.5)
        painter.setFont(f)
        fm = QFontMetricsF(f)
        y += LINE
        painter.setPen(c["muted"])
        if self._issue or self._blocked or self._pending:
            painter.setPen(QColor(theme.BAD_COLOR) if self._issue else QColor(theme.WARN_COLOR) if self._blocked
                           else c["muted"])
            msg = self._issue or (f"waiting for {self._blocked}" if self._blocked else self._pending.split(":")[0])
            painter.drawText(QRectF(12, y, WIDTH - 24, 2 * LINE), _WRAP, fm.elidedText(msg, _ELIDE, 2 * (WIDTH - 30)))
        else:
            painter.drawText(QRectF(12, y, WIDTH - 24, LINE), _LEFT, fm.elidedText(self._shape_text, _ELIDE, WIDTH - 24))
            y += LINE
            painter.drawText(QRectF(12, y, WIDTH - 24, LINE), _LEFT, self._params_text)
            if self._mem_text:
                tw = fm.horizontalAdvance(self._mem_text) + 12
                badge = QRectF(WIDTH - 10 - tw, y + 1, tw, LINE - 2)
                painter.setPen(_NO_PEN)
                bc = QColor(theme.CATEGORY_COLORS[3])
                bc.setAlpha(50)
                painter.setBrush(bc)
                painter.drawRoundedRect(badge, 8, 8)
                painter.setPen(c["text"])
                painter.drawText(badge, _CENTER, self._mem_text)
        # input port labels (attention q/k/v and the like)
        if self.input_names and not self.vertical:
            painter.setPen(c["muted"])
            f.setPointSizeF(7.0)
            painter.setFont(f)
            for i, label in enumerate(self.input_names[: self._counts[0]]):
                if label:
                    y = self.port_local(i, False).y()
                    painter.drawText(QRectF(9, y - 7, 60, 14), _LEFT, label[:1])
        # outline: error > selection > highlight > normal
        painter.setBrush(_NO_BRUSH)
        if self._issue:
            pen = QPen(QColor(theme.BAD_COLOR), 2.5)
        elif self.isSelected():
            pen = QPen(c["select"], 2.5)
        elif self._blocked:
            pen = QPen(QColor(theme.WARN_COLOR), 1.6, _DASH)
        elif self.highlight:
            pen = QPen(c["select"], 1.8, _DASH)
        else:
            pen = QPen(c["border"], 1.0)
        painter.setPen(pen)
        painter.drawRoundedRect(rect, 8, 8)
        if self._issue and self.isSelected():
            painter.setPen(QPen(c["select"], 1.2))
            painter.drawRoundedRect(rect.adjusted(-3.5, -3.5, 3.5, 3.5), 10, 10)
        if not self._made and self.ports_shown:
            self._paint_ports(painter)
            scene = self.scene()
            if scene is not None and hasattr(scene, "want_ports"):
                scene.want_ports(self)


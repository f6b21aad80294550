"""Memory over one step (stacked by category, phases shaded, capacity and peak marked) and peak
memory versus batch size. Bytes are scaled to one binary unit for display; the axis names it.

An edit re-estimates, and the timeline follows within one short UI-thread turn: the stack comes
ready-made from the worker (timeline_data.py: a few polygons, decimated to the pixel width with
the exact peak kept), and every other item (axes, title, phase shading, labels, ranges) is
touched only when what it shows changed, since each pyqtgraph update relays or repaints it.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QTransform

from memdesigner._qt import theme
from memdesigner._qt.memory import timeline_data, timeline_grid
from memdesigner.units import MiB, format_bytes, pick_unit

SNAPSHOT_COLOR = "#E6007E"  # a PyTorch memory snapshot's curves (magenta: apart from every category)


def _color(hex_: str, alpha: int = 255) -> QColor:
    c = QColor(hex_)
    c.setAlpha(alpha)
    return c


def _over_background(hex_: str, alpha: int) -> QColor:
    """``hex_`` at ``alpha`` as it looks over the plot's background, as an opaque colour: the
    phase bands fill most of the plot under everything else, and an opaque fill is a plain
    copy where a translucent one blends every pixel of it on every repaint."""
    c, bg, a = QColor(hex_), QColor(theme.plot_colors()["bg"]), alpha / 255
    return QColor(*(round(x * a + y * (1 - a)) for x, y in ((c.red(), bg.red()), (c.green(), bg.green()),
                                                             (c.blue(), bg.blue()))))


HEADROOM_STEP = 1.04  # the plot's top moves in steps of 4 %


def headroom_top(y: float) -> float:
    """``y`` rounded up onto a grid of 4 % steps: the plot's top moves only when the peak
    crosses a step, so a small edit leaves the axes as they were (relaying them out is a good
    part of a redraw). The top carries no tick label, so it need not be a round number."""
    if not y > 0 or not math.isfinite(y):
        return 1.0
    return HEADROOM_STEP ** math.ceil(math.log(y, HEADROOM_STEP) - 1e-9)


def _peak_name(peak_layer, ev, i: int) -> str:
    """The peak layer by its name (the events carry it), not its expanded id: inside a block the
    id is the instance's call plus the definition's node id ("model.layers.3.model.layers.0.mlp.mul"),
    the name the instance's call plus the layer's own ("model.layers.3.mlp.mul")."""
    e = ev[i]
    if not peak_layer or e.node == peak_layer:
        return e.label or e.node or ""
    return next((x.label for x in ev if x.node == peak_layer), peak_layer)  # (rare: another event)


def snapshot_peaks(rp) -> str:
    """The snapshot's peaks, one wording for the status line and the legend: allocated is the
    tensors' bytes (torch.cuda.memory_allocated), reserved the device bytes the caching allocator
    holds (memory_reserved)."""
    return (f"peak allocated {format_bytes(rp.peak_allocated, 2)} (tensors), reserved "
            f"{format_bytes(rp.peak_reserved, 2)} (device)")


class StackItem(pg.GraphicsObject):
    """The stacked category fills of a timeline_data.Figure: one filled polygon and one outline
    per category (the full stack first, lower categories over it), in bytes, scaled to the
    axis unit by the item's transform. The whole step is drawn from the worker's polygons;
    zoomed in, only the visible ops, decimated to the pixels they cover."""

    def __init__(self):
        super().__init__()
        self.figure = None
        self._rect = QRectF()
        self._brushes = [pg.mkBrush(_color(c, 215)) for c in theme.CATEGORY_COLORS]
        self._pens = [pg.mkPen(_color(c), width=1) for c in theme.CATEGORY_COLORS]

    def set_figure(self, figure, scale: float) -> None:
        self.prepareGeometryChange()
        self.figure = figure
        self._rect = QRectF(0.0, 0.0, float(figure.n), float(figure.top)) if figure is not None else QRectF()
        self.setTransform(QTransform.fromScale(1.0, 1.0 / scale))
        self.update()

    def boundingRect(self):
        return self._rect

    def polygons(self, px_per_op: float, first: float = 0.0, end: float | None = None):
        """The polygons drawn for the ops ``first`` .. ``end`` shown at ``px_per_op`` pixels
        per op: the whole step's, or the visible ops' alone decimated to their pixels."""
        fig = self.figure
        end = fig.n if end is None else end
        first, end = max(0, math.floor(first)), min(fig.n, math.ceil(end))
        return fig.polygons(first, end, math.ceil((end - first) * px_per_op))

    def paint(self, p, *_):
        fig = self.figure
        if fig is None or not fig.n:
            return
        seen = self.viewRect()  # the view's visible part, in ops (x)
        dev = p.device()
        px = abs(p.transform().m11()) * (dev.devicePixelRatioF() if dev is not None else 1.0)  # device pixels
        polys = self.polygons(px, seen.left(), seen.right()) if seen is not None else fig.whole
        for k in reversed(range(len(polys))):
            if polys[k] is None:
                continue
            fill, line = polys[k]
            p.setPen(Qt.NoPen)
            p.setBrush(self._brushes[k])
            p.drawPolygon(fill)
            p.setPen(self._pens[k])
            p.drawPolyline(line)


def _style_plot(pw: pg.PlotWidget):
    from PySide6.QtWidgets import QGraphicsItem

    pc = theme.plot_colors()
    pw.setBackground(pc["bg"])
    for ax in ("left", "bottom"):
        a = pw.getAxis(ax)
        a.setPen(pg.mkPen(pc["fg"]))
        a.setTextPen(pg.mkPen(pc["fg"]))
        # kept as a pixmap until its ticks change: replaying the axis's picture (its labels and the
        # translucent grid across the plot) was half of every repaint, a hover's included
        a.setCacheMode(QGraphicsItem.DeviceCoordinateCache)
    # the y grid drawn as lines in the view, not by the axis (timeline_grid.py: the axis's cached
    # pixmap then spans its strip, not the plot, and a y-range change no longer redraws a plot-sized one)
    pw.y_grid = timeline_grid.add_y_grid(pw, pc["fg"], 0.15)
    pw.setMenuEnabled(False)
    pw.hideButtons()


class TimelinePlot(pg.PlotWidget):
    """Items are created once and updated in place: re-creating pyqtgraph items on every edit
    costs more UI time than the estimate itself on large designs."""

    node_clicked = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        _style_plot(self)
        self.setMouseEnabled(x=True, y=False)
        self.setLabel("bottom", "ops in execution order")
        self.setLabel("left", "memory")
        self.events: list = []
        self.figure = None  # the timeline_data.Figure drawn
        self._shown: dict = {}  # what each item shows now: an update only when it changes
        self.unit, self.scale = "MiB", MiB
        self.report = None
        self.measured = None
        self.snapshot = None  # a memdesigner.snapshot Replay drawn beside the estimate
        self.snapshot_name = ""
        self._overlay_key = None
        self.overlay = None  # its memdesigner.snapshot.align.Overlay on this estimate
        self._highlight = []  # a pool of regions marking the selected layer's ops
        self._highlight_key = None
        self._highlight_nid = None
        fg = theme.plot_colors()["fg"]
        # no sub-minor grid lines: replaying them was half of a redraw, and they added little
        self.getAxis("left").setStyle(maxTickLevel=1)
        self._stack = StackItem()
        self.addItem(self._stack, ignoreBounds=True)
        self._phases = []  # (region, label) pool
        self._cap = pg.InfiniteLine(angle=0, pen=pg.mkPen(theme.BAD_COLOR, width=2), label="capacity",
                                    labelOpts={"position": 0.02, "color": theme.BAD_COLOR, "anchors": [(0, 1), (0, 1)]})
        self._usable = pg.InfiniteLine(angle=0, pen=pg.mkPen(theme.WARN_COLOR, width=1.5, style=Qt.DashLine),
                                       label="usable", labelOpts={"position": 0.98, "color": theme.WARN_COLOR,
                                                                  "anchors": [(1, 0), (1, 0)]})
        self._band = pg.LinearRegionItem((0, 1), orientation="horizontal", movable=False, pen=pg.mkPen(None))
        self._band.setZValue(-15)
        self._measured_curve = pg.PlotDataItem(pen=pg.mkPen("#111111" if not theme.is_dark() else "#FFFFFF",
                                                            width=2, style=Qt.DashLine))
        self._measured_line = pg.InfiniteLine(angle=0, pen=pg.mkPen("#555555", width=1, style=Qt.DotLine),
                                              label="measured", labelOpts={"position": 0.5, "color": fg})
        self._snap_alloc = pg.PlotDataItem(pen=pg.mkPen(SNAPSHOT_COLOR, width=2))
        self._snap_reserved = pg.PlotDataItem(pen=pg.mkPen(SNAPSHOT_COLOR, width=1.5, style=Qt.DotLine))
        for it in (self._snap_alloc, self._snap_reserved):
            it.setZValue(15)
            self.addItem(it)
        self._peak_mark = pg.ScatterPlotItem(size=11, symbol="t", brush=pg.mkBrush(theme.BAD_COLOR),
                                             pen=pg.mkPen("white", width=1))
        self._peak_mark.setZValue(20)
        self.peak_label = pg.TextItem(color=fg, anchor=(0.5, 1.1), fill=pg.mkBrush(_color(theme.plot_colors()["bg"], 210)))
        self.peak_label.setZValue(30)
        self._empty_text = pg.TextItem("", color=fg, anchor=(0.5, 0.5))
        for it in (self._cap, self._usable, self._band, self._measured_curve, self._measured_line, self._peak_mark,
                   self.peak_label):
            self.addItem(it)
        self.addItem(self._empty_text, ignoreBounds=True)
        self._hover_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(fg, width=1, style=Qt.DotLine))
        self._hover_text = pg.TextItem(anchor=(0, 1), fill=pg.mkBrush(theme.plot_colors()["bg"]), border=pg.mkPen(fg))
        self._hover_text.setZValue(100)
        self.addItem(self._hover_line, ignoreBounds=True)
        self.addItem(self._hover_text, ignoreBounds=True)
        self.scene().sigMouseMoved.connect(self._hover)
        self.scene().sigMouseClicked.connect(self._click)
        self._add_zoom_reset()
        self._empty("Estimate pending…")

    def _add_zoom_reset(self):
        """A "Reset zoom" button in the top-right corner and Ctrl+0 (besides Home and a
        double-click), so zooming in with the wheel is never a one-way street."""
        from PySide6.QtGui import QKeySequence, QShortcut
        from PySide6.QtWidgets import QToolButton

        from memdesigner._qt.icons import action_icon

        b = QToolButton(self)
        b.setIcon(action_icon("zoom_reset"))
        b.setText("Reset zoom")
        b.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        b.setAutoRaise(True)
        b.setToolTip("Show the whole step again (Ctrl+0, Home or double-click)")
        b.clicked.connect(self.reset_zoom)
        b.setCursor(Qt.PointingHandCursor)
        self.zoom_reset_button = b
        sc = QShortcut(QKeySequence("Ctrl+0"), self)
        sc.setContext(Qt.WidgetWithChildrenShortcut)
        sc.activated.connect(self.reset_zoom)
        self.zoom_reset_shortcut = sc

    def resizeEvent(self, ev):
        super().resizeEvent(ev)
        b = getattr(self, "zoom_reset_button", None)
        if b is not None:
            b.adjustSize()
            b.move(self.width() - b.width() - 6, 4)

    def _show(self, *items, on=True):
        for it in items:
            it.setVisible(on)

    def _changed(self, key, value) -> bool:
        """Whether ``key`` shows something else now (and remember that it shows ``value``)."""
        if self._shown.get(key, self) == value:
            return False
        self._shown[key] = value
        return True

    def pixel_width(self) -> int:
        """Device pixels across the plot: the columns the worker decimates the stack to."""
        w = self.plotItem.vb.width() if self.plotItem.vb.width() > 0 else self.width()
        return max(int(w * self.devicePixelRatioF()), 16)

    def _set_title(self, text):
        if self._changed("title", text):
            self.setTitle(text, **({"size": "9pt"} if text else {}))

    def _empty(self, text: str):
        self.figure = None
        self._shown.clear()
        self._stack.hide()
        for reg, lbl in self._phases:
            self._show(reg, lbl, on=False)
        self._show(self._cap, self._usable, self._band, self._measured_curve, self._measured_line, self._peak_mark,
                   self.peak_label, self._hover_line, self._hover_text, self._snap_alloc, self._snap_reserved, on=False)
        self._set_title(None)
        self.zoom_reset_button.hide()  # nothing to zoom
        self._empty_text.setText(text)
        self._empty_text.setPos(0.5, 0.5)
        self._empty_text.show()
        self.setLimits(xMin=None, xMax=None)
        self.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)

    def set_report(self, report, measured=None, figure=None):
        """Redraw from an engine Report (plus an optional measured run to overlay). ``figure``:
        the drawing of ``report.timeline`` made on the worker; made here when it is not that."""
        self.report = report
        self.measured = measured
        self.events = report.timeline if report is not None else []
        if report is None or not self.events:
            self.figure = None
            self._apply_highlight()
            errors = report is not None and any(not i.pending for i in report.issues)
            self._empty("Nothing to show: " + ("fix the errors in the graph" if errors
                                                else "add an Input layer and connect layers"))
            return
        if figure is None or figure.events is not report.timeline:
            figure = timeline_data.build(report.timeline, report.peak_event, self.pixel_width())
        self.figure = fig = figure
        self._apply_highlight()  # the selected layer's ops in the new timeline
        self._empty_text.hide()
        self.zoom_reset_button.show()
        self._hover_line.hide()
        self._hover_text.hide()
        ev = self.events
        n = fig.n
        dev = report.device
        # the peak is the engine's (report.peak_bytes at report.peak_event), never the plot's own
        peak = report.peak_bytes
        peak_idx = fig.peak_index
        top = max(peak, max(measured.get("peak_bytes") or 1, 1) if measured else 0)
        ov = self._aligned(ev)
        if ov is not None:
            top = max(top, ov.peak_allocated, ov.peak_reserved)
        usable = capacity = None
        show_cap = False
        if dev is not None:
            capacity = dev["capacity_bytes"]
            usable = capacity - dev.get("runtime_overhead_bytes", 0)
            show_cap = usable <= 3 * top  # otherwise the profile would be a sliver at the bottom
            if show_cap:
                top = max(top, capacity)
        self.unit, self.scale = pick_unit(top)
        s = self.scale
        if self._changed("unit", self.unit):
            self.setLabel("left", f"memory ({self.unit})")
        ymax = headroom_top(top / s * 1.55)  # room above the peak for its label, below the phase names
        self._draw_phases(fig.spans, ymax, n)
        self._stack.set_figure(fig, s)
        self._stack.show()
        self._draw_measured(measured, n)
        self._draw_snapshot(ov)
        if dev is not None:
            self._draw_capacity(report, capacity, usable, show_cap)
        else:
            self._set_title(None)
            self._show(self._cap, self._usable, self._band, on=False)
        lay = _peak_name(report.peak_layer, ev, peak_idx)
        phase = theme.PHASE_LABELS.get(report.peak_phase or ev[peak_idx].phase, "")
        if self._changed("peak_mark", (peak_idx, peak / s)):
            self._peak_mark.setData([peak_idx + 0.5], [peak / s])
        self._peak_mark.show()
        frac = peak_idx / n
        anchor = (0.5 if 0.15 < frac < 0.85 else (0 if frac <= 0.15 else 1), 1.1)
        if self._changed("peak_anchor", anchor):
            self.peak_label.setAnchor(anchor)
        html = f"<b>peak {format_bytes(peak, 2)}</b><br>{lay} · {phase}"
        if self._changed("peak_html", html):
            self.peak_label.setHtml(html)
        if self._changed("peak_pos", (peak_idx, peak / s)):
            self.peak_label.setPos(peak_idx + 0.5, peak / s)
        self.peak_label.show()
        self.enableAutoRange(False)
        self._home = ((0, n), (0, ymax * 1.08))
        if self._changed("limits", n):
            self.setLimits(xMin=None, xMax=None, yMin=None)
            self.setRange(xRange=self._home[0], yRange=self._home[1], padding=0)
            self.setLimits(xMin=0, xMax=n, yMin=0)
        elif not self._at_home():
            self.setRange(xRange=self._home[0], yRange=self._home[1], padding=0)
        # ops are whole numbers: no 0.5 ticks on short timelines
        if self._changed("ticks", n if n <= 24 else None):
            axis = self.getAxis("bottom")
            if n <= 24:
                axis.setTickSpacing(major=max(1, n // 12 or 1), minor=1)
            else:
                axis.setTickSpacing()

    def _at_home(self) -> bool:
        (x0, x1), (y0, y1) = self.plotItem.vb.viewRange()
        (hx0, hx1), (hy0, hy1) = self._home
        return (math.isclose(x0, hx0, abs_tol=1e-9 * max(1, hx1)) and math.isclose(x1, hx1, rel_tol=1e-9)
                and math.isclose(y0, hy0, abs_tol=1e-9 * max(1, hy1)) and math.isclose(y1, hy1, rel_tol=1e-9))

    def _draw_phases(self, spans, ymax, n):
        while len(self._phases) < len(spans):
            reg = pg.LinearRegionItem((0, 1), movable=False, pen=pg.mkPen(None))
            reg.setZValue(-20)
            lbl = pg.TextItem("", anchor=(0, 0))
            f = QFont()
            f.setBold(True)
            lbl.setFont(f)
            self.addItem(reg)
            self.addItem(lbl)
            self._phases.append((reg, lbl))
        for j, (reg, lbl) in enumerate(self._phases):
            if j >= len(spans):
                self._show(reg, lbl, on=False)
                continue
            ph, a, b = spans[j]
            near_end = a > 0.85 * n  # a short last phase: label it from its right edge, inside the plot
            if self._changed(("phase", j), (ph, a, b, ymax, near_end)):
                color = theme.PHASE_COLORS.get(ph, "#888888")
                reg.setRegion((a, b))
                reg.setBrush(pg.mkBrush(_over_background(color, 22)))
                lbl.setText(theme.PHASE_LABELS.get(ph, ph), color=color)
                lbl.setAnchor((1, 0) if near_end else (0, 0))
                lbl.setPos(b if near_end else a + 0.3, ymax)
            self._show(reg, lbl)

    def _draw_capacity(self, report, capacity, usable, show_cap):
        dev = report.device
        fits = dev["fits"]
        s = self.scale
        verdict = theme.OK_COLOR if fits else theme.BAD_COLOR
        if not show_cap:
            self._show(self._cap, self._usable, self._band, on=False)
            self._set_title(f"<span style='color:{verdict}'>{'fits' if fits else 'does not fit'}: capacity "
                            f"{format_bytes(capacity)} is off this scale · headroom "
                            f"{format_bytes(dev['headroom_bytes'])}</span>")
            return
        self._set_title(None)
        if self._changed("cap", (capacity, s)):
            self._cap.setPos(capacity / s)
            self._cap.label.setFormat(f"capacity {format_bytes(capacity)}")
        self._cap.show()
        if usable != capacity:
            if self._changed("usable", (usable, s)):
                self._usable.setPos(usable / s)
                self._usable.label.setFormat(f"usable {format_bytes(usable)} (after runtime overhead)")
            self._usable.show()
        else:
            self._usable.hide()
        rpeak = report.device_peak_bytes - dev.get("runtime_overhead_bytes", 0)
        lo, hi = sorted((rpeak / s, usable / s))
        if self._changed("band", (lo, hi, verdict)):
            self._band.setRegion((lo, hi))
            self._band.setBrush(pg.mkBrush(_color(verdict, 40)))
        self._band.show()

    def _draw_measured(self, measured, n):
        s = self.scale
        tl = (measured or {}).get("timeline") or []
        if tl:
            from memdesigner.snapshot.align import align_measured_ops  # op by op (layer tags), else by phase

            mx, my = align_measured_ops([(e.phase, e.node) for e in self.events], tl, measured.get("timeline_phases"),
                                        measured.get("timeline_layers"))
            self._measured_curve.setData(mx, my / s)
        self._measured_curve.setVisible(bool(tl))
        pk = (measured or {}).get("peak_bytes")
        if pk:
            self._measured_line.setPos(pk / s)
            self._measured_line.label.setFormat(f"measured peak {format_bytes(pk)}")
        self._measured_line.setVisible(bool(pk))

    def set_snapshot(self, replay, name: str = ""):
        """Draw a PyTorch memory snapshot's allocated (solid) and reserved (dotted) memory beside
        the estimate, each phase stretched onto the estimate's ops of that phase; None clears."""
        self.snapshot = replay
        self.snapshot_name = name
        self._overlay_key = None
        self.overlay = None
        if self.report is not None:
            self.set_report(self.report, self.measured, self.figure)

    def _aligned(self, ev):
        if self.snapshot is None:
            self.overlay = None
            return None
        from memdesigner.snapshot.align import align, phase_runs

        phases = [e.phase for e in ev]
        key = (id(self.snapshot), tuple(phase_runs(phases)))
        if key != self._overlay_key:  # every edit re-estimates; the alignment changes only with the phases
            self.overlay = align(self.snapshot, phases)
            self._overlay_key = key
        return self.overlay

    def _draw_snapshot(self, ov):
        if ov is None:
            self._show(self._snap_alloc, self._snap_reserved, on=False)
            return
        s = self.scale
        self._snap_alloc.setData(ov.x, ov.allocated / s)
        self._snap_reserved.setData(ov.x, ov.reserved / s)
        self._show(self._snap_alloc, self._snap_reserved)

    def legend_html(self) -> str:
        """The category key, shown above the plot so it never covers the data."""
        if not self.events or self.figure is None:
            return ""
        used = self.figure.used
        parts = [f"<span style='color:{c}'>■</span> {lbl}" for c, lbl, u in
                 zip(theme.CATEGORY_COLORS, theme.CATEGORY_LABELS, used) if u]
        if self.measured:
            on = {"cuda": "CUDA", "cpu": "CPU"}.get(self.measured.get("device"), self.measured.get("device") or "")
            parts.append(f"<b>- - -</b> measured with PyTorch{' on ' + on if on else ''}")
        if self.overlay is not None:
            # the replay's own peaks, as the status line names them (the aligned step's peak differed)
            parts.append(f"<span style='color:{SNAPSHOT_COLOR}'><b>—</b> allocated · <b>···</b> reserved</span> "
                         f"snapshot {self.snapshot_name}: {snapshot_peaks(self.snapshot)}")
        parts.append("<span style='color:gray'>hover for details · click to select the layer</span>")
        return "&nbsp;&nbsp;&nbsp;".join(parts)

    # -- interaction ----------------------------------------------------------------------
    def index_at(self, scene_pos) -> int | None:
        if not self.events or not self.plotItem.vb.sceneBoundingRect().contains(scene_pos):
            return None
        x = self.plotItem.vb.mapSceneToView(scene_pos).x()
        i = int(np.floor(x))
        return i if 0 <= i < len(self.events) else None

    def describe(self, i: int) -> str:
        e = self.events[i]
        rows = "".join(f"<tr><td><span style='color:{c}'>■</span> {lbl}</td><td align=right>&nbsp;{format_bytes(b)}</td></tr>"
                       for c, lbl, b in zip(theme.CATEGORY_COLORS, theme.CATEGORY_LABELS, e.by_category) if b)
        snap = ""
        ov = self.overlay
        if ov is not None and len(ov.x):  # the snapshot's highest allocated/reserved within this op
            a, b = np.searchsorted(ov.x, [i, i + 1], side="left")
            a, b = max(a - 1, 0), max(b, a + 1)
            snap = (f"<br><span style='color:{SNAPSHOT_COLOR}'>snapshot: allocated {format_bytes(int(ov.allocated[a:b].max()))}"
                    f", reserved {format_bytes(int(ov.reserved[a:b].max()))}</span>")
        return (f"<b>{e.label}</b><br>{theme.PHASE_LABELS.get(e.phase, e.phase)} · "
                f"total <b>{format_bytes(e.bytes)}</b><table>{rows}</table>{snap}")

    def _hover(self, pos):
        i = self.index_at(pos)
        if i is None:
            self._hover_line.hide()
            self._hover_text.hide()
            return
        vb = self.plotItem.vb
        p = vb.mapSceneToView(pos)
        self._hover_line.setPos(i + 0.5)
        self._hover_line.show()
        self._hover_text.setHtml(f"<div style='color:{theme.plot_colors()['fg']}'>{self.describe(i)}</div>")
        (x0, x1), _ = vb.viewRange()
        self._hover_text.setAnchor((1, 1) if p.x() > (x0 + x1) / 2 else (0, 1))
        self._hover_text.setPos(p.x(), p.y())
        self._hover_text.show()

    def reset_zoom(self):
        """Back to the whole step (the button, Ctrl+0, Home or a double-click), after zooming in."""
        home = getattr(self, "_home", None)
        if home is not None and self.events:
            self.setRange(xRange=home[0], yRange=home[1], padding=0)

    def keyPressEvent(self, ev):
        if ev.key() == Qt.Key_Home:
            self.reset_zoom()
            ev.accept()
            return
        super().keyPressEvent(ev)

    def _click(self, ev):
        if ev.button() == Qt.LeftButton and ev.double():
            self.reset_zoom()
            return
        if ev.button() != Qt.LeftButton:
            return
        i = self.index_at(ev.scenePos())
        if i is not None and self.events[i].node:
            self.node_clicked.emit(self.events[i].node)

    def highlight_node(self, nid: str | None):
        """Mark the spans of the selected layer's ops (forward and backward)."""
        self._highlight_nid = nid
        self._apply_highlight()

    def _apply_highlight(self):
        nid = self._highlight_nid
        runs = self.figure.runs_of(nid) if nid and self.figure is not None else []
        if runs == self._highlight_key:
            return
        self._highlight_key = runs
        sel = theme.canvas_colors()["select"]
        while len(self._highlight) < len(runs):
            reg = pg.LinearRegionItem((0, 1), movable=False, brush=pg.mkBrush(_color(sel.name(), 70)),
                                      pen=pg.mkPen(sel, width=1))
            reg.setZValue(10)
            self.addItem(reg)
            self._highlight.append(reg)
        for j, reg in enumerate(self._highlight):
            if j < len(runs):
                reg.setRegion(runs[j])
            reg.setVisible(j < len(runs))


class BatchPlot(pg.PlotWidget):
    """Peak device memory for several batch sizes; the capacity and the largest batch that fits.
    Its items are made once and updated in place (a sweep lands after every edit)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        _style_plot(self)
        self.setMouseEnabled(x=False, y=False)
        self.setLabel("bottom", "batch size")
        self.setLabel("left", "peak memory")
        self.sweep = None
        self._unit = None
        self._curve = pg.PlotDataItem(pen=pg.mkPen(theme.CATEGORY_COLORS[0], width=2.5), symbol="o", symbolSize=6,
                                      symbolBrush=theme.CATEGORY_COLORS[0])
        self._cap = pg.InfiniteLine(angle=0, pen=pg.mkPen(theme.BAD_COLOR, width=2), label="capacity",
                                    labelOpts={"position": 0.05, "color": theme.BAD_COLOR})
        self._best = pg.InfiniteLine(angle=90, pen=pg.mkPen(theme.OK_COLOR, width=2), label="largest",
                                     labelOpts={"position": 0.85, "color": theme.OK_COLOR,
                                                "anchors": [(1.05, 0), (1.05, 0)]})
        self._current = pg.ScatterPlotItem(size=12, symbol="d", brush=pg.mkBrush(theme.WARN_COLOR), pen=pg.mkPen("white"))
        for it in (self._curve, self._cap, self._best, self._current):
            self.addItem(it)
            it.hide()

    def set_sweep(self, sw, current_batch: int):
        self.sweep = sw
        if sw is None or not sw.batches:
            for it in (self._curve, self._cap, self._best, self._current):
                it.hide()
            return
        cap_shown = bool(sw.capacity) and sw.capacity <= 3 * max(sw.peaks)
        top = max(max(sw.peaks), sw.capacity) if cap_shown else max(sw.peaks)
        unit, s = pick_unit(top)
        if unit != self._unit:
            self._unit = unit
            self.setLabel("left", f"peak memory ({unit})")
        xs = np.array(sw.batches, dtype=float)
        ys = np.array(sw.peaks, dtype=float) / s
        self._curve.setData(xs, ys)
        self._curve.show()
        if sw.capacity:
            self._cap.setPos(sw.capacity / s)
            self._cap.label.setFormat(f"capacity {format_bytes(sw.capacity)}")
        self._cap.setVisible(bool(sw.capacity))
        if sw.max_batch:
            self._best.setPos(sw.max_batch)
            self._best.label.setFormat(f"largest batch that fits: {sw.max_batch}")
        self._best.setVisible(bool(sw.max_batch))
        if current_batch in sw.batches:
            self._current.setData([current_batch], [ys[sw.batches.index(current_batch)]])
        self._current.setVisible(current_batch in sw.batches)
        self.setRange(xRange=(0, max(sw.batches) * 1.05),
                      yRange=(0, max(ys.max(), sw.capacity / s if cap_shown else 0) * 1.12), padding=0)

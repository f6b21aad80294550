"""Auto layout off the UI thread: positions are computed on a worker from a snapshot of the
design, then applied at once as one undo step (a 10,000-layer layout takes a few hundred ms of
pure Python that would otherwise freeze the window). The chosen style — bands (left to right,
wrapped) or top to bottom (as Netron draws) — is remembered in QSettings."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QSettings, Signal
from PySide6.QtGui import QAction, QActionGroup

from memdesigner._qt.canvas.layout import STYLES, positions
from memdesigner._qt.document.commands import MoveNodesCmd
from memdesigner.model.design import Design

SETTING = "canvas/layout_style"
LABELS = {"bands": "Layout in &Bands (left to right)", "top_down": "Layout &Top to Bottom"}
TIPS = {"bands": "Columns by depth, wrapped into bands so a deep network fits a wide window",
        "top_down": "One row per depth, the network running down the page (as Netron draws it)"}


def saved_style() -> str:
    v = QSettings().value(SETTING, "bands")
    return v if v in STYLES else "bands"


def structure(design: Design) -> Design:
    """What a layout reads — the node ids in their order and the edges — copied in C for the
    worker (under 1 ms at 10,000 layers; a full snapshot of every node was 20-30 ms of CPU on
    the UI thread, 80-140 ms of wall time on a busy machine). The Node objects are shared: a
    layout reads none of their fields."""
    d = Design(design.name, design.channels_last)
    d.nodes, d.edges = dict(design.nodes), list(design.edges)
    return d


class LayoutRunner(QObject):
    applied = Signal(str)  # the style just applied

    def __init__(self, parent: QObject, scene, view, stack, show_message: Callable[..., None]):
        """``show_message(text, ms=0)``: the window's status line. The canvas parts, not the window:
        this layer sits below it."""
        super().__init__(parent)
        self.scene, self.view, self.stack, self.show_message = scene, view, stack, show_message
        self.style = saved_style()
        self.running = False
        self._worker = None
        self._gen = 0
        self.group = QActionGroup(self)
        self.actions: dict[str, QAction] = {}
        for style in STYLES:
            a = QAction(LABELS[style], self)
            a.setCheckable(True)
            a.setChecked(style == self.style)
            a.setStatusTip(TIPS[style])
            a.setToolTip(TIPS[style])
            a.triggered.connect(lambda _=False, s=style: self.run(s))
            self.group.addAction(a)
            self.actions[style] = a
        scene.set_vertical(self.style == "top_down")

    def set_style(self, style: str) -> None:
        """Remember the style; the canvas's ports follow it (top/bottom or left/right)."""
        self.style = style
        QSettings().setValue(SETTING, style)
        self.actions[style].setChecked(True)
        self.scene.set_vertical(style == "top_down")

    def run(self, style: str | None = None, wait: bool = False) -> None:
        """Lay out the shown graph in ``style`` (default: the saved one) on a worker thread."""
        from superqt.utils import create_worker

        style = style or self.style
        self.set_style(style)
        design = self.scene.design
        if design is None or not design.nodes:
            return
        self._gen += 1
        gen, snap = self._gen, structure(design)
        if wait or len(snap.nodes) < 300:  # small: quicker than a thread round trip
            self._apply(gen, design, positions(snap, style))
            return
        self.running = True
        worker = create_worker(positions, snap, style)
        worker.returned.connect(lambda pos: self._apply(gen, design, pos))
        worker.finished.connect(lambda: self._done(gen))
        self.show_message("Laying out…")
        worker.start()
        self._worker = worker

    def _done(self, gen):
        if gen == self._gen:
            self.running = False

    def _apply(self, gen: int, design, pos: dict) -> None:
        if gen != self._gen or design is not self.scene.design:
            return  # another layout started, or another graph is shown now
        self.running = False
        moves = {nid: (design.nodes[nid].pos, p) for nid, p in pos.items()
                 if nid in design.nodes and design.nodes[nid].pos != p}
        if moves:
            self.stack.push(MoveNodesCmd(design, moves, "Auto layout"))
        self.view.fit_all()
        self.show_message("Laid out", 3000)
        self.applied.emit(self.style)

"""Keys on the canvas: Esc deselects, the arrow keys nudge the selected layers (Shift: ten times
as far). Holding an arrow key moves in one undo step; each separate press is a step of its own.
Without a selection the arrows scroll the view as before."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt

from memdesigner._qt.document.commands import MoveNodesCmd

STEP = 10.0  # scene pixels per press; the grid is 20
ARROWS = {Qt.Key_Left: (-1, 0), Qt.Key_Right: (1, 0), Qt.Key_Up: (0, -1), Qt.Key_Down: (0, 1)}
_NUDGE_ID = 0x4E55  # QUndoCommand.id(): auto-repeated nudges merge into one step


class NudgeCmd(MoveNodesCmd):
    def __init__(self, design, moves: dict, merge: bool):
        super().__init__(design, moves, "Nudge")
        self.merge = merge  # an auto-repeat of the press before

    def id(self):
        return _NUDGE_ID

    def mergeWith(self, other) -> bool:
        if not getattr(other, "merge", False) or set(other.moves) != set(self.moves):
            return False
        self.moves = {nid: (self.moves[nid][0], other.moves[nid][1]) for nid in self.moves}
        return True


class CanvasKeys(QObject):
    """An event filter on the canvas view."""

    def __init__(self, view, scene, stack, design_of):
        super().__init__(view)
        self.view, self.scene, self.stack, self.design_of = view, scene, stack, design_of
        view.installEventFilter(self)

    def eventFilter(self, obj, ev):
        if ev.type() != QEvent.KeyPress:
            return False
        key = ev.key()
        if key == Qt.Key_Escape and not ev.modifiers():
            if self.scene.selectedItems():
                self.scene.clearSelection()
                return True
            return False
        if key in ARROWS and not (ev.modifiers() & ~(Qt.ShiftModifier | Qt.KeypadModifier)):
            ids = self.scene.selected_node_ids()
            if not ids:
                return False
            step = STEP * (10 if ev.modifiers() & Qt.ShiftModifier else 1)
            self.nudge(ids, ARROWS[key][0] * step, ARROWS[key][1] * step, merge=ev.isAutoRepeat())
            return True
        return False

    def nudge(self, ids, dx: float, dy: float, merge: bool = False) -> None:
        design = self.design_of()
        moves = {}
        for nid in ids:
            if nid in design.nodes:
                x, y = design.nodes[nid].pos
                moves[nid] = ((x, y), (x + dx, y + dy))
        if moves:
            self.stack.push(NudgeCmd(design, moves, merge))

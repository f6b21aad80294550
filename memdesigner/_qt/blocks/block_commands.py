"""Undoable block operations: group, ungroup, make unique, rename a definition, add pasted
definitions. Each is one QUndoCommand that records the document's graphs (the design's and
every definition's) before and after, and restores them in place, so commands already on the
stack that edit a definition's graph keep working on the same objects."""

from __future__ import annotations

from PySide6.QtGui import QUndoCommand

from memdesigner.model.design import Design


def capture(root: Design) -> dict:
    graphs = [root, *[bd.graph for bd in root.blocks.values()]]
    return {
        "blocks": list(root.blocks.items()),
        "names": {id(bd): (bd, bd.name) for bd in root.blocks.values()},
        "graphs": [(g, list(g.nodes.items()), list(g.edges),
                    [(n, dict(n.props), n.name, n.keep_until) for n in g.nodes.values()]) for g in graphs],
    }


def restore(root: Design, state: dict) -> None:
    root.blocks.clear()
    root.blocks.update(state["blocks"])
    for bd, name in state["names"].values():
        bd.name = name
        bd.graph.name = name
    touched = []
    for g, items, edges, nodes in state["graphs"]:
        g.nodes.clear()
        g.nodes.update(items)
        g.edges = list(edges)
        for n, props, name, keep in nodes:
            if n.props != props or n.name != name:
                n.props, n.name, n.keep_until = dict(props), name, keep
                n.rev += 1
        touched.append(g)
    for g in touched:
        g._emit("reset", None)


class BlockEditCmd(QUndoCommand):
    """``fn()`` does the edit the first time; undo and redo restore the recorded states."""

    def __init__(self, text: str, root: Design, fn):
        super().__init__(text)
        self.root, self.fn = root, fn
        self.before = self.after = None
        self.result = None
        self.error: Exception | None = None

    def redo(self):
        if self.after is None:
            self.before = capture(self.root)
            try:
                self.result = self.fn()
            except ValueError as err:  # nothing changed (refused): an empty step
                self.error = err
                restore(self.root, self.before)
                self.setObsolete(True)
            self.after = capture(self.root)
        else:
            restore(self.root, self.after)

    def undo(self):
        restore(self.root, self.before)


def push(stack, text: str, root: Design, fn):
    """Run one block edit as an undo step; returns (result, error)."""
    cmd = BlockEditCmd(text, root, fn)
    stack.push(cmd)
    return cmd.result, cmd.error

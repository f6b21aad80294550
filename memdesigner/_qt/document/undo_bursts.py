"""One undo step per burst of edits to one field: a spin box's arrow clicks, wheel steps, Up/Down
keys and typed values on the same field of the same node (or the same run setting) merge into
the command on top of the stack (QUndoCommand.id / mergeWith), so Ctrl+Z takes the whole burst
back. A burst ends when the keyboard focus moves (the field loses it) or another field changes
(then another command is on top, and QUndoStack only merges with the top one).

The burst is a focus epoch: a counter QApplication.focusChanged bumps. Qt emits focusChanged
after the old widget's FocusOut is handled, so a value a spin box commits as it loses focus
still joins the burst it ends."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

MERGE_ID = 0x6D64  # QUndoCommand.id() of the commands that merge by burst (-1: never merge)

_epoch = 0
_watched: set[int] = set()


def _bump(*_):
    global _epoch
    _epoch += 1


def current() -> int:
    """The burst an edit made now belongs to."""
    app = QApplication.instance()
    if app is not None and id(app) not in _watched:
        _watched.add(id(app))
        app.focusChanged.connect(_bump)
        _bump()  # a fresh start: nothing made before the watch joins an edit made after it
    return _epoch

"""Applying a "Make it fit" suggestion: its run settings and its design edit (a shorter sequence)
as ONE undo step. The one place that writes a suggestion into the window, so that when the run
settings move into an undoable document model only ``_set_settings`` changes."""

from __future__ import annotations

from PySide6.QtGui import QUndoCommand

from memdesigner._qt.document.commands import SetPropCmd


def _set_settings(win, settings: dict) -> None:
    """Write run settings (with "device") into the document's settings model, inside this undo
    command (the settings bar views the model; no second undo step)."""
    win.document.settings.set_all(settings)


class ApplySuggestionCmd(QUndoCommand):
    def __init__(self, win, change: str, settings: dict, design_change: dict | None):
        super().__init__(f"Make it fit: {change}")
        self.win = win
        self.before = win.document.settings.to_dict()
        self.after = {**self.before, **settings}  # what the suggestion names; the rest stays
        self.edit = SetPropCmd(win.design, design_change["node"], design_change["prop"], design_change["value"]) \
            if design_change else None

    def redo(self):
        if self.edit is not None:
            self.edit.redo()
        _set_settings(self.win, self.after)

    def undo(self):
        if self.edit is not None:
            self.edit.undo()
        _set_settings(self.win, self.before)


def apply_suggestion(win, settings: dict, design_change: dict | None, change: str = "suggestion") -> None:
    """Push one undo step that sets ``settings`` (a Settings.to_dict() with "device") and makes
    ``design_change`` ({"node", "prop", "value"}) if any."""
    win.stack.push(ApplySuggestionCmd(win, change, settings, design_change))

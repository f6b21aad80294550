"""Blocks in the window: their undoable commands, the clipboard, navigation and how an instance reads."""

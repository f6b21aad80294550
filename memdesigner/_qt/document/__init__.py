"""The open document apart from the window: design, undo commands, recovery autosave, recent files."""

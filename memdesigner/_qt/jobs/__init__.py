"""The window's long jobs: the live estimate, its presenter, imports and opening big files off the UI thread."""

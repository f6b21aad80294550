"""Dialogs and what they write: Make It Fit, imports, exports and reports, the start view."""

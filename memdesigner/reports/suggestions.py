"""Hook for "suggestions to make it fit" (the fit advisor of issue 9).

The engine has no fit advisor yet, so this returns None and the reports leave the section out:
they print no made-up advice. When the advisor exists, return its suggestions here (one line
each, computed by the engine, e.g. "batch 8 with activation checkpointing: 9.1 GiB, fits") and
both report variants show them.
"""

from __future__ import annotations


def suggestions_for(design, settings, device, report) -> list[str] | None:
    """Lines of advice for a design that does not fit, or None when no advisor is available."""
    return None

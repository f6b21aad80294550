"""Number formatting shared by the HTML and Markdown reports (display only: the content keeps ints)."""

from __future__ import annotations

from memdesigner.engine.report import shape_text
from memdesigner.units import format_bytes, format_count, format_flops

__all__ = ["exact", "format_bytes", "format_count", "format_flops", "human", "pct", "shape_text", "signed_bytes"]


def exact(n: int, unit: str = " B") -> str:
    """15411190056 -> '15,411,190,056 B'."""
    return f"{int(n):,}{unit}"


def human(n: int, digits: int = 1) -> str:
    """Bytes for a table cell: '–' for nothing."""
    return format_bytes(n, digits) if n else "–"


def signed_bytes(n: int) -> str:
    """Headroom: '+2.1 GiB' or '−4.7 GiB' (a real minus sign reads better than a hyphen)."""
    s = format_bytes(abs(n))
    return ("−" if n < 0 else "+") + s


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "–"

"""Suggestions to make it fit, for reports: the engine's fit advisor (memdesigner.engine.fit),
one line each, only for a design that does not fit its device."""

from __future__ import annotations

from memdesigner.units import format_bytes


def suggestions_for(design, settings, device, report) -> list[str] | None:
    """Lines of advice for a design that does not fit, or None when it fits or has no device."""
    if device is None or report.device is None or report.device["fits"] or report.issues:
        return None
    from memdesigner.engine.fit import make_it_fit

    advice = make_it_fit(design, settings, device=device)
    lines = []
    for s in advice.suggestions:
        price = price_text(s)
        verdict = "fits" if s.fits else "still too big"
        lines.append(f"{s.change}: needs {format_bytes(s.device_peak_bytes, 2)}, {verdict} ({price})")
    return lines or None


def price_text(s) -> str:
    """A suggestion's price in one line: recompute, communication, host RAM, then the notes."""
    parts = []
    c = s.cost
    if c.get("recompute_pct"):
        parts.append(f"+{c['recompute_pct']:.1f} % step FLOPs recomputed")
    if c.get("communication_bytes"):
        parts.append(f"{format_bytes(c['communication_bytes'], 1)} received per rank per step")
    if c.get("pcie_bytes"):
        parts.append(f"{format_bytes(c['pcie_bytes'], 1)} over PCIe per step")
    if c.get("host_bytes"):
        parts.append(f"{format_bytes(c['host_bytes'], 1)} host RAM per rank")
    return "; ".join(parts + list(c["notes"]))

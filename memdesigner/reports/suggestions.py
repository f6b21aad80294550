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
        price = "; ".join(s.cost["notes"])
        if s.cost.get("recompute_pct"):
            price = f"+{s.cost['recompute_pct']:.1f} % of the step's FLOPs recomputed; {price}"
        verdict = "fits" if s.fits else "still too big"
        lines.append(f"{s.change}: needs {format_bytes(s.device_peak_bytes, 2)}, {verdict} ({price})")
    return lines or None

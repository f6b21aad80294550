"""The memory timeline as a standalone SVG, drawn from the estimate's events in plain Python: the
same picture as the window's timeline (stacked by category, phases shaded, capacity and peak
marked) without Qt, so headless reports can carry it. Every design-provided string is escaped."""

from __future__ import annotations

import math
from html import escape

from memdesigner.colors import BAD_COLOR, CATEGORY_COLORS, CATEGORY_LABELS, PHASE_COLORS, PHASE_LABELS, WARN_COLOR
from memdesigner.units import format_bytes, pick_unit

MAX_POINTS = 1500  # longer timelines are bucketed (each bucket keeps its highest op, so the peak stays)
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', Arial, sans-serif"


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / max(1, target)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def _bucket(events: list) -> list[tuple[int, object]]:
    """(first op index, event) pairs: all events, or per bucket the one with the most live bytes."""
    n = len(events)
    if n <= MAX_POINTS:
        return list(enumerate(events))
    out = []
    size = n / MAX_POINTS
    for b in range(MAX_POINTS):
        lo, hi = int(b * size), max(int((b + 1) * size), int(b * size) + 1)
        i = max(range(lo, min(hi, n)), key=lambda j: events[j].bytes)
        out.append((lo, events[i]))
    return out


def _halo_text(attrs: str, fill: str, inner: str) -> str:
    """Text readable over the coloured areas: a white-stroked copy underneath, then the text (two
    elements rather than paint-order, which Qt's SVG renderer ignores)."""
    return (f'<text {attrs} fill="#ffffff" stroke="#ffffff" stroke-width="4" stroke-linejoin="round" '
            f'opacity="0.85">{inner}</text><text {attrs} fill="{fill}">{inner}</text>')


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def timeline_svg(report, design=None, width: int = 960, height: int = 330) -> str:
    """SVG source (a complete <svg> element) of live memory after every op of one step."""
    events = list(report.timeline)
    e = escape
    if not events:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="60" viewBox="0 0 {width} 60">'
                f'<text x="10" y="35" font-family="{FONT}" font-size="14">No timeline: the design has no ops.</text>'
                '</svg>')
    n = len(events)
    left, right, top_m, bottom = 70, 18, 30, 64
    pw, ph = width - left - right, height - top_m - bottom
    peak_i = max(range(n), key=lambda i: events[i].bytes)
    peak = events[peak_i].bytes
    top = max(peak, 1)
    dev = report.device
    capacity = usable = None
    if dev is not None:
        capacity = dev["capacity_bytes"]
        usable = capacity - dev.get("runtime_overhead_bytes", 0)
        if usable <= 3 * top:  # otherwise the profile would be a sliver at the bottom, as in the window
            top = max(top, capacity)
        else:
            capacity = usable = None
    unit, scale = pick_unit(top)
    step = _nice_step(top * 1.12 / scale)
    ymax = math.ceil(top * 1.12 / scale / step) * step * scale

    def X(i: float) -> float:
        return left + pw * i / n

    def Y(b: float) -> float:
        return top_m + ph * (1 - b / ymax)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" font-family="{FONT}" font-size="12">',
           f"<title>Live memory over one step: peak {e(format_bytes(peak, 2))}</title>",
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    # phases: shaded spans with their names on top
    start = 0
    for i in range(1, n + 1):
        if i == n or events[i].phase != events[start].phase:
            ph_name = events[start].phase
            col = PHASE_COLORS.get(ph_name, "#888888")
            x0, x1 = X(start), X(i)
            out.append(f'<rect x="{x0:.1f}" y="{top_m}" width="{x1 - x0:.1f}" height="{ph}" fill="{col}" '
                       f'fill-opacity="0.07"/>')
            name = e(PHASE_LABELS.get(ph_name, ph_name))
            if x1 - x0 > 7.5 * len(name):
                out.append(f'<text x="{x0 + 6:.1f}" y="{top_m - 9}" fill="{col}" font-weight="600">{name}</text>')
            elif i == n:  # a short last phase (one optimizer op): its name ends at the plot's right edge
                out.append(f'<text x="{x1:.1f}" y="{top_m - 9}" text-anchor="end" fill="{col}" '
                           f'font-weight="600">{name}</text>')
            if start:
                out.append(f'<line x1="{x0:.1f}" y1="{top_m}" x2="{x0:.1f}" y2="{top_m + ph}" stroke="{col}" '
                           'stroke-opacity="0.45" stroke-dasharray="3 3"/>')
            start = i
    # grid and y axis
    k = 0
    while k * step * scale <= ymax + 1e-9:
        yv = k * step * scale
        y = Y(yv)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end" fill="#4b5563">{_fmt(yv / scale)}</text>')
        k += 1
    out.append(f'<text x="16" y="{top_m + ph / 2:.1f}" transform="rotate(-90 16 {top_m + ph / 2:.1f})" '
               f'text-anchor="middle" fill="#374151">memory ({unit})</text>')
    # stacked categories: the full stack first, lower categories painted over it
    pts = _bucket(events)
    bounds = [i for i, _ in pts[1:]] + [n]
    present = [c for c in range(len(CATEGORY_COLORS)) if any(ev.by_category[c] for _, ev in pts)]
    for c in reversed(present):
        d = [f"M{X(0):.1f},{Y(0):.1f}"]
        for (i0, ev), i1 in zip(pts, bounds):
            yv = Y(sum(ev.by_category[: c + 1]))
            d.append(f"L{X(i0):.1f},{yv:.1f}L{X(i1):.1f},{yv:.1f}")
        d.append(f"L{X(n):.1f},{Y(0):.1f}Z")
        out.append(f'<path d="{"".join(d)}" fill="{CATEGORY_COLORS[c]}" fill-opacity="0.88" '
                   f'stroke="{CATEGORY_COLORS[c]}" stroke-width="0.8"/>')
    # capacity of the device (solid) and what is left after its runtime (dashed), named in one label
    if capacity is not None:
        yc, yu = Y(capacity), Y(usable)
        if usable != capacity:
            out.append(f'<line x1="{left}" y1="{yu:.1f}" x2="{left + pw}" y2="{yu:.1f}" stroke="{WARN_COLOR}" '
                       'stroke-width="1.5" stroke-dasharray="6 4"/>')
        out.append(f'<line x1="{left}" y1="{yc:.1f}" x2="{left + pw}" y2="{yc:.1f}" stroke="{BAD_COLOR}" '
                   'stroke-width="2"/>')
        usable_text = (f'<tspan fill="#8a5a00" font-weight="400">\u00a0· usable after the runtime '
                       f"{e(format_bytes(usable))} (dashed)</tspan>") if usable != capacity else ""
        out.append(_halo_text(f'x="{left + 6}" y="{yc - 6:.1f}" font-weight="600"', BAD_COLOR,
                              f"capacity {e(format_bytes(capacity))}{usable_text}"))
    # the peak: a marker and where it happens
    px, py = X(peak_i + 0.5), Y(peak)
    out.append(f'<path d="M{px - 6:.1f},{py - 11:.1f}L{px + 6:.1f},{py - 11:.1f}L{px:.1f},{py - 1:.1f}Z" '
               f'fill="{BAD_COLOR}" stroke="#ffffff"/>')
    node = design.nodes.get(report.peak_layer) if design is not None and report.peak_layer else None
    where = node.name if node is not None else (events[peak_i].label or "")
    phase = PHASE_LABELS.get(report.peak_phase or events[peak_i].phase, "")
    label = f"peak {format_bytes(peak, 2)}" + (f" · {where}" if where else "") + (f" · {phase}" if phase else "")
    if len(label) > 70:
        label = label[:69] + "…"
    frac = (peak_i + 0.5) / n
    anchor, dx = ("start", -4) if frac < 0.2 else (("end", 4) if frac > 0.8 else ("middle", 0))
    out.append(_halo_text(f'x="{px + dx:.1f}" y="{py - 16:.1f}" text-anchor="{anchor}" font-weight="700"', "#111827",
                          e(label)))
    # x axis
    out.append(f'<line x1="{left}" y1="{top_m + ph}" x2="{left + pw}" y2="{top_m + ph}" stroke="#9ca3af"/>')
    xstep = max(1, int(_nice_step(n, 8)))
    for i in range(0, n + 1, xstep):
        out.append(f'<text x="{X(i):.1f}" y="{top_m + ph + 15}" text-anchor="middle" fill="#4b5563">{i}</text>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{top_m + ph + 32}" text-anchor="middle" fill="#374151">'
               f"ops in execution order ({n:,})</text>")
    # legend
    lx = left
    ly = height - 12
    for c in present:
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" rx="2" fill="{CATEGORY_COLORS[c]}"/>')
        out.append(f'<text x="{lx + 17}" y="{ly}" fill="#374151">{CATEGORY_LABELS[c]}</text>')
        lx += 30 + 7.2 * len(CATEGORY_LABELS[c])
    out.append("</svg>")
    return "\n".join(out)

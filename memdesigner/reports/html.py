"""The HTML report: one file with inline CSS, the timeline as inline SVG and the graph as a
base64 PNG, no scripts and no external resources. Jinja2 autoescapes every design-provided string."""

from __future__ import annotations

import base64

import jinja2

from memdesigner import colors
from memdesigner.engine.simulate import CATS
from memdesigner.reports import fmt
from memdesigner.reports.content import BATCH_LIMIT, ReportContent, settings_rows
from memdesigner.text import encodable


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("memdesigner.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=False)
    env.filters.update(bytes=fmt.format_bytes, bytes2=lambda n: fmt.format_bytes(n, 2), exact=fmt.exact,
                       human=fmt.human, signed=fmt.signed_bytes, count=lambda n: f"{int(n):,}",
                       flops=fmt.format_flops, shape=fmt.shape_text, maxbatch=max_batch_text)
    return env


def max_batch_text(v) -> str:
    if v is None:
        return "–"
    if v == BATCH_LIMIT:
        return f"≥ {v:,}"  # the search's limit: memory is not what bounds the batch
    return "none" if v == 0 else f"{v:,}"


def summary_line(c: ReportContent) -> str:
    s = c.settings
    parts = ["training" if s.training else "inference", f"batch {s.batch:,}", s.dtype + (" + AMP" if s.amp else "")]
    if s.training:
        parts.append(f"optimizer {s.optimizer}")
        if s.checkpointing:
            parts.append("activation checkpointing")
    parts.append(f"{s.backend} semantics")
    return ", ".join(parts)


def device_rows(c: ReportContent) -> list:
    """The chosen device first, then every other profile."""
    rows = [v for v in c.devices if v.chosen]
    if c.device is not None and not rows:
        rows = [c.device]
    return rows + [v for v in c.devices if not v.chosen]


def layer_totals(c: ReportContent) -> dict:
    return {"activation_bytes": sum(r.activation_bytes for r in c.layers),
            "kept_bytes": sum(r.kept_bytes for r in c.layers)}


def cat_label(cat: str) -> str:
    return colors.CATEGORY_LABELS[CATS.index(cat)] if cat in CATS else cat


def cat_color(cat: str) -> str:
    return colors.CATEGORY_COLORS[CATS.index(cat)] if cat in CATS else "#888888"


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_html(c: ReportContent) -> str:
    tpl = _env().get_template("report.html.j2")
    return encodable(tpl.render(
        c=c, colors=colors, settings=settings_rows(c.settings), summary_line=summary_line(c),
        device_rows=device_rows(c), totals=layer_totals(c), cat_label=cat_label, cat_color=cat_color,
        pct=fmt.pct, phase_label=lambda p: colors.PHASE_LABELS.get(p, p),
        graph_uri=png_data_uri(c.graph_png) if c.graph_png else None,
    ))

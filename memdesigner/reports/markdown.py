"""The Markdown report: the same content as the HTML one, as GitHub-flavoured tables. Pictures go
inline as data URIs (one file) or beside the .md as files (renderers that strip data URIs)."""

from __future__ import annotations

import base64
import re

from memdesigner import colors
from memdesigner.reports import fmt
from memdesigner.reports.content import ReportContent, settings_rows
from memdesigner.reports.html import cat_label, device_rows, layer_totals, max_batch_text, summary_line
from memdesigner.text import encodable

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#!])")


def md(s) -> str:
    """A design-provided string as inert Markdown text: one line, HTML-escaped (Markdown renders raw
    HTML), Markdown punctuation backslash-escaped (no links, emphasis or table breaks)."""
    s = " ".join(str(s).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def _table(head: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _phase(p: str) -> str:
    return colors.PHASE_LABELS.get(p, p)


def render_markdown(c: ReportContent, images: str = "inline", stem: str = "report") -> tuple[str, dict]:
    """(Markdown text, {file name: bytes} of the pictures to write beside it)."""
    if images not in ("inline", "files"):
        raise ValueError(f"images: {images!r} is not inline or files")
    r = c.estimate
    pictures: dict[str, bytes] = {}

    def picture(name: str, data: bytes, mime: str) -> str:
        if images == "files":
            fname = f"{stem}.{name}"
            pictures[fname] = data
            return fname.replace(" ", "%20")
        return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")

    L = [f"# Memory report: {md(c.design_name)}", "",
         f"{summary_line(c)} · generated {c.generated} by memdesigner {c.version}", ""]
    if c.device is not None:
        d = c.device
        verdict = "FITS" if d.fits else "DOES NOT FIT"
        L += [f"> **{verdict}** on **{md(d.name)}**: peak incl. runtime **{fmt.format_bytes(d.device_peak_bytes)}** "
              f"({fmt.exact(d.device_peak_bytes)}) vs {fmt.format_bytes(d.capacity_bytes)} "
              f"({fmt.exact(d.capacity_bytes)}); headroom {fmt.signed_bytes(d.headroom_bytes)}; "
              f"largest batch that fits: {max_batch_text(d.max_batch)}.", ">"]
    else:
        L += ["> **No device chosen**: the device table below gives the verdict on every shipped profile.", ">"]
    where = (f" in the {_phase(r.peak_phase)}" if r.peak_phase else "") + \
        (f" at **{md(c.peak_layer_name)}**" if c.peak_layer_name else "")
    L += [f"> Live tensors peak at **{fmt.format_bytes(r.peak_bytes, 2)}** ({fmt.exact(r.peak_bytes)}){where}.", ""]

    L += ["## Network", ""]
    net = [["Name", md(c.design_name)], *([["Follows", md(c.libraries)]] if c.libraries else []),
           *([["Checked", md(c.verified)]] if c.verified else []),
           ["Layers", str(c.layer_count)],
           ["Parameters", f"{r.params:,} ({fmt.format_bytes(r.param_bytes)}"
            + (f"; buffers {fmt.format_bytes(r.buffer_bytes)}" if r.buffer_bytes else "") + ")"],
           ["Weights", fmt.exact(r.param_bytes)], ["Forward FLOPs", f"{fmt.format_flops(r.flops)} for the batch"],
           ["Hand calculation", f"{fmt.format_bytes(r.lower_bound_bytes)} (parameters + the two largest adjacent "
                                "feature maps: the textbook lower bound)"]]
    L += _table(["Property", "Value"], net, set()) + [""]
    if c.graph_png:
        L += [f"![The graph as drawn in the designer window]({picture('graph.png', c.graph_png, 'image/png')})", ""]

    L += ["## Settings", ""]
    L += _table(["Setting", "Value"], [[k, v] for k, v in settings_rows(c.settings)], set()) + [""]

    if images == "inline" and c.timeline_png:  # safe-link rules of Markdown renderers admit PNG, not SVG, data URIs
        tl = picture("timeline.png", c.timeline_png, "image/png")
    else:
        tl = picture("timeline.svg", c.timeline_svg.encode("utf-8"), "image/svg+xml")
    L += ["## Memory over one step", "", f"![Live memory over one step]({tl})",
          "", "Phase peaks: " + ", ".join(f"{_phase(k)} {fmt.format_bytes(v)}" for k, v in r.phase_peaks.items() if v)
          + ".", ""]

    L += ["## What is alive at the peak", ""]
    cats = [[cat_label(k), fmt.human(v), fmt.pct(v, r.peak_bytes)] for k, v in c.at_peak.items()]
    cats.append(["**total**", f"**{fmt.format_bytes(r.peak_bytes, 2)}**", "100 %"])
    L += _table(["Category", "Bytes", "Share"], cats, {1, 2}) + [""]
    ts = [[fmt.format_bytes(t.bytes, 2), cat_label(t.category), md(t.layer_name) if t.layer_name else "(whole model)",
           md(t.tensor), md(t.rule)] for t in c.peak_tensors]
    if c.rest_count:
        ts.append([fmt.format_bytes(c.rest_bytes, 2), "", "", f"{c.rest_count} smaller tensors", ""])
    L += _table(["Bytes", "Category", "Layer", "Tensor", "Why it is alive"], ts, {0}) + [""]

    L += ["## Verdict on every device", "",
          "Same settings on every shipped profile; each device's kind decides the semantics. Peak includes "
          "allocator rounding and the runtime.", ""]
    rows = [[(f"**{md(v.name)}** (chosen)" if v.chosen else md(v.name)), md(v.id),
             fmt.format_bytes(v.capacity_bytes), fmt.format_bytes(v.runtime_overhead_bytes),
             fmt.format_bytes(v.device_peak_bytes), "yes" if v.fits else "**no**", fmt.signed_bytes(v.headroom_bytes),
             max_batch_text(v.max_batch)] for v in device_rows(c)]
    L += _table(["Device", "Profile", "Memory", "Runtime", "Peak incl. runtime", "Fits", "Headroom", "Largest batch"],
                rows, {2, 3, 4, 6, 7}) + [""]

    if c.suggestions:
        L += ["## Suggestions to make it fit", ""] + [f"- {md(s)}" for s in c.suggestions] + [""]

    L += ["## Per layer", "",
          "The same rows as the window's table and its CSV export. Activations: new output storage the op "
          "creates; kept: extra tensors it saves for backward; FLOPs: forward, whole batch.", ""]
    tot = layer_totals(c)
    lr = [[str(i), md(x.name), md(x.type), fmt.shape_text(x.output_shape), f"{x.params:,}", fmt.human(x.param_bytes),
           fmt.human(x.activation_bytes), fmt.human(x.kept_bytes), fmt.format_flops(x.flops) if x.flops else "–"]
          for i, x in enumerate(c.layers, 1)]
    lr.append(["", f"**total** ({c.layer_count} layers)", "", "", f"{r.params:,}", fmt.human(r.param_bytes),
               fmt.human(tot["activation_bytes"]), fmt.human(tot["kept_bytes"]), fmt.format_flops(r.flops)])
    L += _table(["#", "Layer", "Type", "Output shape", "Params", "Weights", "Activations", "Kept for backward",
                 "FLOPs"], lr, {0, 4, 5, 6, 7, 8}) + [""]

    if c.warnings:
        L += ["## Warnings", ""] + [f"- {md(w)}" for w in c.warnings] + [""]
    L += ["---", "", "memdesigner simulates one eager PyTorch step op by op (what each layer allocates, what it "
          "keeps for backward, when each tensor is freed); the rules are in docs/memory-model.md.", ""]
    return encodable("\n".join(L)), pictures

"""`memdesigner report DESIGN.json [settings] -o report.html|.md`: a file to hand on (see
memdesigner.reports)."""

from __future__ import annotations

import sys

from memdesigner.cli.common import CliError, device, load, settings_args, settings_from, writable


def add_parser(sub) -> None:
    r = sub.add_parser("report", help="write a self-contained HTML or Markdown report of a design's memory")
    r.add_argument("design")
    r.add_argument("-o", "--output", required=True, help="report.html or report.md")
    settings_args(r)
    r.add_argument("--format", choices=("html", "md"), default=None, help="default: from the output's extension")
    r.add_argument("--images", choices=("inline", "files"), default="inline",
                   help="Markdown: pictures as data URIs (one file) or as files beside the .md")
    r.add_argument("--no-graph", action="store_true", help="no Qt-drawn pictures: leave out the graph, keep the timeline as SVG")
    r.add_argument("--no-max-batch", action="store_true", help="skip the largest-batch search on every device")


def run(args) -> int:
    from memdesigner.reports import ReportError, collect, format_for, write_report

    try:
        kind = format_for(args.output, args.format)
    except ValueError as err:
        raise CliError(str(err)) from None
    writable(args.output)
    design = load(args.design)
    settings = settings_from(args, design)
    dev = device(args, design)
    try:
        content = collect(design, settings, dev, max_batch=not args.no_max_batch)
    except ReportError as err:
        raise CliError(f"{args.design}: {err}") from None
    if not args.no_graph:
        _qt_pictures(content, design, dev, kind)
    try:
        files = write_report(content, args.output, kind, images=args.images)
    except OSError as err:
        from memdesigner.io.atomic_write import cannot_write

        raise CliError(cannot_write(args.output, err)) from None
    for f in files:
        print(f)
    return 0


def _qt_pictures(content, design, dev, kind: str) -> None:
    """The canvas picture (and, for Markdown, the timeline as PNG) through Qt, offscreen; without
    Qt the report goes out without the graph picture and with the SVG timeline."""
    try:
        from memdesigner._qt.dialogs.report_export import design_canvas_png, svg_png_bytes
    except ImportError as err:
        sys.stderr.write(f"memdesigner: warning: no graph picture in the report (the Qt window is unavailable: "
                         f"{err})\n")
        return
    content.graph_png = design_canvas_png(design, content.settings, dev)
    if kind == "md":
        content.timeline_png = svg_png_bytes(content.timeline_svg)

"""Reports people can hand on: one self-contained HTML or Markdown file with the network, the
settings, the verdict on every device, the timeline, the per-layer table and what is alive at the
peak. No Qt: the CLI and the window pass in the canvas picture when they have one."""

from memdesigner.reports.content import ReportContent, ReportError, collect
from memdesigner.reports.write import FORMATS, format_for, write_report

__all__ = ["FORMATS", "ReportContent", "ReportError", "collect", "format_for", "write_report"]

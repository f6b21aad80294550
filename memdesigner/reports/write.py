"""Write a report file; the format follows the file name (.html/.htm or .md). Each file is
written atomically (io/atomic_write.py): a full disk leaves the old report whole."""

from __future__ import annotations

from pathlib import Path

from memdesigner.io.atomic_write import write_atomic
from memdesigner.reports.content import ReportContent

FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def format_for(path, fmt: str | None = None) -> str:
    """'html' or 'md' from an explicit choice or the file's extension; ValueError otherwise."""
    if fmt:
        if fmt not in ("html", "md"):
            raise ValueError(f"report format {fmt!r} is not html or md")
        return fmt
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise ValueError(f"{path}: the report file must end in .html or .md")
    return FORMATS[ext]


def write_report(c: ReportContent, path, fmt: str | None = None, images: str = "inline") -> list[Path]:
    """Write the report (and, for Markdown with images="files", its pictures beside it); returns
    the files written."""
    path = Path(path)
    kind = format_for(path, fmt)
    if kind == "html":
        from memdesigner.reports.html import render_html

        write_atomic(path, render_html(c))
        return [path]
    from memdesigner.reports.markdown import render_markdown

    text, pictures = render_markdown(c, images=images, stem=path.stem)
    written = []
    for name, data in pictures.items():
        p = path.with_name(name)
        write_atomic(p, data)
        written.append(p)
    write_atomic(path, text)
    return [path, *written]

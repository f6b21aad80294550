"""Write a report file; the format follows the file name (.html/.htm or .md)."""

from __future__ import annotations

from pathlib import Path

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

        path.write_text(render_html(c), encoding="utf-8")
        return [path]
    from memdesigner.reports.markdown import render_markdown

    text, pictures = render_markdown(c, images=images, stem=path.stem)
    written = []
    for name, data in pictures.items():
        p = path.with_name(name)
        p.write_bytes(data)
        written.append(p)
    path.write_text(text, encoding="utf-8")
    return [path, *written]

"""Messages that quote user text (names, file contents, exceptions from model code) must stay one
printable line: the CLI's contract is one stderr line per error."""

from __future__ import annotations

MAX_MESSAGE_CHARS = 600


def one_line(text) -> str:
    """``text`` with newlines, other control characters and lone surrogates escaped."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text))


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (what a JSON ``"\\udcff"`` escape in a design's name loads
    as) written as its six-character escape ``\\udcff``: UTF-8 cannot encode one, so a report,
    CSV or SVG holding it raised UnicodeEncodeError mid-write. Everything else stays as it is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def first_line(text, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The first non-empty line of a (possibly multi-line) message, escaped, cut at ``limit``;
    " ..." marks what was left out."""
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    s = one_line(lines[0].strip()) if lines else ""
    more = len(lines) > 1
    if len(s) > limit:
        s, more = s[:limit], True
    return s + (" ..." if more else "")

"""Messages that quote user text (names, file contents, exceptions from model code) must stay one
printable line: the CLI's contract is one stderr line per error."""

from __future__ import annotations

MAX_MESSAGE_CHARS = 600


def one_line(text) -> str:
    """``text`` with newlines, other control characters and lone surrogates escaped."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text))


def first_line(text, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The first non-empty line of a (possibly multi-line) message, escaped, cut at ``limit``;
    " ..." marks what was left out."""
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    s = one_line(lines[0].strip()) if lines else ""
    more = len(lines) > 1
    if len(s) > limit:
        s, more = s[:limit], True
    return s + (" ..." if more else "")

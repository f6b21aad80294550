"""Printing names that are not valid Unicode: a JSON ``"\\udcff"`` escape loads as a lone
surrogate, which a UTF-8 stdout refuses to encode; the CLI writes it as ``\\udcff`` instead of
crashing mid-table."""

from __future__ import annotations

import sys


def tolerate_unencodable_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (or closed): leave it
            pass

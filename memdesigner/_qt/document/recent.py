"""Recent files: absolute, resolved paths (so ``net.json`` in two folders are two entries, and one
file reached by two spellings is one), newest first, at most MAX_RECENT, kept in QSettings.
Entries that are not absolute (older versions stored paths as typed) or no longer exist are
dropped when the list is read."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

MAX_RECENT = 10
KEY = "recent_files"


def canonical(path) -> str:
    return str(Path(path).expanduser().resolve())


def entries() -> list[str]:
    v = QSettings().value(KEY, [])
    raw = [v] if isinstance(v, str) else list(v or [])
    out: list[str] = []
    for p in raw:
        if not isinstance(p, str) or not Path(p).is_absolute():
            continue
        c = canonical(p)
        if c not in out and Path(c).is_file():
            out.append(c)
    if out != raw:
        QSettings().setValue(KEY, out)
    return out[:MAX_RECENT]


def add(path) -> list[str]:
    c = canonical(path)
    rec = [c] + [p for p in entries() if p != c]
    QSettings().setValue(KEY, rec[:MAX_RECENT])
    return rec[:MAX_RECENT]


def labels(paths: list[str]) -> list[str]:
    """Menu labels: the file name, with its folder where two entries share a name."""
    names = [Path(p).name for p in paths]
    return [f"{n} — {Path(p).parent}" if names.count(n) > 1 else n for n, p in zip(names, paths)]

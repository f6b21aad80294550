"""Checking an output path before the work that fills it: every command that writes a file
(import, export, render) refuses a path it cannot write with one line naming the path and why,
instead of a traceback after the expensive part."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputPathError(ValueError):
    """An output file that cannot be written; the message names the path and the reason."""


def check_output_path(path) -> Path:
    """The path, if a file can be written there; else OutputPathError. A symlink is judged by its
    target. The folder is probed with a real temporary file, so read-only file systems and
    permissions count as they will for the write itself (also for root)."""
    given = str(path)
    if not given:
        raise OutputPathError("output path is empty")
    target = Path(os.path.realpath(given))
    if target.is_dir():
        raise OutputPathError(f"{given}: cannot write: is a directory")
    folder = target.parent
    if not folder.exists():
        raise OutputPathError(f"{given}: cannot write: folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputPathError(f"{given}: cannot write: {folder} is not a folder")
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputPathError(f"{given}: cannot write: permission denied")
    try:
        fd, probe = tempfile.mkstemp(prefix=".memdesigner-probe-", dir=str(folder))
    except OSError as err:
        raise OutputPathError(f"{given}: cannot write in {folder}: {err.strerror or err}") from None
    os.close(fd)
    os.unlink(probe)
    return Path(given)

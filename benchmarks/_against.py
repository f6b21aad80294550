"""Run a benchmark script again with another checkout's memdesigner (its figures, as JSON on the
last line of stdout), so one run prints the engine before and after a change side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_against(checkout: str, script: str, args: list[str]) -> dict:
    """``script`` (this tree's copy) with ``args`` + ``--json``, importing memdesigner from
    ``checkout``; its JSON result."""
    root = str(Path(checkout).resolve())
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run([sys.executable, script, *args, "--json"], env=env, cwd=root, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def speedup(before: float, after: float) -> str:
    return f"{before / after:.1f}x" if after else "-"

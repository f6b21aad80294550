"""Imported last by the import server (torch_isolated's preload): when its caller is gone the
server leaves at once instead of finalizing an interpreter with torch loaded (5.7 s after a
``kill -9`` of the CLI on a busy 2-core machine, while nothing of it is needed any more).
Its forks (the contained children) always leave with ``os._exit`` and never run this."""

from __future__ import annotations

import atexit
import os

atexit.register(os._exit, 0)  # registered last, so it runs first

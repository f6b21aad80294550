"""Work-arounds for bugs in the Qt bindings that would otherwise crash the window.

PySide6 6.12 on CPython < 3.12 returns ``None`` from void methods (``painter.setPen(...)`` and
thousands of other calls) without taking a reference, so every call drops None's reference count
by one; after a few minutes of painting it reaches zero and the interpreter aborts with
"none_dealloc: deallocating None" (True and False suffer the same through bool returns). CPython 3.12 made None immortal, which hides the bug; here we
do the same by giving None a reference count so large that no session can exhaust it. The check
runs once, and only changes anything when the leak is actually observed.
"""

from __future__ import annotations

import ctypes
import sys

_IMMORTAL = 1 << 60


def _leaks_none() -> bool:
    from PySide6.QtCore import QRectF

    r = QRectF(0, 0, 1, 1)
    before = sys.getrefcount(None)
    for _ in range(50):
        r.setWidth(2.0)  # a void method
    return sys.getrefcount(None) < before - 25


def guard_none_refcount() -> bool:
    """Make None effectively immortal when the bindings leak it; True when applied."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    try:
        if not _leaks_none():
            return False
        for singleton in (None, True, False):  # bools returned from Qt leak the same way
            ctypes.c_ssize_t.from_address(id(singleton)).value = _IMMORTAL
        return True
    except Exception:  # never let a work-around stop the window from opening  # noqa: BLE001
        return False

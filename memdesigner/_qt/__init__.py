"""The Qt designer window (PySide6). Nothing outside this package imports Qt."""

from memdesigner._qt.compat import guard_none_refcount as _guard

_guard()

"""The cyclic garbage collector paused while the engine runs.

An estimate allocates tens of thousands of short-lived tuples and lists, none of them in
reference cycles: reference counting frees them all. With the collector running, those
allocations trigger collections that walk every live object of the process (the design, its
analysis, the rule caches), which on a 10,000-op design was a fifth of the estimate's time.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

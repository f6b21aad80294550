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
def gc_paused(promote: bool = False):
    """``promote``: on the way out, move what the paused code left alive into the oldest
    generation instead of having the first allocation after it walk all of it. Paused,
    Python still counts every allocation, so the next allocation starts a young collection
    over every object the estimate made and still holds (its report: the timeline's events,
    the layer rows): 5 ms of a 10,000-op estimate, 0.35 ms of a 1,000-op one, finding
    nothing (none of them is in a cycle). ``gc.freeze()`` then ``gc.unfreeze()`` moves every
    tracked object to the oldest generation in two list splices and resets the young count;
    they are still collected by full collections, and still freed by reference counting.
    Not done when someone else froze objects (unfreeze would thaw theirs too)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if promote:
            promote_survivors()
        gc.enable()


def promote_survivors() -> None:
    """Move every tracked object to the oldest generation (gc.freeze then gc.unfreeze: two list
    splices) and reset the young counts; for the end of work done with the collector paused (an
    estimate, a file read on the window's worker). Full collections still see them. Not done
    when something else froze objects (unfreeze would thaw those too)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()

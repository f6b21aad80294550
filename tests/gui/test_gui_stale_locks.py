"""Stale ``.lock`` files in the recovery folder are swept at start: an instance killed after
saving (its autosave cleared, its lock file left) left one each time, and nothing removed them."""

import os
import time

from memdesigner._qt.document import recovery
from memdesigner.model.design import Design


def _killed_after_saving() -> recovery.Slot:
    slot = recovery.Slot()
    slot.write(Design("x"), None)
    slot.clear()  # saved: nothing to recover, the lock file stays while the instance runs
    slot._lock.release()  # what the kernel does at a kill -9 (the file stays behind)
    return slot


def test_start_sweeps_locks_no_one_holds_and_no_autosave_needs():
    dead = _killed_after_saving()
    lock = recovery._lock_path(dead.file)
    old = time.time() - 3600
    os.utime(lock, (old, old))
    young = _killed_after_saving()  # (a minute old at most: maybe an instance still starting)
    running = recovery.Slot()
    running.write(Design("running"), None)
    running.clear()
    os.utime(recovery._lock_path(running.file), (old, old))
    crashed = recovery.Slot()
    crashed.write(Design("crashed"), None)
    crashed._lock.release()  # killed with work unsaved: its autosave and lock are offered
    os.utime(recovery._lock_path(crashed.file), (old, old))
    found = recovery.find_and_release()
    assert [r.name for r in found] == ["crashed"]
    assert not lock.exists()
    assert recovery._lock_path(young.file).exists()
    assert recovery._lock_path(running.file).exists()  # held by a running instance
    assert recovery._lock_path(crashed.file).exists()
    running.release()

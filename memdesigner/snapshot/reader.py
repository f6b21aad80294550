"""Read a PyTorch memory snapshot pickle without running code from it.

A snapshot is a pickle of plain dicts, lists, tuples, strings and numbers, so a restricted
unpickler that refuses every global (``find_class``) loads every real snapshot, while a crafted
file whose ``__reduce__`` names ``os.system`` is refused before anything runs.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

EVENT_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
                 "segment_unmap", "snapshot", "oom", "free")  # "free": older torch


class SnapshotError(Exception):
    """The file is not a memory snapshot (or not a safe one); the message is one line."""


class _PlainUnpickler(pickle.Unpickler):
    """Builds only pickle's own containers and scalars: every class/function lookup is refused."""

    def find_class(self, module, name):
        raise SnapshotError(f"refuses to load {module}.{name}: a memory snapshot holds only plain data, "
                            "this pickle asks to run code")


class _Chunks:
    """The file seen through Python-level reads: the C unpickler calls back here for every
    frame (64 KiB in protocol 4), so a UI thread gets the GIL while a big snapshot loads."""

    def __init__(self, f):
        self.f = f
        self.read_bytes = 0

    def read(self, n=-1):
        b = self.f.read(n)
        self.read_bytes += len(b)
        return b

    def readinto(self, buf):
        n = self.f.readinto(buf)
        self.read_bytes += n or 0
        return n

    def readline(self):
        b = self.f.readline()
        self.read_bytes += len(b)
        return b


def _load(f, name: str) -> dict:
    try:
        obj = _PlainUnpickler(f).load()
    except SnapshotError as err:
        raise SnapshotError(f"{name}: {err}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            MemoryError, RecursionError) as err:
        raise SnapshotError(f"{name}: not a PyTorch memory snapshot pickle ({type(err).__name__}: {err})") from None
    return _check(obj, name)


def _check(obj, name: str) -> dict:
    if isinstance(obj, list):
        obj = {"segments": obj, "device_traces": []}
    if not isinstance(obj, dict) or not isinstance(obj.get("segments", []), list):
        raise SnapshotError(f"{name}: not a PyTorch memory snapshot (expected a dict with 'segments' and "
                            "'device_traces')")
    if "segments" not in obj and "device_traces" not in obj:
        raise SnapshotError(f"{name}: not a PyTorch memory snapshot (no 'segments' or 'device_traces')")
    obj.setdefault("segments", [])
    traces = obj.setdefault("device_traces", [])
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise SnapshotError(f"{name}: 'device_traces' must be a list of event lists, one per device")
    for si, seg in enumerate(obj["segments"]):
        if not isinstance(seg, dict) or not isinstance(seg.get("total_size"), int):
            raise SnapshotError(f"{name}: segment {si} has no integer 'total_size'")
        for bi, b in enumerate(seg.get("blocks", [])):
            if not isinstance(b, dict) or not isinstance(b.get("size"), int) or "state" not in b:
                raise SnapshotError(f"{name}: segment {si} block {bi} needs an integer 'size' and a 'state'")
    for d, tr in enumerate(traces):
        for i, e in enumerate(tr):
            if not isinstance(e, dict) or e.get("action") not in EVENT_ACTIONS:
                raise SnapshotError(f"{name}: device {d} event {i}: unknown action "
                                    f"{e.get('action') if isinstance(e, dict) else e!r}")
            if e["action"] not in ("oom", "snapshot") and not isinstance(e.get("size"), int):
                raise SnapshotError(f"{name}: device {d} event {i} ({e['action']}) has no integer 'size'")
    return obj


def loads_snapshot(data: bytes, name: str = "snapshot") -> dict:
    """Parse snapshot bytes. A list (segments only, as ``torch.cuda.memory_snapshot()``) is
    accepted as memory_viz does."""
    return _load(io.BytesIO(data), name)


def load_snapshot(path) -> dict:
    """Read a snapshot file; SnapshotError (one line naming the file) if it is not one."""
    p = Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 - closed below
    except OSError as err:
        raise SnapshotError(f"{path}: cannot read ({err.strerror or err})") from None
    with f:
        try:
            return _load(_Chunks(f), str(path))
        except OSError as err:
            raise SnapshotError(f"{path}: cannot read ({err.strerror or err})") from None

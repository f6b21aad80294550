"""Read a PyTorch memory snapshot pickle without running code from it, within stated budgets.

A snapshot is a pickle of plain dicts, lists, tuples, strings and numbers, so a restricted
unpickler that refuses every global (``find_class``) loads every real snapshot, while a crafted
file whose ``__reduce__`` names ``os.system`` is refused before anything runs.

Plain data can still be hostile: pickle's memo lets a 540 KB file name one 10^4-event list
10^4 times (10^8 events to walk), and a 1 MB file can nest a tuple a million deep, whose hash
(a dict key) recurses in C past the thread's stack. So the reader counts what was built, as the
code after it will walk it (a shared list once per use), against the limits of
memdesigner.io.input_limits, checks every field the replay reads, and loads on a thread whose
stack is sized for the deepest nesting the file could hold (the pickle_depth module).
"""

from __future__ import annotations

import io
import pickle
import sys

from memdesigner.io.input_limits import InputLimitError, limit, open_limited, over
from memdesigner.snapshot import pickle_depth

EVENT_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
                 "segment_unmap", "snapshot", "oom", "free")  # "free": older torch
MAX_SIZE = 2**48  # bytes in one block, segment or event (256 TiB: no device has more)
MAX_DEVICES = 4096  # device traces in one snapshot (one process sees a few GPUs)
IN_MEMORY_BYTES = 8 << 20  # smaller files are read whole; bigger ones stream through _Chunks
MAX_TOTAL = 2**62  # all sizes of one trace together: their running sum must fit numpy's int64


class SnapshotError(Exception):
    """The file is not a memory snapshot (or not a safe one); the message is one line."""


class SnapshotCancelled(Exception):
    """The reader saw its cancel event (the window's Cancel)."""


class _PlainUnpickler(pickle.Unpickler):
    """Builds only pickle's own containers and scalars: every class/function lookup is refused."""

    def find_class(self, module, name):
        raise SnapshotError(f"refuses to load {module}.{name}: a memory snapshot holds only plain data, "
                            "this pickle asks to run code")


class _Chunks:
    """The file seen through Python-level reads: the C unpickler calls back here for every
    frame (64 KiB in protocol 4), so a UI thread gets the GIL while a big snapshot loads, and a
    cancel is seen within one frame. Only read and readline (see _load)."""

    def __init__(self, f, cancel=None):
        self.f = f
        self.read_bytes = 0
        self.cancel = cancel

    def _check(self):
        if self.cancel is not None and self.cancel.is_set():
            raise SnapshotCancelled()

    def read(self, n=-1):
        self._check()
        b = self.f.read(n)
        self.read_bytes += len(b)
        return b

    def readline(self):
        self._check()
        b = self.f.readline()
        self.read_bytes += len(b)
        return b

    def peek(self, n=1):
        """Bytes ahead, not consumed: the C unpickler then parses opcodes from its own buffer,
        not one Python read per opcode (a pickle without frames, as a crafted one is)."""
        return self.f.peek(n)


def _unpickle(f, name: str):
    hook = sys.excepthook

    def quiet_exported_buffers(kind, value, tb):
        """CPython's unpickler, refused the memory a BYTEARRAY8 length of 7 * 10^18 asks for,
        frees that bytearray with a buffer still exported, and the bytearray prints a SystemError
        through sys.excepthook: a second line under the one-line error. Dropped; the rest is
        the hook's."""
        if not (kind is SystemError and "exported buffers" in str(value)):
            hook(kind, value, tb)

    sys.excepthook = quiet_exported_buffers
    try:
        return _PlainUnpickler(f).load()
    except (SnapshotError, SnapshotCancelled, InputLimitError):
        raise
    except Exception as err:  # noqa: BLE001 - any failure of the C unpickler on bad bytes: one line
        text = str(err).splitlines()[0][:200] if str(err) else ""
        raise SnapshotError(f"not a PyTorch memory snapshot pickle ({type(err).__name__}: {text})") from None
    finally:
        sys.excepthook = hook


def _load(src, name: str, cancel=None) -> dict:
    """Unpickle ``src`` (a rewindable binary reader) on a stack deep enough for it, then check it."""
    try:
        bound = pickle_depth.depth_bound(src)
        src.rewind()
        # no readinto: given one, the C unpickler first allocates what a length field claims
        # (a gigabyte from 9 bytes), and a failed read then leaves an "exported buffers" error
        f = _Chunks(src, cancel)
        try:
            obj = pickle_depth.call_with_stack_for(bound, _unpickle, f, name)
        except pickle_depth.TooDeep:
            src.rewind()
            depth = pickle_depth.exact_depth(f)
            src.rewind()
            try:
                obj = pickle_depth.call_with_stack_for(depth, _unpickle, f, name)
            except pickle_depth.TooDeep:
                raise SnapshotError(f"tuples nested {depth:,} deep: not a PyTorch memory snapshot") from None
        return _check(obj, cancel)
    except SnapshotError as err:
        raise SnapshotError(f"{name}: {err}") from None
    except InputLimitError as err:
        raise SnapshotError(str(err) if str(err).startswith(name) else f"{name}: {err}") from None
    except OSError as err:
        raise SnapshotError(f"{name}: cannot read ({err.strerror or err})") from None


def _int(v, lo: int = 0, hi: int = MAX_SIZE) -> bool:
    return isinstance(v, int) and lo <= v <= hi


def _budget(name: str, n: int, what: str) -> None:
    if n > limit(name):
        raise InputLimitError(over(name, f"{n:,} {what} (counting each use of a shared list)"))


def _check(obj, cancel=None) -> dict:
    """The snapshot dict, its sizes and counts checked before anything walks it."""
    if isinstance(obj, list):
        obj = {"segments": obj, "device_traces": []}
    if not isinstance(obj, dict) or not isinstance(obj.get("segments", []), list):
        raise SnapshotError("not a PyTorch memory snapshot (expected a dict with 'segments' and 'device_traces')")
    if "segments" not in obj and "device_traces" not in obj:
        raise SnapshotError("not a PyTorch memory snapshot (no 'segments' or 'device_traces')")
    obj.setdefault("segments", [])
    traces = obj.setdefault("device_traces", [])
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise SnapshotError("'device_traces' must be a list of event lists, one per device")
    if len(traces) > MAX_DEVICES:
        raise SnapshotError(f"{len(traces):,} device traces: more than {MAX_DEVICES:,} devices")
    _budget("MAX_SNAPSHOT_EVENTS", sum(len(t) for t in traces), "trace events")
    segs = obj["segments"]
    blocks = 0
    for si, seg in enumerate(segs):
        if not isinstance(seg, dict) or not _int(seg.get("total_size")):
            raise SnapshotError(f"segment {si} has no integer 'total_size' (0 to 2^48)")
        if not _int(seg.get("device", 0), 0, 2**16):
            raise SnapshotError(f"segment {si}: 'device' is not a device index")
        bl = seg.get("blocks", [])
        if not isinstance(bl, list):
            raise SnapshotError(f"segment {si}: 'blocks' is not a list")
        blocks += 1 + len(bl)
        _budget("MAX_SNAPSHOT_BLOCKS", blocks, "segments and blocks")
    frames = 0
    seg_total = block_total = 0
    for si, seg in enumerate(segs):
        seg_total += seg["total_size"]
        for bi, b in enumerate(seg.get("blocks", [])):
            if not isinstance(b, dict) or not _int(b.get("size")) or not isinstance(b.get("state"), str):
                raise SnapshotError(f"segment {si} block {bi} needs an integer 'size' (0 to 2^48) "
                                    "and a 'state'")
            if not _int(b.get("address", 0), 0, 2**64):
                raise SnapshotError(f"segment {si} block {bi}: 'address' is not an address")
            frames += _frames(b.get("frames"), f"segment {si} block {bi}")
            block_total += b["size"]
    if max(seg_total, block_total) > MAX_TOTAL:
        raise SnapshotError("the segments' (or their blocks') sizes add up to more than 2^62 bytes")
    for d, tr in enumerate(traces):
        total = 0
        for i, e in enumerate(tr):
            if not i & 0xFFFF and cancel is not None and cancel.is_set():
                raise SnapshotCancelled()
            a = e.get("action") if isinstance(e, dict) else None
            if not isinstance(a, str) or a not in EVENT_ACTIONS:
                raise SnapshotError(f"device {d} event {i}: unknown action {_short(a if isinstance(e, dict) else e)}")
            size = e.get("size")
            if a not in ("oom", "snapshot") and not _int(size):
                raise SnapshotError(f"device {d} event {i} ({a}) has no integer 'size' (0 to 2^48)")
            if _int(size):
                total += size
            if not _int(e.get("addr", 0), 0, 2**64):
                raise SnapshotError(f"device {d} event {i} ({a}): 'addr' is not an address")
            t = e.get("time_us")
            if t is not None and not _int(t, -(2**62), 2**62):
                raise SnapshotError(f"device {d} event {i} ({a}): 'time_us' is not an integer")
            frames += _frames(e.get("frames"), f"device {d} event {i}")
            if frames > limit("MAX_SNAPSHOT_FRAMES"):
                _budget("MAX_SNAPSHOT_FRAMES", frames, "stack frames")
        if total > MAX_TOTAL:
            raise SnapshotError(f"device {d}: the sizes of its events add up to more than 2^62 bytes")
    return obj


def _frames(fr, where: str) -> int:
    """How many frames the phase and layer rules will read (None: no frames)."""
    if fr is None:
        return 0
    if not isinstance(fr, list):
        raise SnapshotError(f"{where}: 'frames' is not a list")
    return len(fr)


def _short(v) -> str:
    if isinstance(v, (str, int, float, type(None))) and not (isinstance(v, int) and abs(v) > 10**30):
        text = repr(v)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"(a {type(v).__name__})"


class _Bytes(io.BytesIO):
    def rewind(self) -> None:
        self.seek(0)

    def peek(self, n: int = 1) -> bytes:
        pos = self.tell()
        return bytes(self.getbuffer()[pos:pos + max(n, 1)])


def loads_snapshot(data: bytes, name: str = "snapshot") -> dict:
    """Parse snapshot bytes. A list (segments only, as ``torch.cuda.memory_snapshot()``) is
    accepted as memory_viz does."""
    return _load(_Bytes(data), name)


def load_snapshot(path, cancel=None) -> dict:
    """Read a snapshot file; SnapshotError (one line naming the file) if it is not one or is
    over a limit. ``cancel`` (a threading.Event): SnapshotCancelled soon after it is set."""
    try:
        f = open_limited(path, "MAX_SNAPSHOT_MB")
    except InputLimitError as err:
        raise SnapshotError(str(err)) from None
    with f:
        head = f.read(IN_MEMORY_BYTES + 1)
        if len(head) <= IN_MEMORY_BYTES:  # small: parsed from memory (the C unpickler, no Python reads)
            return _load(_Bytes(head), str(path), cancel)
        f.rewind()
        return _load(f, str(path), cancel)

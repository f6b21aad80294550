"""Replay a snapshot's trace into allocated and reserved memory over its events.

One pass over the events makes integer deltas (numpy does the running sums); the state at the
first recorded event is the snapshot's end state minus the trace's net change, which counts
every block allocated before recording began (or before the ring buffer's oldest entry) as
live from the start, as memory_viz does. "Allocated" follows ``torch.cuda.memory_allocated()``
(allocator blocks, freed at ``free_requested``); "reserved" follows ``memory_reserved()``
(segments from ``cudaMalloc``/expandable mappings).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memdesigner.snapshot import phases as ph
from memdesigner.snapshot.phases import PHASES

_ALLOC_ACTIONS = {"alloc": 1, "free_requested": -1, "free": -1}
_FREES = ("free_requested", "free_completed", "free")
_SEG_ACTIONS = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


@dataclass
class Span:
    phase: str
    start: int  # first event index
    end: int  # one past the last


@dataclass
class Replay:
    device: int
    n_events: int
    allocated: np.ndarray  # int64, bytes after each event (one entry for a trace-less snapshot)
    reserved: np.ndarray  # int64
    phase: np.ndarray  # int8 per event: index into PHASES
    time_us: np.ndarray  # int64 per event (0 where the trace has none)
    initial_allocated: int  # live before the first recorded event
    initial_reserved: int
    end_allocated: int  # from the segments at snapshot time
    end_reserved: int
    spans: list = field(default_factory=list)  # list[Span]
    oom_events: int = 0
    top_at_peak: list = field(default_factory=list)  # [(label, bytes)], largest first
    categories_at_peak: dict | None = None  # {category: bytes} where frames name it (exported snapshots)
    devices_with_events: list = field(default_factory=list)

    @property
    def peak_index(self) -> int:
        return int(np.argmax(self.allocated))

    @property
    def peak_allocated(self) -> int:
        return int(self.allocated.max())

    @property
    def peak_reserved(self) -> int:
        return int(self.reserved.max())

    def phase_peaks(self) -> dict:
        """{phase: {"allocated": peak, "reserved": peak}} over every span of that phase; a span
        starts at the level its first event found (what the previous phase left)."""
        out: dict = {}
        for sp in self.spans:
            a0 = sp.start - 1
            pa = int(self.allocated[sp.start:sp.end].max())
            pr = int(self.reserved[sp.start:sp.end].max())
            if a0 >= 0:
                pa, pr = max(pa, int(self.allocated[a0])), max(pr, int(self.reserved[a0]))
            else:
                pa, pr = max(pa, self.initial_allocated), max(pr, self.initial_reserved)
            cur = out.setdefault(sp.phase, {"allocated": 0, "reserved": 0})
            cur["allocated"] = max(cur["allocated"], pa)
            cur["reserved"] = max(cur["reserved"], pr)
        return {p: out[p] for p in PHASES if p in out}

    def to_dict(self) -> dict:
        i = self.peak_index
        return {
            "device": self.device,
            "events": self.n_events,
            "peak_allocated_bytes": self.peak_allocated,
            "peak_reserved_bytes": self.peak_reserved,
            "peak_event": i if self.n_events else None,
            "peak_phase": PHASES[self.phase[i]] if self.n_events else None,
            "allocated_before_recording_bytes": self.initial_allocated,
            "reserved_before_recording_bytes": self.initial_reserved,
            "end_allocated_bytes": self.end_allocated,
            "end_reserved_bytes": self.end_reserved,
            "phase_peaks": self.phase_peaks(),
            "phases": [{"phase": s.phase, "first_event": s.start, "last_event": s.end - 1} for s in self.spans],
            "top_at_peak": [{"frame": lbl, "bytes": b} for lbl, b in self.top_at_peak],
            "categories_at_peak": self.categories_at_peak,
            "oom_events": self.oom_events,
        }


def _end_state(segments: list, device: int) -> tuple[int, int, list]:
    alloc = reserved = 0
    blocks = []
    for seg in segments:
        if seg.get("device", device) != device:
            continue
        reserved += seg["total_size"]
        for b in seg.get("blocks", ()):
            if b["state"] == "active_allocated":
                alloc += b["size"]
                blocks.append(b)
    return alloc, reserved, blocks


def pick_device(snap: dict) -> int:
    """The device with the most events (memory_viz asks when several have some)."""
    traces = snap.get("device_traces") or []
    best, n = 0, -1
    for d, tr in enumerate(traces):
        if len(tr) > n:
            best, n = d, len(tr)
    if n <= 0:
        from collections import Counter

        devs = Counter(seg.get("device", 0) for seg in snap.get("segments", ()))
        return max(sorted(devs), key=devs.__getitem__) if devs else 0  # ties: the lowest index
    return best


def _cancelled(cancel, i: int) -> None:
    if not i & 0xFFFF and cancel is not None and cancel.is_set():
        from memdesigner.snapshot.reader import SnapshotCancelled

        raise SnapshotCancelled()


def replay(snap: dict, device: int | None = None, top: int = 10, cancel=None) -> Replay:
    """Allocated/reserved after every event of one device, phases and what is live at the peak.
    ``cancel`` (a threading.Event): SnapshotCancelled soon after it is set."""
    dev = pick_device(snap) if device is None else device
    traces = snap.get("device_traces") or []
    events = traces[dev] if dev < len(traces) else []
    n = len(events)
    end_alloc, end_res, end_blocks = _end_state(snap.get("segments", []), dev)
    d_alloc = np.zeros(n, dtype=np.int64)
    d_res = np.zeros(n, dtype=np.int64)
    phase = np.zeros(n, dtype=np.int8)
    time_us = np.zeros(n, dtype=np.int64)
    pending: set = set()  # free_requested seen, free_completed not yet
    ooms = 0
    cur_phase = ph.UNKNOWN
    first_known = None
    classify = ph.classify
    for i, e in enumerate(events):
        _cancelled(cancel, i)
        a = e["action"]
        s = _ALLOC_ACTIONS.get(a)
        if s is not None:
            d_alloc[i] = s * e["size"]
            if a == "free_requested":
                pending.add(e.get("addr"))
        elif a == "free_completed":
            addr = e.get("addr")
            if addr in pending:
                pending.discard(addr)
            else:
                d_alloc[i] = -e["size"]
        else:
            s = _SEG_ACTIONS.get(a)
            if s is not None:
                d_res[i] = s * e["size"]
            elif a == "oom":
                ooms += 1
        t = e.get("time_us")
        if t is not None:
            time_us[i] = t
        k = classify(e.get("frames"))
        if k == ph.FORWARD and a in _FREES:
            k = ph.UNKNOWN  # `del out` after a step is no forward: only allocations start one
        if k != ph.UNKNOWN:
            cur_phase = k
            if first_known is None:
                first_known = k
        phase[i] = cur_phase
    if n:
        # events before the first one with Python frames belong to its phase
        phase[phase == ph.UNKNOWN] = ph.FORWARD if first_known is None else first_known
    cum_a = np.cumsum(d_alloc)
    cum_r = np.cumsum(d_res)
    net_a = int(cum_a[-1]) if n else 0
    net_r = int(cum_r[-1]) if n else 0
    init_a = max(end_alloc - net_a, -int(cum_a.min()) if n else 0, 0)
    init_r = max(end_res - net_r, -int(cum_r.min()) if n else 0, 0)
    if n:
        allocated = init_a + cum_a
        reserved = init_r + cum_r
    else:
        allocated = np.array([end_alloc], dtype=np.int64)
        reserved = np.array([end_res], dtype=np.int64)
    rp = Replay(dev, n, allocated, reserved, phase, time_us, init_a, init_r, end_alloc, end_res, oom_events=ooms,
                devices_with_events=[d for d, tr in enumerate(traces) if tr])
    rp.spans = _spans(phase)
    rp.top_at_peak, rp.categories_at_peak = _live_at(events, phase, end_blocks, rp.peak_index if n else -1,
                                                     int(allocated.max()), top, cancel)
    return rp


def _spans(phase: np.ndarray) -> list:
    n = len(phase)
    if not n:
        return []
    cuts = np.flatnonzero(np.diff(phase)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [n]))
    return [Span(PHASES[phase[a]], int(a), int(b)) for a, b in zip(starts, ends)]


def _live_at(events: list, phase: np.ndarray, end_blocks: list, peak: int, peak_bytes: int, top: int, cancel=None):
    """Bytes live at event ``peak`` grouped by the frame that allocated them. Blocks allocated
    before recording are named by their frames in the end state where they are still there."""
    live: dict = {}  # addr -> (size, frames)
    seen_alloc: set = set()
    for i, e in enumerate(events[:peak + 1]):
        _cancelled(cancel, i)
        a = e["action"]
        if a == "alloc":
            fr = e.get("frames")
            live[e.get("addr")] = (e["size"], fr if fr else PHASES[phase[i]])
            seen_alloc.add(e.get("addr"))
        elif a in ("free_requested", "free", "free_completed"):
            live.pop(e.get("addr"), None)
    groups: dict = {}
    cats: dict = {}
    any_cat = False

    def add(size, frames):
        nonlocal any_cat
        if isinstance(frames, str):  # no frames: autograd's device thread, or a C++ caller
            groups[f"<{frames}, no frames>"] = groups.get(f"<{frames}, no frames>", 0) + size
            cats["unknown"] = cats.get("unknown", 0) + size
            return
        lbl = ph.attribute(frames) or "<no frames>"
        groups[lbl] = groups.get(lbl, 0) + size
        c = ph.category(frames)
        if c is not None:
            any_cat = True
        c = c or "unknown"
        cats[c] = cats.get(c, 0) + size

    traced = 0
    for i, (size, frames) in enumerate(live.values()):
        _cancelled(cancel, i)
        add(size, frames)
        traced += size
    before = peak_bytes - traced
    if before > 0:
        # still there at the end and never allocated in the trace: live since before recording
        freed_later = {e.get("addr") for e in events[peak + 1:] if e["action"] in ("free_requested", "free")}
        for b in end_blocks:
            if before <= 0:
                break
            addr = b.get("address")
            if addr in seen_alloc or addr in freed_later:
                continue
            size = min(b["size"], before)
            add(size, b.get("frames"))
            before -= size
        if before > 0:
            groups["<allocated before recording>"] = groups.get("<allocated before recording>", 0) + before
            cats["unknown"] = cats.get("unknown", 0) + before
    rows = sorted(groups.items(), key=lambda kv: -kv[1])[:top]
    return rows, (cats if any_cat else None)


def downsample(x: np.ndarray, y: np.ndarray, buckets: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Min and max of y per bucket of x (x ascending): what a line plot of ``buckets`` pixels can
    show, so a million-event trace draws as fast as a short one and no peak is lost."""
    n = len(x)
    if n <= 2 * buckets:
        return x, y
    x0, x1 = float(x[0]), float(x[-1])
    if x1 <= x0:
        return np.array([x0, x0]), np.array([y.min(), y.max()])
    idx = np.minimum(((x - x0) / (x1 - x0) * buckets).astype(np.int64), buckets - 1)
    starts = np.flatnonzero(np.concatenate(([True], idx[1:] != idx[:-1])))
    lo = np.minimum.reduceat(y, starts)
    hi = np.maximum.reduceat(y, starts)
    xs = np.repeat(x[starts], 2)
    ys = np.empty(2 * len(starts), dtype=y.dtype)
    ys[0::2] = lo
    ys[1::2] = hi
    return xs, ys


def discard(snap: dict, chunk: int = 4096) -> None:
    """Free a loaded snapshot in slices: one ``del`` of a million-event list is a single C call
    that holds the GIL (and freezes a UI thread) for as long as it takes."""
    for tr in snap.get("device_traces") or ():
        while tr:
            del tr[-chunk:]
    segs = snap.get("segments") or []
    while segs:
        del segs[-chunk:]


def open_replay(path, device: int | None = None, cancel=None) -> Replay:
    """Read, replay and free a snapshot file, for a worker thread beside a UI: the cyclic GC is
    off meanwhile (a full collection over millions of fresh frame dicts is a long GIL-held pause).
    ``cancel`` (a threading.Event, the window's Cancel): SnapshotCancelled once it is set."""
    import gc

    from memdesigner.snapshot.reader import SnapshotCancelled, load_snapshot

    was = gc.isenabled()
    gc.disable()
    try:
        snap = load_snapshot(path, cancel)
        if cancel is not None and cancel.is_set():
            raise SnapshotCancelled()
        rp = replay(snap, device, cancel=cancel)
        discard(snap)
        return rp
    finally:
        if was:
            gc.enable()

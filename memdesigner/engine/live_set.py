"""The live set of one simulated step: storages with reference counts, the running total per
category, the peaks, and the timeline events (every moment that raises a peak lands in it)."""

from __future__ import annotations

from typing import NamedTuple

# categories, in the order of the by_category tuples
CATS = ("weights", "gradients", "optimizer_state", "activations", "workspace")
W, G, O, A, K = range(5)


class Event(NamedTuple):
    phase: str  # forward | backward | optimizer_step
    node: str | None  # node id (None for the loss / whole-model steps)
    label: str
    bytes: int  # live tensor bytes at the op's peak moment
    by_category: tuple  # bytes per CATS at that moment
    device_bytes: int = 0  # with allocator rounding



_tuple_new = tuple.__new__  # Event(...) without the NamedTuple's Python-level __new__


class LiveSet:
    """The live set: storages with refcounts and a running total per category."""

    __slots__ = ("nb", "cat", "rc", "rnb", "cur", "by", "rcur", "peak", "peak_by", "peak_at", "round", "what",
                 "ppeak", "rpeak", "capture", "captured", "events", "label", "trace", "slack", "exact",
                 "rel", "marks")

    def __init__(self, rounding: int):
        self.nb: list[int] = []
        self.rnb: list[int] = []
        self.cat: list[int] = []
        self.rc: list[int] = []
        # each storage's label, for a capture to list (Simulation.run sets a list when it has one):
        # None keeps none (a run without a capture reads none; the tuples were a tenth of its memory)
        self.what: list | None = None
        self.cur = 0
        self.rcur = 0
        self.by = [0, 0, 0, 0, 0]
        self.peak = 0
        self.peak_by = (0, 0, 0, 0, 0)
        self.peak_at = None
        self.round = rounding
        self.ppeak = 0  # peak of the current phase
        self.rpeak = 0  # peak with allocator rounding
        self.capture = None  # snapshot the live set when the total first reaches this value
        self.captured = None
        self.events: list | None = None  # the timeline; every moment that raises a peak lands in it
        self.label = str  # node id -> display label, for events a bare mark() has to create
        self.trace: list | None = None  # (live bytes, rounded bytes, rounding slack bound) at every mark
        # the most that allocator rounding can add to the live tensors, whatever their sizes: read
        # with a trace only, so the passes' inline fast path (no trace) does not keep it
        self.slack = 0
        self.exact: set = set()  # aggregates whose rounded size is given (alloc_exact), for the slack
        # the log a replay reads (engine/alloc_log.py), None unless asked for: every storage freed,
        # in order, and per checked moment (storages allocated, storages freed) so far, flat
        self.rel: list | None = None
        self.marks: list | None = None

    def alloc(self, nbytes: int, cat: int, refs: int = 1, what="") -> int:
        nb = self.nb
        sid = len(nb)
        nb.append(nbytes)
        r = self.round
        if r > 1 and nbytes:
            rn = ((nbytes + r - 1) // r) * r
            self.slack += r - 1
        else:
            rn = nbytes
        self.rnb.append(rn)
        self.cat.append(cat)
        self.rc.append(refs)
        if self.what is not None:
            self.what.append(what)
        self.cur += nbytes
        self.rcur += rn
        self.by[cat] += nbytes
        if refs <= 0:
            self._release(sid)
        return sid

    def alloc_exact(self, nbytes: int, rounded: int, cat: int, what="") -> int:
        """A long-lived aggregate of many tensors: its raw and allocator-rounded sizes."""
        sid = self.alloc(nbytes, cat, 1, what)
        self.rcur += rounded - self.rnb[sid]
        self.rnb[sid] = rounded
        if nbytes and self.round > 1:
            self.slack -= self.round - 1
        self.slack += rounded - nbytes
        self.exact.add(sid)
        return sid

    def incref(self, sid: int, n: int = 1) -> None:
        self.rc[sid] += n

    def decref(self, sid: int, n: int = 1) -> None:
        rc = self.rc[sid] - n
        self.rc[sid] = rc
        if rc == 0:
            self._release(sid)

    def _release(self, sid: int) -> None:
        if self.rel is not None:
            self.rel.append(sid)
        nb = self.nb[sid]
        self.cur -= nb
        self.rcur -= self.rnb[sid]
        self.by[self.cat[sid]] -= nb
        if sid in self.exact:
            self.slack -= self.rnb[sid] - nb
        elif nb and self.round > 1:
            self.slack -= self.round - 1

    def begin_phase(self, phase: str) -> None:
        self.ppeak = 0

    def mark(self, where) -> None:
        """A moment worth checking. It raises the running op's timeline event when it is higher,
        or adds one when it raises the peak, so the timeline's maximum is always the peak."""
        cur = self.cur
        if self.marks is not None:
            self.marks += (len(self.nb), len(self.rel))
        if cur > self.ppeak:
            self.ppeak = cur
        if self.rcur > self.rpeak:
            self.rpeak = self.rcur
        raised = cur > self.peak
        if raised:
            self.peak = cur
            self.peak_by = tuple(self.by)
            self.peak_at = where
        if self.capture is not None and cur == self.capture and self.captured is None:
            self.captured = [(self.what[i], self.nb[i], self.cat[i]) for i in range(len(self.nb)) if self.rc[i] > 0]
        if self.trace is not None:
            self.trace.append((cur, self.rcur, self.slack))
        ev = self.events
        if ev is not None:
            last = ev[-1] if ev else None
            if last is not None and last.phase == where[0] and last.node == where[1]:
                if cur > last.bytes:
                    ev[-1] = Event(last.phase, last.node, last.label, cur, tuple(self.by), self.rcur)
            elif raised:
                ev.append(Event(where[0], where[1], self.label(where[1]), cur, tuple(self.by), self.rcur))

    def event(self, phase: str, node, label: str) -> None:
        """The op's own timeline point (always a new event), after checking the moment (mark()
        without its timeline part, inlined: this runs once per op and per backward op)."""
        cur, rcur = self.cur, self.rcur
        if self.marks is not None:
            self.marks += (len(self.nb), len(self.rel))
        if cur > self.ppeak:
            self.ppeak = cur
        if rcur > self.rpeak:
            self.rpeak = rcur
        by = tuple(self.by)
        if cur > self.peak:
            self.peak = cur
            self.peak_by = by
            self.peak_at = (phase, node)
        if self.capture is not None and cur == self.capture and self.captured is None:
            self.captured = [(self.what[i], self.nb[i], self.cat[i]) for i in range(len(self.nb)) if self.rc[i] > 0]
        if self.trace is not None:
            self.trace.append((cur, rcur, self.slack))
        self.events.append(_tuple_new(Event, (phase, node, label, cur, by, rcur)))


def release_all(mem, saved: list) -> None:
    for sid in saved:
        if sid is not None:
            mem.decref(sid)

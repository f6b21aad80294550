"""Write the engine's estimate as a PyTorch memory snapshot, so it opens in memory_viz
(pytorch.org/memory_viz, ``python -m torch.cuda._memory_viz``) beside a real run.

The simulation is run once more with a live set that logs every storage it allocates and frees;
each becomes an ``alloc``/``free_requested``/``free_completed`` pair in the trace, with frames
naming the phase, the design's layer and the engine's category and rule (the tensor's label).
The estimate has no caching allocator, so each tensor gets a segment of its own: reserved equals
allocated. Weights, kept by the engine as one block, are split into one block per layer.
Sizes are the engine's live tensor bytes, so the trace's peak is the estimate's ``peak_bytes``.
"""

from __future__ import annotations

import pickle

from memdesigner.engine.simulate import CATS, Simulation, W, _Mem
from memdesigner.engine.step import resolve_settings
from memdesigner.model.analysis import analyze
from memdesigner.model.blocks import expand
from memdesigner.model.design import Design
from memdesigner.snapshot.phases import CATEGORY_PREFIX, LAYER_PREFIX, PHASE_PREFIX

PICKLE_PROTOCOL = 4  # what memory_viz and torch of every supported version read
BASE_ADDRESS = 0x7F0000000000
_ALIGN = 512
_LARGE = 1 << 20


class _LoggingMem(_Mem):
    __slots__ = ("log", "events", "phase")

    def __init__(self, rounding: int, events: list):
        super().__init__(rounding)
        # ("a", sid, nbytes, cat, what, phase, n_events) / ("f", sid, phase, n_events)
        self.log: list = []
        self.events = events
        self.phase = "forward"

    def begin_phase(self, phase: str) -> None:
        self.phase = phase
        super().begin_phase(phase)

    def alloc(self, nbytes: int, cat: int, refs: int = 1, what="") -> int:
        self.log.append(("a", len(self.nb), nbytes, cat, what, self.phase, len(self.events)))
        return super().alloc(nbytes, cat, refs, what)

    def _release(self, sid: int) -> None:
        self.log.append(("f", sid, self.phase, len(self.events)))
        super()._release(sid)


class _LoggingSimulation(Simulation):
    def _new_mem(self) -> _Mem:
        return _LoggingMem(self.rounding, self.events)


def _frames(design: Design, phase: str, ev, op: int, nid, label: str, cat: int) -> list:
    fr = [{"filename": f"{CATEGORY_PREFIX}{CATS[cat]}", "line": 0, "name": label}]
    if nid and nid in design.nodes:
        node = design.nodes[nid]
        fr.append({"filename": f"{LAYER_PREFIX}{nid}", "line": op, "name": f"{node.name or nid} ({node.type})"})
    fr.append({"filename": f"{PHASE_PREFIX}{phase}", "line": op, "name": f"{phase}: {ev.label if ev else ''}"})
    fr.append({"filename": "memdesigner:estimate", "line": 0, "name": design.name or "design"})
    return fr


def _layer_of(frames) -> str | None:
    for f in frames:
        if f["filename"].startswith(LAYER_PREFIX):
            return f["filename"][len(LAYER_PREFIX):]
    return None


def estimate_snapshot(design: Design, settings=None, *, device=None, **kw) -> tuple[dict, object]:
    """(snapshot dict, Report) for one estimated step. ValueError if the design has errors."""
    from memdesigner.engine.estimate import estimate

    settings, dev = resolve_settings(settings, device, kw)
    design = expand(design)  # the flat network (model/blocks.py)
    an = analyze(design)
    report = estimate(design, settings, device=dev, analysis=an)
    if report.issues:
        raise ValueError(str(report.issues[0]))
    rounding = dev.allocator_rounding if dev is not None else (512 if settings.backend == "cuda" else 1)
    sim = _LoggingSimulation(design, an, settings, rounding).run()
    events = sim.events
    n_ev = len(events)
    trace: list = []
    pieces: dict = {}  # sid -> [(addr, size, frames)]
    next_addr = BASE_ADDRESS
    seq = 0

    def t_us(k):
        nonlocal seq
        seq += 1
        return k * 1000 + min(seq, 999)

    last_k = -1
    for item in sim.mem.log:
        k = item[-1]
        if k != last_k:
            last_k, seq = k, 0
        if item[0] == "a":
            _, sid, nbytes, cat, what, phase, _ = item
            if nbytes <= 0:
                continue
            op = min(k, n_ev - 1)
            ev = events[op] if n_ev else None
            if isinstance(what, tuple):
                parts = [(what[0], what[1], nbytes)]
            elif cat == W and isinstance(what, str):
                parts = [(nid, "parameters and buffers", r["param_bytes"] + r["buffer_bytes"])
                         for nid, r in sim.rows.items() if r["param_bytes"] + r["buffer_bytes"]]
                if sum(p[2] for p in parts) != nbytes:
                    parts = [(None, what, nbytes)]
            else:  # the loss, autograd's seed, optimizer state: no layer of their own
                parts = [(None, str(what), nbytes)]
            lst = []
            for nid, label, size in parts:
                fr = _frames(design, phase, ev, op, nid, label, cat)
                addr = next_addr
                next_addr += -(-size // _ALIGN) * _ALIGN
                t = t_us(k)
                trace.append({"action": "segment_alloc", "addr": addr, "size": size, "stream": 0, "time_us": t,
                              "frames": fr})
                trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t,
                              "frames": fr})
                lst.append((addr, size, fr))
            pieces[sid] = lst
        else:
            _, sid, phase, _ = item
            op = min(max(k - 1, 0), n_ev - 1)  # freed after the op last shown
            ev = events[op] if n_ev else None
            for addr, size, afr in pieces.pop(sid, ()):
                fr = _frames(design, phase, ev, op, _layer_of(afr), afr[0]["name"], CATS.index(afr[0]["filename"][len(
                    CATEGORY_PREFIX):]))
                t = t_us(k)
                for action in ("free_requested", "free_completed", "segment_free"):
                    trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
                                  "frames": fr})
    segments = []
    for lst in pieces.values():
        for addr, size, fr in lst:
            segments.append({
                "device": 0, "address": addr, "total_size": size, "stream": 0,
                "segment_type": "large" if size > _LARGE else "small", "segment_pool_id": (0, 0),
                "allocated_size": size, "active_size": size, "requested_size": size,
                "blocks": [{"address": addr, "size": size, "requested_size": size, "state": "active_allocated",
                            "frames": fr}],
            })
    segments.sort(key=lambda s: s["address"])
    return {"segments": segments, "device_traces": [trace]}, report


def write_estimate_snapshot(path, design: Design, settings=None, *, device=None, **kw):
    """Write the snapshot pickle (protocol 4) atomically; returns the Report."""
    from memdesigner.io.atomic_write import write_atomic

    snap, report = estimate_snapshot(design, settings, device=device, **kw)
    write_atomic(path, pickle.dumps(snap, protocol=PICKLE_PROTOCOL))
    return report

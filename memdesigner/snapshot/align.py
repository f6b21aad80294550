"""Put a snapshot's curves on the estimate's axis (ops in execution order), phase by phase.

A real run's events are not the estimate's ops, but both have a forward, a backward and an
optimizer step: each phase's event range of the snapshot's last complete step is stretched
onto the op range of the same phase in the estimate, so peaks line up where they happen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memdesigner.snapshot.replay import Replay, downsample


@dataclass
class Overlay:
    x: np.ndarray  # op units of the estimate's timeline
    allocated: np.ndarray  # bytes
    reserved: np.ndarray
    peak_allocated: int  # over the aligned events
    peak_reserved: int
    matched: list  # [(phase, (first_event, last_event), (first_op, end_op))]


def phase_runs(phases: list) -> list[tuple[str, int, int]]:
    """(phase, start, end) runs of a list of phase names."""
    runs, start = [], 0
    for i in range(1, len(phases) + 1):
        if i == len(phases) or phases[i] != phases[start]:
            runs.append((phases[start], start, i))
            start = i
    return runs


def align(rp: Replay, est_phases: list, buckets: int | None = 4000) -> Overlay:
    """Map ``rp`` onto an estimate whose ops have phases ``est_phases`` (Event.phase per op)."""
    n_ops = len(est_phases)
    if rp.n_events == 0:
        x = np.array([0.0, float(n_ops)])
        a = np.repeat(rp.allocated[:1], 2)
        r = np.repeat(rp.reserved[:1], 2)
        return Overlay(x, a, r, int(a.max()), int(r.max()), [])
    runs = phase_runs(list(est_phases))
    chosen = []  # (est run, snapshot span), latest first
    limit = rp.n_events + 1
    for phase, a, b in reversed(runs):
        for sp in reversed(rp.spans):
            if sp.phase == phase and sp.start < limit:
                chosen.append(((phase, a, b), sp))
                limit = sp.start
                break
    chosen.reverse()
    xs, idx, matched = [], [], []
    if not chosen:  # nothing in common (no frames): stretch the whole trace
        i = np.arange(rp.n_events)
        xs.append((i + 1) / rp.n_events * n_ops)
        idx.append(i)
    for (phase, a, b), sp in chosen:
        i = np.arange(sp.start, sp.end)
        xs.append(a + (i - sp.start + 1) / (sp.end - sp.start) * (b - a))
        idx.append(i)
        matched.append((phase, (sp.start, sp.end - 1), (a, b)))
    x = np.concatenate(xs)
    ii = np.concatenate(idx)
    start = ii[0]
    # the curve starts at the state before the first aligned event
    before_a = rp.allocated[start - 1] if start > 0 else rp.initial_allocated
    before_r = rp.reserved[start - 1] if start > 0 else rp.initial_reserved
    x = np.concatenate(([float(chosen[0][0][1]) if chosen else 0.0], x))
    al = np.concatenate(([before_a], rp.allocated[ii]))
    re = np.concatenate(([before_r], rp.reserved[ii]))
    pa, pr = int(al.max()), int(re.max())
    if buckets:
        xa, al = downsample(x, al, buckets)
        _, re = downsample(x, re, buckets)
        x = xa
    return Overlay(x, al, re, pa, pr, matched)


def align_measured(est_phases: list, values: list, phases: list | None) -> tuple[np.ndarray, np.ndarray]:
    """Put a measured run's live bytes (one value per recorded op, ``phases`` giving the engine
    phase of each, None outside the estimate's ops) on the estimate's op axis: the entries of
    each phase are spread over that phase's ops, so the measured backward sits on the estimated
    backward instead of the whole run being stretched over the step. Without phases: stretched."""
    n_ops = len(est_phases)
    y = np.asarray(values, dtype=float)
    if not len(y):
        return np.zeros(0), np.zeros(0)
    if not phases or len(phases) != len(y):
        return np.linspace(0, n_ops, len(y)), y
    ph = np.asarray([p if p is not None else "" for p in phases], dtype=object)
    xs, ys = [], []
    for phase, a, b in phase_runs(list(est_phases)):
        idx = np.flatnonzero(ph == phase)
        if not len(idx):
            continue
        xs.append(a + (np.arange(len(idx)) + 1) / len(idx) * (b - a))
        ys.append(y[idx])
    if not xs:
        return np.linspace(0, n_ops, len(y)), y
    return np.concatenate(xs), np.concatenate(ys)


def align_measured_ops(est: list, values: list, phases: list | None, layers: list | None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Like align_measured, op by op: ``est`` is the estimate's (phase, node id) per op and
    ``layers`` the measured entries' (phase, node ids) tags (measure/layer_tags.py). An entry made
    while a layer ran sits on that layer's ops of that phase in the estimate (a run of entries of
    one layer spread over its ops); the entries between layers (an inline op, the loss, the
    optimizer's loops) are spread evenly between the layers around them. Without tags: by phase."""
    if not layers or not phases or len(layers) != len(values) or len(phases) != len(values):
        return align_measured([p for p, _ in est], values, phases)
    y = np.asarray(values, dtype=float)
    xs, ys = [], []
    for phase, a, b in phase_runs([p for p, _ in est]):
        idx = [j for j, p in enumerate(phases) if p == phase]
        if not idx:
            continue
        span: dict = {}  # node id -> (first op, end op) in this phase run
        for i in range(a, b):
            n = est[i][1]
            if n is not None:
                lo, hi = span.get(n, (i, i + 1))
                span[n] = (min(lo, i), max(hi, i + 1))
        where = []  # per entry: the (lo, hi) op range of its layer, or None
        for j in idx:
            tag = layers[j]
            rs = [span[n] for n in tag[1] if n in span] if tag and tag[0] == phase else []
            where.append((min(r[0] for r in rs), max(r[1] for r in rs)) if rs else None)
        x = np.empty(len(idx))
        k = 0
        while k < len(idx):  # runs of entries of one layer over that layer's ops
            if where[k] is None:
                k += 1
                continue
            m = k
            while m < len(idx) and where[m] == where[k]:
                m += 1
            lo, hi = where[k]
            x[k:m] = lo + (np.arange(m - k) + 1) / (m - k) * (hi - lo)
            k = m
        k, prev = 0, float(a)
        while k < len(idx):  # the untagged entries between the layers around them
            if where[k] is not None:
                prev = x[k]
                k += 1
                continue
            m = k
            while m < len(idx) and where[m] is None:
                m += 1
            last = m == len(idx)  # a trailing run ends at the phase's end, else before the next layer
            nxt = max(prev, float(b) if last else float(where[m][0]))
            x[k:m] = prev + (np.arange(m - k) + 1) / (m - k + (0 if last else 1)) * (nxt - prev)
            k = m
        xs.append(x)
        ys.append(y[idx])
    if not xs:
        return align_measured([p for p, _ in est], values, phases)
    return np.concatenate(xs), np.concatenate(ys)

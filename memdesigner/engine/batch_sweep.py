"""Peak device memory over a few batch sizes and the largest batch that fits: what the window's
peak-vs-batch view and its LARGEST BATCH show.

One place computes it for the CLI (``estimate --max-batch``) and the window, from the design one
rank really runs: fine-tuning's edits (LoRA, QLoRA, frozen parts) and the tensor-parallel shard
applied first (engine/step.py ``prepare``). The window used to build the batch curve on the
design as drawn, so with LoRA it searched full training (Llama-3-8B on 24 GB: "none" beside a
verdict of 4.6 GiB to spare, the CLI 2) and with TP it searched unsharded weights (13 vs 57).
"""

from __future__ import annotations

from dataclasses import dataclass

from memdesigner.engine.batch_curve import batch_curve
from memdesigner.engine.devices import Device
from memdesigner.engine.estimate import largest_batch
from memdesigner.engine.generate import generate_sweep, largest_generate_batch, longest_context
from memdesigner.engine.per_rank import run_ranks
from memdesigner.engine.sequence_length import sized_for
from memdesigner.engine.settings import Settings
from memdesigner.engine.step import device_peak, has_layers, prepare
from memdesigner.model.analysis import Analysis, analyze
from memdesigner.model.blocks import for_engine
from memdesigner.model.design import Design


@dataclass
class BatchPoints:
    """``peaks[i]``: device bytes at ``batches[i]``; ``max_batch``: the largest batch that fits
    (0: not even 1; None: no device, or ``empty``)."""

    batches: list
    peaks: list
    max_batch: int | None
    capacity: int | None
    empty: bool = False  # nothing but inputs: no batch to search (the peak does not grow with it)
    max_context: int | None = None  # generate: the longest prompt + new tokens that fits (--max-context)


def largest_batch_of(design: Design, settings: Settings, dev: Device | None,
                     analysis: Analysis | None = None, report=None) -> int | None:
    """The largest batch for exactly these settings on ``dev`` (None: no device or no layers)."""
    if dev is None or not has_layers(design):
        return None
    return batch_sweep(design, settings, dev, analysis, points=False, report=report).max_batch


def batch_sweep(design: Design, settings: Settings, dev: Device | None, analysis: Analysis | None = None,
                is_stale=lambda: False, points: bool = True, report=None) -> BatchPoints | None:
    """The largest batch, and (``points``) the device peak at powers of two up to twice the batch
    or the largest batch, plus the batch itself and the largest and the one after it (simulated
    exactly; the others from the envelope where it is exact up to rounding). None when
    ``is_stale()`` turned true or the step cannot be estimated. ``report``: the estimate of these
    settings, whose own run checks the batch curve (Report.batch_check) instead of a second one."""
    cap = dev.memory_bytes if dev is not None else None
    if not has_layers(design):
        return BatchPoints([], [], None, cap, empty=True)
    design, analysis = sized_for(design, analysis, settings.seq_len)  # the seq_len setting's length
    if design.blocks:  # the flat network (model/blocks.py)
        design, analysis = for_engine(design, analysis)
    if settings.mode == "generate":  # whole generations per batch (engine/generate.py)
        if not points:
            return BatchPoints([], [], largest_generate_batch(design, settings, dev), cap)
        got = generate_sweep(design, settings, dev, is_stale)
        if got is None or is_stale():
            return None
        ctx = longest_context(design, settings, dev, is_stale=is_stale) if dev is not None else None
        if is_stale():
            return None
        return BatchPoints(*got, cap, max_context=ctx)
    an = analysis or analyze(design)
    if not an.ok or is_stale():
        return None
    design, an, _ = prepare(design, settings, an)
    if dev is not None and settings.pipeline_parallel > 1:  # per-stage runs, searched (not the curve)
        best = largest_batch(design, settings, dev, an, prepared=True)
        if not points:
            return BatchPoints([], [], best, cap)
        batches = _batches(settings.batch, best)
        return BatchPoints(batches, [_stage_peak(design, an, settings.with_(batch=b), dev) for b in batches], best, cap)
    curve = batch_curve(design, settings, dev, an, getattr(report, "batch_check", None))
    best = curve.largest_batch(dev.memory_bytes) if dev is not None else None
    if not points or is_stale():
        return None if is_stale() else BatchPoints([], [], best, cap)
    exact = {settings.batch} | ({best, best + 1} if best else set())
    batches = _batches(settings.batch, best)
    peaks = []
    for b in batches:
        if is_stale():
            return None
        if b in exact or not curve.affine:
            peaks.append(curve.device_peak(b))
        else:
            peaks.append(curve.device_peak_bounds(b)[0])
    return BatchPoints(batches, peaks, best, cap)


def _stage_peak(design: Design, an: Analysis, settings: Settings, dev: Device) -> int:
    """The busiest pipeline stage's device peak (as estimate reports it)."""
    sim, _ = run_ranks(design, an, settings, dev.allocator_rounding)
    return device_peak(sim.mem.rpeak, dev)


def _batches(batch: int, best: int | None) -> list:
    top = max(2 * batch, 2 * (best or 1), 8)
    out, b = [], 1
    while b <= top:
        out.append(b)
        b *= 2
    return sorted(set(out) | {batch} | ({best, best + 1} if best else set()))

"""estimate(design, ...) -> Report: the engine's entry point for the CLI, the window and scripts."""

from __future__ import annotations

from memdesigner.engine import finetune, tensor_parallel
from memdesigner.engine.batch_curve import batch_curve
from memdesigner.engine.devices import Device
from memdesigner.engine.gc_pause import gc_paused
from memdesigner.engine.generate import generate_or_issue
from memdesigner.engine.layer_rows import NOT_MODELLED  # noqa: F401 (re-exported)
from memdesigner.engine.peak_rules import why_alive
from memdesigner.engine.per_rank import run_ranks
from memdesigner.engine.report import Report
from memdesigner.engine.search import largest_fitting
from memdesigner.engine.sequence_length import design_length, sized_for
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import Simulation
from memdesigner.engine.step import device_peak, has_layers, prepare, resolve_settings, run_step
from memdesigner.model.analysis import Analysis, analyze
from memdesigner.model.blocks import engine_view, for_engine
from memdesigner.model.design import Design


def estimate(design: Design, settings: Settings | None = None, *, device=None, max_batch: bool = False,
             analysis: Analysis | None = None, **kw) -> Report:
    """Estimate one step. Keyword settings (mode, batch, optimizer, dtype, amp, checkpointing,
    backend, foreach, gpus, strategy) override ``settings``; a device's kind sets the backend."""
    with gc_paused(promote=True):  # (what it returns is not garbage: no young collection over it)
        return _estimate(design, settings, device, max_batch, analysis, kw)


def _estimate(design, settings, device, max_batch, analysis, kw) -> Report:
    settings, dev = resolve_settings(settings, device, kw)
    design, analysis = sized_for(design, analysis, settings.seq_len)  # a token model at another length
    if design.blocks:  # the engine runs on the flat network (model/blocks.py)
        design, analysis = for_engine(design, analysis)
    length = design_length(design)
    if settings.mode == "generate":  # prefill + decode steps (engine/generate.py)
        rep = generate_or_issue(design, settings, dev, max_batch)
        rep.sequence_length = length
        return rep
    an = analysis or analyze(design)
    design, an, plan = prepare(design, settings, an)
    rep = run_step(design, an, settings, dev)
    if settings.tensor_parallel > 1 and tensor_parallel.plan_of(design) is None and an.ok:
        rep.warnings.append(f"tensor_parallel {settings.tensor_parallel}: no colwise / rowwise Linear pair to "
                            "split (docs/memory-model.md §16): every rank holds the whole model")
    finetune.annotate(rep, plan, settings)
    rep.sequence_length = length
    if max_batch and dev is not None and an.ok and has_layers(design):  # (an empty canvas: nothing to search)
        rep.max_batch = largest_batch(design, settings, dev, an, prepared=True, check=rep.batch_check)
    return rep


def peak_for_batch(design: Design, settings: Settings, dev: Device | None, an: Analysis, batch: int) -> int:
    if design.blocks:
        design, an = engine_view(design)
    design, an, _ = prepare(design, settings, an)
    rounding = dev.allocator_rounding if dev is not None else 1
    sim = Simulation(design, an, settings.with_(batch=batch), rounding).run()
    return device_peak(sim.mem.rpeak, dev)


def largest_batch(design: Design, settings: Settings, dev: Device, an: Analysis | None = None,
                  limit: int | None = None, prepared: bool = False, check=None) -> int:
    """The largest batch whose device peak fits (exact; 0 if even batch 1 does not fit), from the
    batch curve: the envelope of affine lines bounds it, the exact peaks replayed settle it.
    ``check``: the estimate's own run at these settings (Report.batch_check), not run again."""
    if not prepared:
        design, an, _ = prepare(design, settings, an)
    if settings.pipeline_parallel > 1:  # the busiest stage decides: whole per-stage runs, searched
        rounding = dev.allocator_rounding

        def fits(b: int) -> bool:
            sim, _ = run_ranks(design, an, settings.with_(batch=b), rounding)
            return device_peak(sim.mem.rpeak, dev) <= dev.memory_bytes
        return max(0, largest_fitting(fits, 1, limit or 1 << 24))

    return batch_curve(design, settings, dev, an, check).largest_batch(dev.memory_bytes, limit)


CATEGORY_NAMES = ("weights", "gradients", "optimizer_state", "activations", "workspace")


def explain_peak(design: Design, settings: Settings | None = None, *, device=None, **kw) -> list[dict]:
    """What is alive at the peak, tensor by tensor: [{layer, name, tensor, bytes, category, why}],
    largest first. Runs the step twice: once to find the peak, once to capture its live set."""
    settings, dev = resolve_settings(settings, device, kw)
    design, an = engine_view(design) if design.blocks else (design, analyze(design))
    design, an, _ = prepare(design, settings, an)
    rounding = dev.allocator_rounding if dev is not None else (512 if settings.backend == "cuda" else 1)
    peak = Simulation(design, an, settings, rounding).run().mem.peak
    snap = Simulation(design, an, settings, rounding, capture=peak).run().mem.captured or []
    rows = []
    for what, nbytes, cat in snap:
        if isinstance(what, tuple):
            nid, label = what
        else:
            nid, label = None, str(what)
        node = design.nodes.get(nid) if nid else None
        row = {"layer": nid, "name": node.name if node else "", "tensor": label, "bytes": nbytes,
               "category": CATEGORY_NAMES[cat]}
        row["why"] = why_alive(row, node)
        rows.append(row)
    rows.sort(key=lambda r: -r["bytes"])
    return rows

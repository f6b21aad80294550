"""estimate(design, ...) -> Report: the engine's entry point for the CLI, the window and scripts."""

from __future__ import annotations

from memdesigner.engine import finetune, tensor_parallel
from memdesigner.engine.batch_curve import check_point
from memdesigner.engine.batch_sweep import has_layers
from memdesigner.engine.devices import Device, get_device
from memdesigner.engine.gc_pause import gc_paused
from memdesigner.engine.graph_facts import graph_facts, graph_facts_of
from memdesigner.engine.layer_rows import NOT_MODELLED, rows_from_entries, rows_from_table  # noqa: F401 (NOT_MODELLED: re-exported)
from memdesigner.engine.peak_rules import why_alive
from memdesigner.engine.per_rank import run_ranks
from memdesigner.engine.report import Report
from memdesigner.engine.sanity import ABSURD_BYTES, absurd_size_warning
from memdesigner.engine.sequence_length import design_length, sized_for
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import CATS, Simulation
from memdesigner.model.analysis import Analysis, analyze
from memdesigner.model.blocks import engine_view, for_engine, instance_totals
from memdesigner.model.design import GC_HELD, Design
from memdesigner.units import DTYPE_BYTES


def _resolve_device(device) -> Device | None:
    if device is None or isinstance(device, Device):
        return device
    return get_device(str(device))


def _resolve(settings: Settings | None, device, kw: dict):
    """Settings from an object and/or keywords; a device's kind decides the backend."""
    dev = _resolve_device(device)
    if settings is None:
        settings = Settings(**kw)
    elif kw:
        settings = settings.with_(**kw)
    if dev is not None and settings.backend != dev.kind:
        settings = settings.with_(backend=dev.kind)
    return settings, dev


def estimate(design: Design, settings: Settings | None = None, *, device=None, max_batch: bool = False,
             analysis: Analysis | None = None, **kw) -> Report:
    """Estimate one step. Keyword settings (mode, batch, optimizer, dtype, amp, checkpointing,
    backend, foreach, gpus, strategy) override ``settings``; a device's kind sets the backend."""
    with gc_paused(promote=True):  # (what it returns is not garbage: no young collection over it)
        return _estimate(design, settings, device, max_batch, analysis, kw)


def _estimate(design, settings, device, max_batch, analysis, kw) -> Report:
    settings, dev = _resolve(settings, device, kw)
    design, analysis = sized_for(design, analysis, settings.seq_len)  # a token model at another length
    if design.blocks:  # the engine runs on the flat network (model/blocks.py)
        design, analysis = for_engine(design, analysis)
    length = design_length(design)
    if settings.mode == "generate":  # prefill + decode steps (engine/generate.py)
        from memdesigner.engine.generate import generate_or_issue

        rep = generate_or_issue(design, settings, dev, max_batch)
        rep.sequence_length = length
        return rep
    an = analysis or analyze(design)
    design, an, plan = _prepare(design, settings, an)
    rep = _run(design, an, settings, dev)
    if settings.tensor_parallel > 1 and tensor_parallel.plan_of(design) is None and an.ok:
        rep.warnings.append(f"tensor_parallel {settings.tensor_parallel}: no colwise / rowwise Linear pair to "
                            "split (docs/memory-model.md §16): every rank holds the whole model")
    finetune.annotate(rep, plan, settings)
    rep.sequence_length = length
    if max_batch and dev is not None and an.ok and has_layers(design):  # (an empty canvas: nothing to search)
        rep.max_batch = largest_batch(design, settings, dev, an, prepared=True, check=rep.batch_check)
    return rep


def _prepare(design: Design, settings: Settings, an: Analysis | None):
    """The design one rank simulates: fine-tuning's edits, then the tensor-parallel shard."""
    design, an, plan = finetune.prepare(design, settings, an)
    design, an = tensor_parallel.prepare(design, an, settings)
    return design, an, plan


def _device_peak(peak_rounded: int, dev: Device | None) -> int:
    if dev is None:
        return peak_rounded
    return peak_rounded + dev.runtime_overhead_bytes


def _run(design: Design, an: Analysis, settings: Settings, dev: Device | None) -> Report:
    rounding = dev.allocator_rounding if dev is not None else (512 if settings.backend == "cuda" else 1)
    sim, per_rank = run_ranks(design, an, settings, rounding)
    mem = sim.mem
    batch = settings.batch
    valid = sim.order  # the nodes without a problem, in order
    params, non_trainable, n_rg, pbytes, bbytes = sim.totals
    if settings.pipeline_parallel > 1:  # the busiest stage's simulation; the table covers every stage
        rows = sim.rows
        valid = [nid for nid in an.order if an.nodes[nid].ok and nid in rows]
        params, non_trainable, n_rg, pbytes, bbytes = (
            sum(rows[n][k] for n in valid)
            for k in ("params", "non_trainable", "requires_grad", "param_bytes", "buffer_bytes"))
    el = DTYPE_BYTES[settings.torch_dtype]
    facts = graph_facts(design, an, valid, el) if valid is sim.order else graph_facts_of(design, an, valid, el)
    flops = facts[0] * batch

    # (the report's lazy layer rows hold these, not the simulation and its live set)
    table = sim.compact_rows(valid)
    entries = sim.row_entries(valid) if table is None else None

    def layer_rows():
        with gc_paused():  # 10,000 rows: collections set off mid-build would walk the whole heap, each
            if table is not None:  # the previous estimate's rows reused where unchanged (engine/layer_rows.py)
                return rows_from_table(design, an, table, batch)
            return rows_from_entries(design, an, entries(), batch)

    # textbook lower bound: parameters + the largest pair of adjacent feature maps
    lower = batch * facts[1] + pbytes + bbytes
    peak = mem.peak
    at_peak = dict(zip(CATS, mem.peak_by))
    phase, layer = (mem.peak_at or (None, None))
    dpeak = _device_peak(mem.rpeak, dev)
    device = None
    if dev is not None:
        device = {
            "id": dev.id, "name": dev.name, "kind": dev.kind, "capacity_bytes": dev.memory_bytes,
            "runtime_overhead_bytes": dev.runtime_overhead_bytes,
            "fits": dpeak <= dev.memory_bytes, "headroom_bytes": dev.memory_bytes - dpeak,
        }
    warnings, unruled, traced = [], [], []
    if peak >= ABSURD_BYTES:
        rows = sim.rows
        absurd = absurd_size_warning(peak, {nid: rows[nid] for nid in valid},
                                     {n: design.nodes[n].name for n in valid})
        if absurd:
            warnings.append(absurd)
    unruled, traced = list(facts[2]), list(facts[3])
    if unruled:
        warnings.append(f"{len(unruled)} ops estimated without a rule: their memory may be off (each output is "
                        f"counted and its inputs are assumed kept): {', '.join(unruled[:8])}"
                        + (", ..." if len(unruled) > 8 else ""))
    if traced:
        warnings.append(f"{len(traced)} ops without a layer rule use what PyTorch showed when they were traced at "
                        f"import (saved tensors, views): {', '.join(traced[:4])}" + (", ..." if len(traced) > 4 else ""))
    gc_warning = _gc_held_warning(design, an, settings, rounding, peak) if facts[4] else ""
    if gc_warning:
        warnings.append(gc_warning)
    return Report(
        settings=settings.to_dict(), params=params, param_bytes=pbytes, buffer_bytes=bbytes, flops=flops,
        peak_bytes=peak, device_peak_bytes=dpeak, phase_peaks=dict(sim.phase_peaks), at_peak=at_peak,
        peak_phase=phase, peak_layer=layer, lower_bound_bytes=lower, layers_fn=layer_rows, timeline=sim.events,
        issues=list(an.issues), warnings=warnings, device=device, unruled_ops=unruled, traced_ops=traced,
        runtime_overhead_bytes=dev.runtime_overhead_bytes if dev else 0, non_trainable_params=non_trainable,
        recompute_flops=sum(an.nodes[n].flops for n in sim.recomputed) * batch, per_rank=per_rank,
        blocks=instance_totals(design, sim.rows) if getattr(design, "instances", None) else {},
        trainable_params=n_rg if n_rg != params else None,
        paged_optimizer_bytes=getattr(sim, "paged_optimizer_bytes", 0),
        rank_timelines=dict(getattr(sim, "rank_events", {})) if len(per_rank) > 1 else {},
        # (one rank, one stage: the simulation the batch curve would run at this batch)
        batch_check=check_point(sim) if settings.pipeline_parallel == 1 and settings.data_parallel == "none"
        else None,
    )


def _gc_held_warning(design: Design, an: Analysis, settings: Settings, rounding: int, peak: int) -> str:
    """Outputs held by a Python reference cycle (Keras's merge layers) die when the cyclic garbage
    collector runs, which no estimate can know. The peak counts them to the end of the step (as
    measured on Keras 3.15); say so, and how much lower it is if the collector ran early."""
    held = [n for n in an.order if design.nodes[n].keep_until == GC_HELD]
    if not held:
        return ""
    sim = Simulation(design, an, settings, rounding)
    sim.gc_holds = False
    less = peak - sim.run().mem.peak
    if less <= 0:
        return ""
    return (f"{len(held)} layer outputs wait for Python's garbage collector (Keras's merge layers keep their inputs "
            f"in a reference cycle): counted until the step ends, as measured; {less:,} B of the peak go earlier if "
            f"the collector runs during the forward, and the previous step's may still be alive: "
            f"{', '.join(held[:4])}" + (", ..." if len(held) > 4 else ""))


def peak_for_batch(design: Design, settings: Settings, dev: Device | None, an: Analysis, batch: int) -> int:
    if design.blocks:
        design, an = engine_view(design)
    design, an, _ = _prepare(design, settings, an)
    rounding = dev.allocator_rounding if dev is not None else 1
    sim = Simulation(design, an, settings.with_(batch=batch), rounding).run()
    return _device_peak(sim.mem.rpeak, dev)


def largest_batch(design: Design, settings: Settings, dev: Device, an: Analysis | None = None,
                  limit: int | None = None, prepared: bool = False, check=None) -> int:
    """The largest batch whose device peak fits (exact; 0 if even batch 1 does not fit), from the
    batch curve: the envelope of affine lines bounds it, the exact peaks replayed settle it.
    ``check``: the estimate's own run at these settings (Report.batch_check), not run again."""
    from memdesigner.engine.batch_curve import batch_curve

    if not prepared:
        design, an, _ = _prepare(design, settings, an)
    if settings.pipeline_parallel > 1:  # the busiest stage decides: whole per-stage runs, searched
        from memdesigner.engine.search import largest_fitting

        rounding = dev.allocator_rounding

        def fits(b: int) -> bool:
            sim, _ = run_ranks(design, an, settings.with_(batch=b), rounding)
            return _device_peak(sim.mem.rpeak, dev) <= dev.memory_bytes
        return max(0, largest_fitting(fits, 1, limit or 1 << 24))

    return batch_curve(design, settings, dev, an, check).largest_batch(dev.memory_bytes, limit)


CATEGORY_NAMES = ("weights", "gradients", "optimizer_state", "activations", "workspace")


def explain_peak(design: Design, settings: Settings | None = None, *, device=None, **kw) -> list[dict]:
    """What is alive at the peak, tensor by tensor: [{layer, name, tensor, bytes, category, why}],
    largest first. Runs the step twice: once to find the peak, once to capture its live set."""
    settings, dev = _resolve(settings, device, kw)
    design, an = engine_view(design) if design.blocks else (design, analyze(design))
    design, an, _ = _prepare(design, settings, an)
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

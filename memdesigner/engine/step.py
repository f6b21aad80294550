"""One step of a prepared design, as a Report: the single path from a design and settings to the
engine's figures that estimate (the facade), generate (prefill + decode), the batch curve and the
fit advisor all take, so that none of them imports another to reach it."""

from __future__ import annotations

from memdesigner.engine import finetune, tensor_parallel
from memdesigner.engine.alloc_log import check_point
from memdesigner.engine.devices import Device, get_device
from memdesigner.engine.gc_pause import gc_paused
from memdesigner.engine.graph_facts import graph_facts, graph_facts_of
from memdesigner.engine.layer_rows import rows_from_entries, rows_from_table
from memdesigner.engine.per_rank import run_ranks
from memdesigner.engine.report import Report
from memdesigner.engine.sanity import ABSURD_BYTES, absurd_size_warning
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import CATS, Simulation
from memdesigner.model.analysis import Analysis
from memdesigner.model.blocks import instance_totals
from memdesigner.model.design import GC_HELD, Design
from memdesigner.units import DTYPE_BYTES


def has_layers(design: Design) -> bool:
    """Whether there is anything to estimate: a layer besides the inputs (an empty canvas's peak
    does not grow with the batch, so a search would stop at its limit: 16,777,216)."""
    return any(n.type != "Input" for n in design.nodes.values()) or bool(design.blocks)


def resolve_device(device) -> Device | None:
    if device is None or isinstance(device, Device):
        return device
    return get_device(str(device))


def resolve_settings(settings: Settings | None, device, kw: dict):
    """Settings from an object and/or keywords; a device's kind decides the backend."""
    dev = resolve_device(device)
    if settings is None:
        settings = Settings(**kw)
    elif kw:
        settings = settings.with_(**kw)
    if dev is not None and settings.backend != dev.kind:
        settings = settings.with_(backend=dev.kind)
    return settings, dev


def prepare(design: Design, settings: Settings, an: Analysis | None):
    """The design one rank simulates: fine-tuning's edits, then the tensor-parallel shard."""
    design, an, plan = finetune.prepare(design, settings, an)
    design, an = tensor_parallel.prepare(design, an, settings)
    return design, an, plan


def device_peak(peak_rounded: int, dev: Device | None) -> int:
    if dev is None:
        return peak_rounded
    return peak_rounded + dev.runtime_overhead_bytes


def run_step(design: Design, an: Analysis, settings: Settings, dev: Device | None) -> Report:
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
    dpeak = device_peak(mem.rpeak, dev)
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
    gc_warning = gc_held_warning(design, an, settings, rounding, peak) if facts[4] else ""
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


def gc_held_warning(design: Design, an: Analysis, settings: Settings, rounding: int, peak: int) -> str:
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

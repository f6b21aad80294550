"""One simulation per distinct data-parallel rank; the busiest rank is the report's."""

from __future__ import annotations

from memdesigner.engine.distributed import distinct_ranks
from memdesigner.engine.fsdp import rank_signature
from memdesigner.engine.pipeline_parallel import run_stages
from memdesigner.engine.simulate import CATS, Simulation


def _entry(rank: int, sim: Simulation) -> dict:
    e = {"rank": rank, "peak_bytes": sim.mem.peak, "phase_peaks": dict(sim.phase_peaks),
         "at_peak": dict(zip(CATS, sim.mem.peak_by))}
    if getattr(sim, "host_bytes", 0):
        e["host_bytes"] = sim.host_bytes  # offloaded state in host RAM (engine/fsdp.py)
    return e


def _expand_tp(per_rank: list[dict], tp: int) -> list[dict]:
    """Every tensor-parallel rank of a data-parallel replica holds the same shapes (the design's
    sharded sizes divide evenly): global rank = dp rank x T + tp rank (a (dp, tp) DeviceMesh)."""
    if tp <= 1:
        return per_rank
    return [{**e, "rank": e["rank"] * tp + t, "dp_rank": e["rank"], "tp_rank": t} for e in per_rank for t in range(tp)]


def _expand_events(sim, tp: int) -> None:
    ev = getattr(sim, "rank_events", None) or {0: sim.events}
    sim.rank_events = {r * tp + t: e for r, e in ev.items() for t in range(tp)}


def run_ranks(design, an, settings, rounding: int) -> tuple[Simulation, list[dict]]:
    """Every rank of the world (pipeline stages x data-parallel ranks x tensor-parallel ranks)."""
    if settings.pipeline_parallel > 1:
        return run_stages(design, an, settings, rounding, _run_dp_tp_ranks)
    return _run_dp_tp_ranks(design, an, settings, rounding)


def _run_dp_tp_ranks(design, an, settings, rounding: int) -> tuple[Simulation, list[dict]]:
    sim, per_rank = _run_dp_ranks(design, an, settings, rounding)
    _expand_events(sim, max(1, settings.tensor_parallel))
    return sim, _expand_tp(per_rank, settings.tensor_parallel)


def _run_dp_ranks(design, an, settings, rounding: int) -> tuple[Simulation, list[dict]]:
    """(the busiest rank's simulation, [{rank, peak_bytes, phase_peaks, at_peak}] for every rank).
    Ranks holding the same shard (all of them under ddp) are simulated once."""
    first = Simulation(design, an, settings, rounding, rank=0).run()
    strategy = settings.data_parallel
    if strategy == "none":
        return first, [_entry(0, first)]
    if first.fsdp is not None:  # ranks differ by the rows of each parameter they hold
        groups: dict = {}
        for r in range(settings.gpus):
            groups.setdefault(rank_signature(first.trainable_shapes, settings.gpus, r), []).append(r)
        groups = {rs[0]: rs for rs in groups.values()}
    else:
        groups = distinct_ranks(strategy, settings.gpus, [t[2] for t in first.trainable])
    sims = {0: first}
    for rep in groups:
        if rep not in sims:
            sims[rep] = Simulation(design, an, settings, rounding, rank=rep).run()
    per_rank = sorted((_entry(r, sims[rep]) for rep, ranks in groups.items() for r in ranks),
                      key=lambda e: e["rank"])
    busiest = max(groups, key=lambda rep: (sims[rep].mem.peak, -rep))
    sims[busiest].rank_events = {r: sims[rep].events for rep, ranks in groups.items() for r in ranks}
    return sims[busiest], per_rank

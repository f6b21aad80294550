"""Data-parallel training, per rank: what DistributedDataParallel and ZeroRedundancyOptimizer add
to one process's step (docs/memory-model.md, "Data-parallel training").

- ``ddp``: ``DistributedDataParallel(model)`` with its defaults (``bucket_cap_mb=25``,
  ``gradient_as_bucket_view=False``). The Reducer keeps flat gradient buckets, one storage per
  bucket, covering every parameter that requires grad: a second, persistent copy of the gradients,
  allocated when DDP is built, so alive all step long. Backward copies each gradient into its bucket
  (``at::mul_out(bucket_view, grad, 1/world)``, in place) and back after the allreduce
  (``grad.copy_(bucket_view)``, in place); gloo's CPU allreduce works on the bucket's memory. Every
  rank is the same.
- ``zero1``: DDP plus ``ZeroRedundancyOptimizer(params, optimizer_class=...)``: each rank's
  optimizer holds state (and runs its step) only for its shard of the parameters; the updated
  parameters are broadcast in place (``dist.broadcast(param.data, src=owner)``). Ranks differ.

The partition and the bucket assignment replicate PyTorch's own algorithms (torch 2.13:
``ZeroRedundancyOptimizer._partition_parameters`` and the Reducer's
``compute_bucket_assignment_by_size``).
"""

from __future__ import annotations

from dataclasses import dataclass

STRATEGIES = ("none", "ddp", "zero1", "zero2", "zero3")
MiB = 1024 * 1024
DDP_BUCKET_CAP_BYTES = 25 * MiB  # DistributedDataParallel(bucket_cap_mb=25)
DDP_FIRST_BUCKET_BYTES = 1 * MiB  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES


def _by_size(numels: list[int]) -> list[int]:
    """Indices sorted as ``sorted(params, key=numel, reverse=True)`` (stable: ties keep their order)."""
    return sorted(range(len(numels)), key=lambda i: -numels[i])


def zero_partition(numels: list[int], world: int) -> list[int]:
    """The rank that owns each parameter (in parameter order), as ZeroRedundancyOptimizer assigns
    them: parameters sorted by size, largest first (a stable sort: ties keep their order), each to
    the rank with the fewest elements so far (the lowest such rank)."""
    owner = [0] * len(numels)
    sizes = [0] * world
    for i in _by_size(numels):
        r = min(range(world), key=lambda k: sizes[k])  # first minimum, as _get_min_index
        owner[i] = r
        sizes[r] += numels[i]
    return owner


def ddp_buckets(nbytes: list[int], first_cap: int = DDP_FIRST_BUCKET_BYTES,
                cap: int = DDP_BUCKET_CAP_BYTES) -> list[list[int]]:
    """DDP's steady-state buckets (indices into ``nbytes``, given in parameter order): after its
    first iteration the Reducer rebuilds them in the order gradients became ready (for a model
    without branches: reverse parameter order), filling a bucket until it reaches its limit (the
    first 1 MiB, then 25 MiB). One dtype assumed (a design has one parameter dtype)."""
    buckets: list[list[int]] = []
    cur: list[int] = []
    size = 0
    limit = first_cap
    for i in reversed(range(len(nbytes))):
        cur.append(i)
        size += nbytes[i]
        if size >= limit:
            buckets.append(cur)
            cur, size = [], 0
            limit = cap
    if cur:
        buckets.append(cur)
    return buckets


@dataclass(frozen=True)
class RankPlan:
    """What one rank holds beyond a single process's step."""

    rank: int
    world: int
    strategy: str
    bucket_bytes: int  # DDP gradient buckets (raw)
    bucket_rounded: int  # the same with allocator rounding (one block per bucket)
    owned: tuple | None  # indices of the trainable tensors whose optimizer state this rank holds; None: all


def _round(n: int, r: int) -> int:
    return n if r <= 1 or not n else -(-n // r) * r


def rank_plan(strategy: str, world: int, rank: int, trainable_bytes: list[int], trainable_numels: list[int],
              rounding: int = 1) -> RankPlan | None:
    """The plan of ``rank`` for a step whose trainable tensors (parameter order) are given."""
    if strategy == "none":
        return None
    buckets = ddp_buckets(trainable_bytes)
    raw = sum(trainable_bytes)
    rounded = sum(_round(sum(trainable_bytes[i] for i in b), rounding) for b in buckets)
    owned = None
    if strategy == "zero1":
        # the local optimizer's params are in assignment order (largest first), which decides
        # which step temporaries meet (for-loop Adam frees a denominator only at the next one)
        owner = zero_partition(trainable_numels, world)
        owned = tuple(i for i in _by_size(trainable_numels) if owner[i] == rank)
    return RankPlan(rank, world, strategy, raw, rounded, owned)


def heaviest_rank(strategy: str, world: int, trainable_numels: list[int]) -> int:
    """The rank with the most optimizer state (zero1; the lowest on a tie), 0 otherwise: the one a
    single-rank question (batch curve, explain) is asked about."""
    if strategy != "zero1" or world <= 1:
        return 0
    sizes = [0] * world
    for i, r in enumerate(zero_partition(trainable_numels, world)):
        sizes[r] += trainable_numels[i]
    return max(range(world), key=lambda r: (sizes[r], -r))


def distinct_ranks(strategy: str, world: int, trainable_numels: list[int]) -> dict[int, list[int]]:
    """Ranks that hold the same thing simulate once: {representative rank: [ranks]}."""
    if strategy != "zero1":
        return {0: list(range(world))}
    owner = zero_partition(trainable_numels, world)
    groups: dict[tuple, list[int]] = {}
    for r in range(world):
        sig = tuple(i for i, o in enumerate(owner) if o == r)
        sig = tuple(trainable_numels[i] for i in sig)
        groups.setdefault(sig, []).append(r)
    return {rs[0]: rs for rs in groups.values()}


def describe_per_rank(per_rank: list[dict], fmt) -> list[str]:
    """The table's lines about ranks: the busiest one, and how the others differ."""
    host = [r["host_bytes"] for r in per_rank if r.get("host_bytes")]
    tail = [f"host RAM          {fmt(max(host))} per rank (offloaded shards, gradients, optimizer)"] if host else []
    if len(per_rank) <= 1:
        return tail
    peaks = [r["peak_bytes"] for r in per_rank]
    busiest = max(per_rank, key=lambda r: (r["peak_bytes"], -r["rank"]))
    if len(set(peaks)) == 1:
        return [f"per rank          all {len(per_rank)} ranks {fmt(busiest['peak_bytes'])} (peak shown)"] + tail
    lines = [f"per rank          busiest rank {busiest['rank']} of {len(per_rank)} (peak shown); "
             f"ranks differ by up to {fmt(max(peaks) - min(peaks))}"]
    lines.append("                  " + ", ".join(f"rank {r['rank']} {fmt(r['peak_bytes'])}" for r in per_rank[:8])
                 + (", ..." if len(per_rank) > 8 else ""))
    return lines + tail


def plan_for(settings, rank: int | None, trainable: list[tuple], rounding: int = 1) -> RankPlan | None:
    """The simulation's hook: ``trainable`` is [(node, bytes, numel)] in parameter order; rank None
    is the heaviest rank."""
    strategy = settings.data_parallel
    if strategy not in ("ddp", "zero1"):  # none, or FSDP (engine/fsdp.py)
        return None
    numels = [t[2] for t in trainable]
    if rank is None:
        rank = heaviest_rank(strategy, settings.gpus, numels)
    return rank_plan(strategy, settings.gpus, rank, [t[1] for t in trainable], numels, rounding)

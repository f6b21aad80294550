"""Per-rank memory of data-parallel training: real torch.distributed (gloo, CPU processes) against
memdesigner's estimate.

Every rank runs the truth harness's step (shared/truth/measure.py ``run_steps``: zero_grad(set_to_none=
True), forward, out.mean(), backward, optimizer.step()) three times under the harness's storage tracker
(method (a), ``DispatchStorageTracker``) and records the steady-state step 2 (step 3 is kept as a
check: DDP rebuilds its buckets at the start of step 2).  Strategies:

- ``ddp``: ``DistributedDataParallel(model)`` with its defaults (bucket_cap_mb=25,
  gradient_as_bucket_view=False), the optimizer over all parameters;
- ``zero1``: the same DDP plus ``ZeroRedundancyOptimizer(params, optimizer_class=...)``.

- ``tp`` / ``tp_sp``: DTensor tensor parallelism over the whole world, ``parallelize_module`` with the
  engine's colwise / rowwise plan (memdesigner.engine.tensor_parallel), with sequence parallel torch's
  tutorial plan (``SequenceParallel`` norms, ``PrepareModuleInput`` gathers, ``RowwiseParallel(
  output_layouts=Shard(1))``); every rank the same batch (its chunk of the sequence under ``tp_sp``);
- ``pp``: ``torch.distributed.pipelining``: the engine's stages (memdesigner.engine.pipeline_parallel)
  as ``nn.Sequential`` units in a ``PipelineStage`` each, ``Schedule1F1B`` over M micro-batches.

Only the rank's own tensors are counted (each rank is its own process); DDP's bucket flat tensors are
first seen by the tracker when backward copies a gradient into them, so they are counted from then on
(through all of step 2).

    python benchmarks/distributed.py --measure     # re-measure into benchmarks/distributed_truth.json
    python benchmarks/distributed.py               # compare the stored truth with the estimate
    python benchmarks/distributed.py --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _tables import default_truth_dir  # noqa: E402

TRUTH_JSON = HERE / "distributed_truth.json"
MODELS_FILE = HERE / "distributed_models.py"
MiB = 1024.0 * 1024.0
BATCH = 4
NETWORKS = ("mlp", "wide_mlp", "lenet5", "small_cnn", "bn_cnn", "tiny_vit", "small_lstm", "llama_stack",
            "decoder_stack", "hand_stack", "hand_stack_lora", "zero_order")
# layer stacks, and a design drawn by hand with a repeated block (also with LoRA): zero2 / zero3
FSDP_ONLY = ("llama_stack", "decoder_stack", "hand_stack", "hand_stack_lora")
DP_ONLY = ("zero_order",)  # ZeroRedundancyOptimizer's partition order: measured under ddp / zero1
STRATEGIES = ("ddp", "zero1", "zero2", "zero3")
FSDP_STRATEGIES = ("zero2", "zero3")
OPTIMIZERS = ("sgd", "adam")
WORLDS = (2, 4)
STEPS = 3
TP_STRATEGIES = ("tp", "tp_sp")  # tensor parallel over the whole world, without / with sequence parallel
TP_NETWORKS = ("tp_mlp", "tp_resmlp", "tp_blocks", "tp_transformer", "mlp", "tiny_vit")
PP_NETWORKS = ("mlp", "tp_mlp", "tp_blocks", "tp_transformer")
PP_MICRO_BATCHES = (4, 8)  # Schedule1F1B needs at least as many micro-batches as stages
SP_NETWORKS = ("tp_resmlp", "tp_blocks", "tp_transformer")  # a sequence dimension all along
FSDP_STEPS = 5  # gloo sometimes keeps a finished collective's buffers past a step: the least of steps 2-5


def truth_dir() -> Path:
    """The truth harness: MEMDESIGNER_TRUTH_DIR, ../shared/truth, or /work/shared/truth (worktrees)."""
    d = default_truth_dir()
    return d if (d / "measure.py").exists() else Path("/work/shared/truth")


def grid(networks=NETWORKS, strategies=STRATEGIES, optimizers=OPTIMIZERS, worlds=WORLDS) -> list[dict]:
    return [{"model": n, "strategy": s, "optimizer": o, "world": w, "batch": BATCH}
            for w in worlds for n in networks for s in strategies for o in optimizers
            if (n not in FSDP_ONLY or s in FSDP_STRATEGIES) and (n not in DP_ONLY or s in ("ddp", "zero1"))]


def tp_grid(networks=TP_NETWORKS, strategies=TP_STRATEGIES, optimizers=OPTIMIZERS, worlds=WORLDS) -> list[dict]:
    """Tensor-parallel cases: the world is one tensor-parallel group (data-parallel size 1)."""
    return [{"model": n, "strategy": s, "optimizer": o, "world": w, "batch": BATCH}
            for w in worlds for n in networks for s in strategies for o in optimizers
            if s != "tp_sp" or n in SP_NETWORKS]


def tp_settings(c: dict) -> dict:
    return {"tensor_parallel": c["world"], "sequence_parallel": c["strategy"] == "tp_sp"}


def tp_plan(name: str, world: int, sequence_parallel: bool = False) -> dict:
    """The engine's parallelize_module plan for a network: {module name: colwise | rowwise}."""
    from memdesigner.engine import tensor_parallel
    from memdesigner.model.blocks import engine_view

    d, an = engine_view(design_of(name))
    return tensor_parallel.make_plan(d, an, world).plan_for_torch(d)


def pp_grid(networks=PP_NETWORKS, optimizers=OPTIMIZERS, worlds=WORLDS, micro_batches=PP_MICRO_BATCHES) -> list[dict]:
    """Pipeline-parallel cases: the world is one pipeline (P = world stages), ``M`` micro-batches of BATCH."""
    def splits(n, w):
        try:
            pp_stages(n, w)
            return True
        except ValueError:  # fewer units with parameters than stages
            return False
    return [{"model": n, "strategy": "pp", "optimizer": o, "world": w, "batch": BATCH, "micro_batches": m}
            for w in worlds for n in networks for o in optimizers for m in micro_batches if splits(n, w)]


def case_key(c: dict) -> str:
    if c["strategy"] == "pp":
        return f"{c['model']}|pp|{c['optimizer']}|w{c['world']}|b{c['batch']}|m{c['micro_batches']}"
    return f"{c['model']}|{c['strategy']}|{c['optimizer']}|w{c['world']}|b{c['batch']}"


# --------------------------------------------------------------------------
# measuring (inside every rank)
# --------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _layer_lists(module):
    """The outermost ``nn.ModuleList`` / ``nn.ModuleDict`` containers under (or at) ``module``."""
    import torch.nn as nn

    if isinstance(module, (nn.ModuleList, nn.ModuleDict)):
        return [module]
    return [ml for c in module.children() for ml in _layer_lists(c)]


def fsdp_wrap(model, strategy: str):
    """FSDP2 as the engine models it (engine/fsdp.py ``unit_scopes``): ``fully_shard`` on each
    top-level child with parameters, then on the root; ``reshard_after_forward`` False for zero2,
    True for zero3. A stack of layers (an ``nn.ModuleList``, which ``fully_shard`` refuses: no
    forward) is wrapped layer by layer, as HF's and torchtitan's recipes do (``for layer in
    model.layers: fully_shard(layer)``); a top-level child holding one is not wrapped itself (its
    other parameters are the root's)."""
    from torch.distributed.fsdp import fully_shard

    raf = strategy == "zero3"
    for child in model.children():
        if not any(True for _ in child.parameters()):
            continue
        lists = _layer_lists(child)
        if not lists:
            fully_shard(child, reshard_after_forward=raf)
            continue
        for ml in lists:
            for layer in (ml.values() if hasattr(ml, "values") else ml):
                if any(True for _ in layer.parameters()):
                    fully_shard(layer, reshard_after_forward=raf)
    fully_shard(model, reshard_after_forward=raf)
    return model


def phase_stats_from_totals(tb, base: int) -> tuple[dict, dict]:
    """Per (step, phase) {start, peak, end} from the CPU allocator's own running total, which every
    allocation event carries. Replaying the events one by one (``ProfilerMemoryTracker.analyze``)
    misses frees made on threads the profiler does not follow (gloo's workers drop their
    collectives' buffers there), so a freed block would count until its address is reused; the
    allocator's total counts every thread. Also: what was live at the peak, by allocating op."""
    import bisect

    import torch

    Alloc = torch._C._profiler._EventType.Allocation
    tree = tb.prof.profiler.kineto_results.experimental_event_tree()
    ranges, allocs = [], []
    stack = [(n, None) for n in reversed(tree)]
    while stack:
        n, top = stack.pop()
        if n.tag == Alloc:
            f = n.typed[1]
            if f.device.type == "cpu":
                allocs.append((n.start_time_ns, len(allocs), int(f.alloc_size), int(f.total_allocated), top or "-"))
            continue
        if n.name.startswith(tb.PREFIX):
            _, s, ph = n.name.split("::")
            ranges.append((n.start_time_ns, n.end_time_ns, (int(s), ph)))
        elif "::" in n.name and top is None:
            top = n.name
        stack.extend((c, top) for c in reversed(n.children))
    allocs.sort()
    t0 = allocs[0][3] - allocs[0][2]
    times = [a[0] for a in allocs]
    curs = [base + a[3] - t0 for a in allocs]
    stats = {}
    for (a, b, key) in sorted(ranges):
        lo, hi = bisect.bisect_left(times, a), bisect.bisect_right(times, b)
        start = curs[lo - 1] if lo > 0 else base
        stats[key] = {"start": start, "peak": max([start] + curs[lo:hi]), "end": curs[hi - 1] if hi > lo else start}
    return stats, {"n_events": len(allocs), "end_minus_base": (curs[-1] if curs else base) - base}


def _fsdp_tracker(measure):
    """The storage tracker (method (a)) made to see FSDP2: a DTensor is counted by its local shard,
    and a storage resized in place (``FSDPParam.free_storage``/``alloc_storage``:
    ``untyped_storage().resize_(0)`` and back, no dispatch op) is re-read when it happens."""
    import torch.distributed.fsdp._fully_shard._fsdp_param as fp
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as fpg
    from torch.distributed.tensor import DTensor

    class FsdpTracker(measure.DispatchStorageTracker):
        def see(self, t, origin):
            if isinstance(t, DTensor):
                t = t._local_tensor
            super().see(t, origin)

        def __enter__(self):
            free, alloc = fp.free_storage, fp.alloc_storage

            def free_(t):
                free(t)
                self._cur_op = "FSDP free_storage"
                self.see(t, "op")

            def alloc_(t):
                alloc(t)
                self._cur_op = "FSDP alloc_storage"
                self.see(t, "op")
            self._saved = (free, alloc, fpg.alloc_storage)
            fp.free_storage, fp.alloc_storage, fpg.alloc_storage = free_, alloc_, alloc_
            return super().__enter__()

        def __exit__(self, *exc):
            fp.free_storage, fp.alloc_storage, fpg.alloc_storage = self._saved
            return super().__exit__(*exc)

    return FsdpTracker("cpu")


def measure_rank_fsdp(case: dict, rank: int, measure) -> dict:
    """zero2/zero3 on this rank with the storage tracker (method (a)) taught FSDP2's in-place
    storage resizes and DTensors (``_fsdp_tracker``). The profiler (method (b)) runs alongside as
    a cross-check: it also sees what kernels allocate inside (oneDNN convolution and LSTM scratch,
    gloo's copies in its collectives), which the single-process truths do not count either."""
    import distributed_models
    import torch

    torch.manual_seed(0)
    model, shape = distributed_models.MODELS[case["model"]]()
    model.train()
    fsdp_wrap(model, case["strategy"])
    params = list(model.parameters())
    opt = measure.make_optimizer(case["optimizer"], params)
    torch.manual_seed(1 + rank)
    x = measure.make_input(model, shape, case["batch"], torch.float32, "cpu")
    buffers = list(model.buffers())
    locals_ = [p.to_local() if hasattr(p, "to_local") else p for p in params]
    gc.collect()
    base = measure.unique_storage_bytes(locals_ + buffers + [x])
    ta = _fsdp_tracker(measure)
    ta.register(locals_, "param")
    ta.register(buffers, "buffer")
    ta.register([x], "input")
    tb = measure.ProfilerMemoryTracker("cpu")
    tb.start()
    try:
        with ta:
            # reference cycles can hold a gradient past its step (freed whenever the collector
            # runs): collect between steps, outside the measured phases
            measure.run_steps(model, x, opt, "train", FSDP_STEPS, [tb, ta],
                              on_exit=lambda step, phase: gc.collect() if phase == "release" else None)
    finally:
        tb.stop()
    steps = measure.summarize(ta.phase_stats, "train", FSDP_STEPS)
    stats, diag = phase_stats_from_totals(tb, base)
    out = {"rank": rank, "param_bytes": measure.unique_storage_bytes(locals_), "method": "a+resize",
           "steps": [{k: v for k, v in d.items() if k != "phases"} for d in steps],
           "peak_contents": dict(sorted(ta.peak_contents().items(), key=lambda kv: -kv[1])[:8]),
           "profiler_peaks": [d["peak_overall"] for d in measure.summarize(stats, "train", FSDP_STEPS)],
           "diagnostics": {"base": base, "tracker_start": ta.phase_stats[(1, "zero_grad")]["start"],
                           "resized": ta.n_resized, "no_storage": ta.n_no_storage, "totals": diag}}
    del tb.prof, opt, model, x, params, buffers, locals_
    ta.live.clear()
    gc.collect()
    return out


def _subclass_tracker(measure):
    """The storage tracker (method (a)) made to see tensor subclasses: a DTensor (a parameter, a
    module's output) or an ``AsyncCollectiveTensor`` (a functional collective's result) is a wrapper
    whose own storage is not memory; it counts by the tensors it wraps (``__tensor_flatten__``)."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    class SubclassTracker(measure.DispatchStorageTracker):
        def see(self, t, origin):
            if is_traceable_wrapper_subclass(t):
                for name in t.__tensor_flatten__()[0]:
                    self.see(getattr(t, name), origin)
                return
            super().see(t, origin)

    return SubclassTracker("cpu")


def tp_parallelize(model, plan: dict, sequence_parallel: bool):
    import torch

    """``parallelize_module`` over one mesh of all ranks with the engine's plan (module name ->
    colwise / rowwise); with sequence parallel, torch's tutorial's SequenceParallel plan."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    if not sequence_parallel:
        styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
        parallelize_module(model, mesh, {name: styles[s]() for name, s in plan.items()})
        return model
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import PrepareModuleInput, SequenceParallel

    # torch's tutorial: norms sequence-sharded, the module around each colwise group gathers its
    # input once (PrepareModuleInput), rowwise outputs reduce-scattered back to Shard(1)
    full = {}
    for name, style in plan.items():
        if style == "colwise":
            full[name] = ColwiseParallel()
            full[name.rsplit(".", 1)[0]] = PrepareModuleInput(input_layouts=(Shard(1),),
                                                              desired_input_layouts=(Replicate(),))
        else:
            full[name] = RowwiseParallel(output_layouts=Shard(1))
    for name, mod in model.named_modules():
        if isinstance(mod, (torch.nn.LayerNorm, torch.nn.RMSNorm)):
            full[name] = SequenceParallel(use_local_output=True)
    parallelize_module(model, mesh, full)
    return model


def measure_rank_tp(case: dict, rank: int, measure) -> dict:
    """Tensor parallel on this rank (DTensor, one mesh over the whole world): every rank gets the same
    batch; the tracker counts DTensors and collective results by their local tensors."""
    import distributed_models
    import torch
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    torch.manual_seed(0)
    model, shape = distributed_models.MODELS[case["model"]]()
    model.train()
    tp_parallelize(model, case["plan"], case["strategy"] == "tp_sp")
    params = list(model.parameters())
    opt = measure.make_optimizer(case["optimizer"], params)
    torch.manual_seed(1)  # the same batch on every rank (replicated input)
    x = measure.make_input(model, shape, case["batch"], torch.float32, "cpu")
    if case["strategy"] == "tp_sp":  # sequence parallel: each rank holds its chunk of the sequence
        x = x.chunk(torch.distributed.get_world_size(), dim=1)[rank].contiguous()
    buffers = list(model.buffers())
    locals_ = [p._local_tensor if is_traceable_wrapper_subclass(p) else p for p in params]
    gc.collect()
    base = measure.unique_storage_bytes(locals_ + buffers + [x])
    ta = _subclass_tracker(measure)
    ta.register(locals_, "param")
    ta.register(buffers, "buffer")
    ta.register([x], "input")
    tb = measure.ProfilerMemoryTracker("cpu")
    tb.start()
    try:
        with ta:
            measure.run_steps(model, x, opt, "train", STEPS, [tb, ta],
                              on_exit=lambda step, phase: gc.collect() if phase == "release" else None)
    finally:
        tb.stop()
    steps = measure.summarize(ta.phase_stats, "train", STEPS)
    stats, _ = phase_stats_from_totals(tb, base)
    out = {"rank": rank, "param_bytes": measure.unique_storage_bytes(locals_), "method": "a+subclass",
           "steps": [{k: v for k, v in d.items() if k != "phases"} for d in steps],
           "peak_contents": dict(sorted(ta.peak_contents().items(), key=lambda kv: -kv[1])[:8]),
           "profiler_peaks": [d["peak_overall"] for d in measure.summarize(stats, "train", STEPS)]}
    del tb.prof, opt, model, x, params, buffers, locals_
    ta.live.clear()
    gc.collect()
    return out


def pp_stages(name: str, stages: int) -> list[list[str]]:
    """The engine's stage split of a network: the module names (units) of every stage."""
    from memdesigner.engine.pipeline_parallel import split_stages
    from memdesigner.model.blocks import engine_view

    d, an = engine_view(design_of(name))
    return [[u for u in st.units if u != "<input>"] for st in split_stages(d, an, stages)]


def measure_rank_pp(case: dict, rank: int, measure) -> dict:
    """Pipeline parallel on this rank: its stage (the engine's units, in an nn.Sequential) in a
    ``PipelineStage`` run by ``Schedule1F1B`` over ``micro_batches`` chunks of the batch; the last
    stage's loss is each micro-batch's ``out.mean()``. Phases: zero_grad, schedule (forward and
    backward interleaved), step."""
    import distributed_models
    import torch
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    P, M = case["world"], case["micro_batches"]
    torch.manual_seed(0)
    model, shape = distributed_models.MODELS[case["model"]]()
    model.train()
    stage_mod = torch.nn.Sequential(*[model.get_submodule(u) for u in case["stages"][rank]])
    del model
    stage = PipelineStage(stage_mod, rank, P, torch.device("cpu"))
    sched = Schedule1F1B(stage, n_microbatches=M, loss_fn=lambda out, tgt: out.mean())
    params = list(stage_mod.parameters())
    opt = measure.make_optimizer(case["optimizer"], params)
    torch.manual_seed(1)
    x = measure.make_input(distributed_models.MODELS[case["model"]]()[0], shape, case["batch"] * M,
                           torch.float32, "cpu") if rank == 0 else None
    target = torch.zeros(M) if rank == P - 1 else None
    gc.collect()
    ta = _subclass_tracker(measure)
    ta.register(params, "param")
    ta.register(list(stage_mod.buffers()), "buffer")
    if x is not None:
        ta.register([x], "input")
    steps = []
    with ta:
        for step in range(1, STEPS + 1):
            rec = {"step": step}
            for phase in ("zero_grad", "schedule", "step"):
                ta.enter(step, phase)
                if phase == "zero_grad":
                    opt.zero_grad(set_to_none=True)
                elif phase == "step":
                    opt.step()
                else:
                    losses = [] if rank == P - 1 else None
                    if rank == 0:
                        sched.step(x)
                    elif rank == P - 1:
                        sched.step(target=target, losses=losses)
                    else:
                        sched.step()
                    del losses
                ta.exit(step, phase)
                rec[f"peak_{phase}"] = ta.phase_stats[(step, phase)]["peak"]
                gc.collect()
            rec["peak_overall"] = max(rec["peak_zero_grad"], rec["peak_schedule"], rec["peak_step"])
            steps.append(rec)
    out = {"rank": rank, "param_bytes": measure.unique_storage_bytes(params), "method": "a+pipelining",
           "steps": steps, "peak_contents": dict(sorted(ta.peak_contents().items(), key=lambda kv: -kv[1])[:8])}
    del opt, stage, sched, stage_mod, params, x
    ta.live.clear()
    gc.collect()
    return out


def measure_rank(case: dict, rank: int, measure) -> dict:
    """One case on this rank: the tracker's per-step phase peaks (bytes)."""
    if case["strategy"] == "pp":
        return measure_rank_pp(case, rank, measure)
    if case["strategy"] in FSDP_STRATEGIES:
        return measure_rank_fsdp(case, rank, measure)
    if case["strategy"] in TP_STRATEGIES:
        return measure_rank_tp(case, rank, measure)
    import distributed_models
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model, shape = distributed_models.MODELS[case["model"]]()
    model.train()
    ddp = DDP(model)
    params = list(model.parameters())
    if case["strategy"] == "zero1":
        cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[case["optimizer"]]
        lr = 1e-3 if case["optimizer"] == "sgd" else 1e-4
        opt = ZeroRedundancyOptimizer(params, optimizer_class=cls, lr=lr)
    else:
        opt = measure.make_optimizer(case["optimizer"], params)
    torch.manual_seed(1 + rank)
    x = measure.make_input(model, shape, case["batch"], torch.float32, "cpu")
    buffers = list(model.buffers())
    gc.collect()
    ta = measure.DispatchStorageTracker("cpu")
    ta.register(params, "param")
    ta.register(buffers, "buffer")
    ta.register([x], "input")
    with ta:
        measure.run_steps(ddp, x, opt, "train", STEPS, [ta])
    steps = measure.summarize(ta.phase_stats, "train", STEPS)
    out = {"rank": rank, "param_bytes": measure.unique_storage_bytes(params),
           "steps": [{k: v for k, v in d.items() if k != "phases"} for d in steps],
           "peak_contents": dict(sorted(ta.peak_contents().items(), key=lambda kv: -kv[1])[:5])}
    del ddp, opt, model, x, params, buffers
    ta.live.clear()
    gc.collect()
    return out


def _worker(rank: int, world: int, port: int, cases: list, truth_dir: str, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    if truth_dir not in sys.path:
        sys.path.insert(0, truth_dir)
    import measure

    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        res = [measure_rank(c, rank, measure) for c in cases]
    finally:
        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(res))


def measure_cases(cases: list[dict], truth_dir: Path) -> dict:
    """{case key: {case..., ranks: [per-rank record]}}, one process group per world size."""
    import torch.multiprocessing as mp

    out = {}
    cases = [{**c, "plan": tp_plan(c["model"], c["world"], c["strategy"] == "tp_sp")}
             if c["strategy"] in TP_STRATEGIES else c for c in cases]
    cases = [{**c, "stages": pp_stages(c["model"], c["world"])} if c["strategy"] == "pp" else c for c in cases]
    for world in sorted({c["world"] for c in cases}):
        sel = [c for c in cases if c["world"] == world]
        with tempfile.TemporaryDirectory() as tmp:
            mp.start_processes(_worker, args=(world, _free_port(), sel, str(truth_dir), tmp), nprocs=world,
                               join=True, start_method="fork")
            ranks = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(world)]
        for i, c in enumerate(sel):
            out[case_key(c)] = {**c, "ranks": [ranks[r][i] for r in range(world)]}
    return out


def write_truth(truth: dict, path: Path = TRUTH_JSON) -> None:
    """One case per line: small diffs when a case is re-measured."""
    body = ",\n".join(f"{json.dumps(k)}: {json.dumps(truth[k], separators=(',', ':'))}" for k in sorted(truth))
    path.write_text("{\n" + body + "\n}\n")


def steady_step(rank_rec: dict) -> int:
    """Step 2 (DDP has rebuilt its buckets); for FSDP the least of steps 2-5: on some steps gloo's
    worker threads still hold a finished collective's buffers (the reduce-scatter's clone of its
    input), on others not, which the allocator's total shows as a few blocks more."""
    if rank_rec.get("method") is None:
        return 2
    return min(range(2, len(rank_rec["steps"]) + 1), key=lambda s: rank_rec["steps"][s - 1]["peak_overall"])


def steady(rank_rec: dict, step: int | None = None) -> dict:
    """The engine's phases from one rank's step: forward (with the loss), backward, optimizer_step."""
    d = rank_rec["steps"][(step or steady_step(rank_rec)) - 1]
    if rank_rec.get("method") == "a+pipelining":  # forward and backward interleave in the schedule
        return {"forward": d["peak_schedule"], "backward": d["peak_schedule"], "optimizer_step": d["peak_step"],
                "peak": d["peak_overall"]}
    return {"forward": max(d["peak_forward"], d["peak_loss"]), "backward": d["peak_backward"],
            "optimizer_step": d["peak_step"], "peak": d["peak_overall"]}


# --------------------------------------------------------------------------
# comparing
# --------------------------------------------------------------------------
_DESIGNS: dict = {}


def design_of(name: str):
    """The design estimated for a network: imported from its PyTorch code, or, for a design drawn
    by hand (``distributed_models.HAND_DESIGNS``), built as a person draws it; the PyTorch code
    measured is then what the drawing stands for."""
    import distributed_models

    from memdesigner.importers.torch_fx import import_file

    if name not in _DESIGNS:
        hand = distributed_models.HAND_DESIGNS.get(name)
        _DESIGNS[name] = hand() if hand is not None else import_file(f"{MODELS_FILE}:{name}")
    return _DESIGNS[name]


def compare(rec: dict) -> list[dict]:
    """One row per rank: estimated vs measured step-2 peak."""
    import memdesigner

    if rec["strategy"] in TP_STRATEGIES:
        kw = tp_settings(rec)
    elif rec["strategy"] == "pp":
        kw = {"pipeline_parallel": rec["world"], "micro_batches": rec["micro_batches"]}
    else:
        kw = {"gpus": rec["world"], "strategy": rec["strategy"]}
    import distributed_models

    kw = {**kw, **distributed_models.HAND_SETTINGS.get(rec["model"], {})}
    rep = memdesigner.estimate(design_of(rec["model"]), mode="train", batch=rec["batch"],
                               optimizer=rec["optimizer"], backend="cpu", **kw)
    per = {r["rank"]: r for r in rep.per_rank}
    rows = []
    for rr in rec["ranks"]:
        m = steady(rr)
        e = per[rr["rank"]]
        rows.append({"model": rec["model"], "strategy": rec["strategy"], "world": rec["world"],
                     "optimizer": rec["optimizer"], "rank": rr["rank"], "tp": rec["world"] if rec["strategy"] in TP_STRATEGIES else 1, "measured_bytes": m["peak"],
                     "estimated_bytes": e["peak_bytes"],
                     "rel_error": (e["peak_bytes"] - m["peak"]) / m["peak"],
                     "phase_measured": {k: m[k] for k in ("forward", "backward", "optimizer_step")},
                     "phase_estimated": dict(e["phase_peaks"]),
                     "step3_equal": steady(rr, 3)["peak"] == steady(rr, 2)["peak"]})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| network | strategy | world | optimizer | rank | estimate MiB | measured MiB | error % |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['strategy']} | {r['world']} | {r['optimizer']} | {r['rank']} | "
                     f"{r['estimated_bytes'] / MiB:.4f} | {r['measured_bytes'] / MiB:.4f} | "
                     f"{100 * r['rel_error']:+.3f} |")
    errs = [abs(r["rel_error"]) for r in rows]
    if errs:
        lines.append(f"\n{len(rows)} rank rows: median |error| {100 * statistics.median(errs):.3f} %, "
                     f"worst {100 * max(errs):.3f} %")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measure", action="store_true", help="re-measure (spawns gloo process groups)")
    ap.add_argument("--truth-dir", type=Path, default=None)
    ap.add_argument("--model", action="append", help="only these networks")
    ap.add_argument("--world", type=int, action="append")
    ap.add_argument("--strategy", action="append", choices=STRATEGIES + TP_STRATEGIES + ("pp",), help="only these strategies")
    ap.add_argument("--optimizer", action="append", choices=OPTIMIZERS)
    ap.add_argument("--json", help="write the comparison rows here")
    args = ap.parse_args(argv)
    strategies = tuple(args.strategy or STRATEGIES + TP_STRATEGIES + ("pp",))
    worlds, optimizers = tuple(args.world or WORLDS), tuple(args.optimizer or OPTIMIZERS)
    cases = grid(networks=tuple(m for m in args.model or NETWORKS if m in NETWORKS), worlds=worlds,
                 strategies=tuple(x for x in strategies if x in STRATEGIES), optimizers=optimizers)
    cases += tp_grid(networks=tuple(m for m in args.model or TP_NETWORKS if m in TP_NETWORKS), worlds=worlds,
                     strategies=tuple(x for x in strategies if x in TP_STRATEGIES), optimizers=optimizers)
    if "pp" in strategies:
        cases += pp_grid(networks=tuple(m for m in args.model or PP_NETWORKS if m in PP_NETWORKS), worlds=worlds,
                         optimizers=optimizers)
    truth = json.loads(TRUTH_JSON.read_text()) if TRUTH_JSON.exists() else {}
    if args.measure:  # one world size at a time, stored as soon as it is measured
        for world in sorted({c["world"] for c in cases}):
            truth.update(measure_cases([c for c in cases if c["world"] == world], args.truth_dir or truth_dir()))
            write_truth(truth)
    rows = []
    for c in cases:
        rec = truth.get(case_key(c))
        if rec is None:
            print(f"warning: {case_key(c)}: not measured (run with --measure)", file=sys.stderr)
            continue
        rows.extend(compare(rec))
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

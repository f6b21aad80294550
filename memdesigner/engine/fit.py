"""Make it fit: the changes that bring a design under a device's capacity, ranked by their price.

Every suggestion is a complete set of run settings (and, for a shorter sequence, one design
edit) that the engine estimated: re-estimating ``suggestion.settings`` gives ``peak_bytes``
exactly. Nothing here is a rule of thumb; the price says what the change costs besides memory:
recomputed FLOPs (checkpointing is planned layer by layer: engine/checkpoint_plan.py),
communication per step, host RAM and PCIe traffic, a different optimizer's or precision's
numerics, fine-tuning adapters instead of full training, a smaller batch per step, or other
hardware. Fewest GPUs, largest batch and longest sequence are exact searches on the engine.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field

from memdesigner.engine.checkpoint_plan import plan_checkpoints
from memdesigner.engine.devices import Device, all_devices
from memdesigner.engine.estimate import estimate, largest_batch
from memdesigner.engine.search import smallest_fitting
from memdesigner.engine.sequence_curve import longest_fitting
from memdesigner.engine.sequence_length import at_length, sized_for, token_inputs
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import Simulation
from memdesigner.engine.step import prepare, resolve_settings
from memdesigner.model.analysis import analyze
from memdesigner.model.blocks import for_engine, transient_view
from memdesigner.model.design import Design

# what each kind of change costs besides memory, for ranking (lower is cheaper); planned
# checkpointing adds its recomputed share of the step's FLOPs
_PRICE = {"checkpointing": 1.0, "amp": 1.5, "accum": 1.8, "zero1": 2.2, "zero2": 2.4, "sequence": 2.5,
          "batch": 2.6, "adamw8bit": 2.6, "bf16_master": 2.7, "zero3": 2.8, "momentum": 3.0, "offload": 3.2,
          "adafactor": 3.2, "sgd": 3.5, "lora": 3.8, "bf16": 4.0, "qlora": 4.2, "gpus": 4.5, "device": 5.0}
STAGES = ("ddp", "zero1", "zero2", "zero3")
MAX_GPUS = 64  # the fewest-GPU search stops here


@dataclass
class Suggestion:
    change: str  # one line a person reads: what to change
    kinds: tuple  # the single changes it combines (keys of _PRICE)
    settings: dict  # the full run settings (Settings.to_dict()) that were estimated
    device: str  # device id the verdict is for
    peak_bytes: int  # live tensor bytes (as estimate().peak_bytes)
    device_peak_bytes: int  # with the CUDA runtime and allocator rounding: what fits is judged on
    fits: bool
    headroom_bytes: int
    cost: dict = field(default_factory=dict)  # recompute_pct, recompute_flops, communication_bytes, notes
    design_change: dict | None = None  # {"node", "prop", "value"}: an edit of the design itself

    @property
    def price(self) -> float:
        return sum(_PRICE[k] for k in self.kinds) + self.cost.get("recompute_pct", 0.0) / 100.0

    def to_dict(self) -> dict:
        d = {"change": self.change, "kinds": list(self.kinds), "settings": dict(self.settings),
             "device": self.device, "peak_bytes": self.peak_bytes, "device_peak_bytes": self.device_peak_bytes,
             "fits": self.fits, "headroom_bytes": self.headroom_bytes, "cost": dict(self.cost)}
        if self.design_change is not None:
            d["design_change"] = dict(self.design_change)
        return d



@dataclass
class FitAdvice:
    device: str
    capacity_bytes: int
    fits_as_given: bool
    device_peak_bytes: int
    max_batch: int  # the largest batch that fits with the given settings (0: not even 1)
    suggestions: list  # list[Suggestion], fitting ones first, cheapest first
    min_gpus: int | None = None  # the fewest GPUs that fit with zero3 (training on one GPU); None: none up to MAX_GPUS
    max_sequence: int | None = None  # the longest sequence that fits (token models); None: not a token model
    engine_runs: int = 0  # estimates the advice took
    candidates: int = 0  # changes estimated (before those that do not lower the peak are dropped)

    def to_dict(self) -> dict:
        return {"device": self.device, "capacity_bytes": self.capacity_bytes, "fits_as_given": self.fits_as_given,
                "device_peak_bytes": self.device_peak_bytes, "max_batch": self.max_batch,
                "min_gpus": self.min_gpus, "max_sequence": self.max_sequence,
                "suggestions": [s.to_dict() for s in self.suggestions]}


class _Ctx:
    """The design expanded and analysed once; every estimate of the advice goes through ``est``."""

    def __init__(self, design: Design, s: Settings, dev: Device):
        an = analyze(design)
        if not an.ok:
            raise ValueError(str(an.issues[0]))
        self.source = design  # as given (a design with blocks: collapsed)
        self.design, self.an = for_engine(design, an) if design.blocks else (design, an)
        self.s, self.dev = s, dev
        self.runs = 0
        self.out: list[Suggestion] = []
        self.reports: dict[str, object] = {}  # suggestion change -> its report (for plans on top)
        self.gains: dict[tuple, dict] = {}
        self.memo: dict[tuple, object] = {}

    def est(self, s2: Settings, dev: Device | None = None):
        """The estimate of ``s2`` (once per settings and device: the searches and the plans ask
        again for points they share)."""
        dev = dev or self.dev
        key = (repr(sorted(s2.to_dict().items())), dev.id)
        rep = self.memo.get(key)
        if rep is None:
            self.runs += 1
            rep = self.memo[key] = estimate(self.design, s2, device=dev, analysis=self.an)
        return rep

    def add(self, rep, kinds, change, s2, notes, dev=None, design_change=None, **cost) -> Suggestion:
        g = _suggestion(rep, kinds, change, s2, dev or self.dev, notes, design_change)
        g.cost.update(cost)
        self.reports[change] = rep
        self.out.append(g)
        return g


def _knobs(s: Settings, llm: bool) -> list[tuple[str, dict, str, str]]:
    """(kind, settings overrides, label, price note) for every one-knob change that can lower the peak."""
    out = []
    if s.training:
        if not s.amp and s.dtype == "fp32":
            out.append(("amp", {"amp": True}, "mixed precision (AMP)",
                        "autocast: low-precision activations and matmuls, fp32 weights"))
        if s.optimizer in ("adam", "adamw"):
            out.append(("adamw8bit", {"optimizer": "adamw8bit"}, "optimizer 8-bit AdamW (bitsandbytes)",
                        "blockwise-quantised 8-bit moments: Adam's numerics to within quantisation"))
            out.append(("adafactor", {"optimizer": "adafactor"}, "optimizer Adafactor",
                        "factored second moment (row and column statistics), no first moment; retune"))
            out.append(("momentum", {"optimizer": "momentum"}, "optimizer SGD with momentum",
                        "one state tensor per weight instead of Adam's two; retune the learning rate"))
        if s.optimizer not in ("sgd", "none"):
            out.append(("sgd", {"optimizer": "sgd"}, "optimizer SGD",
                        "no optimizer state; retune the learning rate"))
        if s.dtype == "fp32" and not s.amp:
            out.append(("bf16_master", {"dtype": "bf16", "master_weights": True}, "bf16 with fp32 master weights",
                        "bf16 weights, activations and gradients; an fp32 master copy and fp32 optimizer state"))
        if llm and not s.lora_r:
            out.append(("lora", {"lora_r": 16}, "LoRA r 16 (peft, all linear layers)",
                        "fine-tuning: the base weights are frozen, only the adapters train"))
            out.append(("qlora", {"lora_r": 16, "base_bits": 4}, "QLoRA: 4-bit NF4 base + LoRA r 16",
                        "fine-tuning: frozen base weights stored in 4 bits (bitsandbytes), adapters train"))
    if s.dtype == "fp32" and not s.amp:
        out.append(("bf16", {"dtype": "bf16"}, "bf16 weights",
                    "bf16 weights, gradients and optimizer state: no fp32 master copy, updates lose precision"
                    if s.training else "bf16 weights and activations"))
    return out


def _suggestion(rep, kinds, change, s: Settings, dev: Device, notes: list, design_change=None) -> Suggestion:
    cost = {"recompute_flops": rep.recompute_flops,
            "recompute_pct": round(100.0 * rep.recompute_flops / (3 * rep.flops), 1) if rep.flops else 0.0,
            "communication_bytes": 0, "notes": notes}
    return Suggestion(change=change, kinds=tuple(kinds), settings=s.to_dict(), device=dev.id,
                      peak_bytes=rep.peak_bytes, device_peak_bytes=rep.device_peak_bytes,
                      fits=rep.device["fits"], headroom_bytes=rep.device["headroom_bytes"], cost=cost,
                      design_change=design_change)


def _comm_bytes(strategy: str, world: int, param_bytes: int) -> int:
    """Bytes each rank receives per step: ring allreduce 2(W-1)/W·P (ddp; zero1 adds the parameter
    broadcast, (W-1)/W·P), FSDP's all-gathers and reduce-scatter (W-1)/W·P each: two for zero2,
    three for zero3 (the backward all-gather)."""
    factor = {"ddp": 2, "zero1": 3, "zero2": 2, "zero3": 3}[strategy]
    return factor * param_bytes * (world - 1) // world


def _param_bytes(rep, s: Settings) -> int:
    return rep.params * (2 if s.dtype in ("fp16", "bf16") else 4)


def _sharding(ctx: _Ctx, base) -> int | None:
    """A higher ZeRO stage on the same GPUs, CPU offload, or, on one GPU, zero3 over the fewest
    GPUs that fit (exact); the price is the extra communication per step. Returns the fewest GPUs."""
    s, dev = ctx.s, ctx.dev
    if not s.training:
        return None
    pbytes = _param_bytes(base, s)
    if s.gpus > 1 and s.strategy in STAGES:
        for st in STAGES[STAGES.index(s.strategy) + 1:]:
            if st == "zero1":
                continue  # zero2 shards the same state and the gradients too
            try:
                s2 = s.with_(strategy=st)
            except ValueError:
                continue
            extra = max(0, _comm_bytes(st, s.gpus, pbytes) - _comm_bytes(s.strategy, s.gpus, pbytes))
            ctx.add(ctx.est(s2), (st,), f"{st} (FSDP2 fully_shard) on the same {s.gpus} GPUs", s2,
                    [f"{'parameters, ' if st == 'zero3' else ''}gradients and optimizer state sharded over "
                     f"{s.gpus} ranks"], communication_bytes=extra)
    if s.strategy in ("zero2", "zero3") and s.offload == "none":
        _offload(ctx, s.with_(offload="params"), ("offload",), s.gpus)
    if s.gpus != 1:
        return None
    if base.device["fits"]:
        return 1
    reps = {}

    def fits(n):
        if n not in reps:
            reps[n] = ctx.est(s.with_(gpus=n, strategy="zero3"))
        return reps[n].device["fits"]

    if not fits(MAX_GPUS):  # the peak only falls with more ranks: if the most do not fit, none do
        return None
    n = smallest_fitting(fits, 2, MAX_GPUS)
    comm = _comm_bytes("zero3", n, pbytes)
    s2 = s.with_(gpus=n, strategy="zero3")
    ctx.add(reps[n], ("gpus",), f"{n} GPUs with zero3 (FSDP2 fully_shard), batch {s.batch} per GPU (the fewest)",
            s2, [f"{n} x {dev.name}; the global batch grows {n}x unless the per-GPU batch shrinks"],
            communication_bytes=comm)
    # with the shards, gradients and optimizer step on the host: the fewest GPUs for that
    off = {}

    def fits_off(m):
        if m not in off:
            off[m] = ctx.est(s.with_(gpus=m, strategy="zero3", offload="params"))
        return off[m].device["fits"]

    m = smallest_fitting(fits_off, 1, n)
    if m is not None:
        _offload(ctx, s.with_(gpus=m, strategy="zero3", offload="params"), ("gpus", "offload") if m > 1
                 else ("offload",), m, off[m])
    return n


def _offload(ctx: _Ctx, s2: Settings, kinds, world: int, rep=None) -> None:
    rep = rep or ctx.est(s2)
    host = max((r.get("host_bytes", 0) for r in rep.per_rank), default=0)
    pbytes = _param_bytes(rep, s2)
    pcie = 2 * pbytes // world  # the shards to the device for each all-gather, the gradient shards back
    if ctx.s.strategy in ("zero2", "zero3"):
        label = f"CPU offload (FSDP2 CPUOffloadPolicy) on the same {world} GPUs"
    elif world == 1:
        label = "CPU offload: FSDP2 on 1 GPU with CPUOffloadPolicy"
    else:
        label = f"{world} GPUs with zero3 + CPU offload (CPUOffloadPolicy)"
    ctx.add(rep, kinds, label, s2,
            ["every all-gather copies the unit's shards to the device and every gradient shard goes "
             "back; the optimizer step runs on the CPU"], host_bytes=host, pcie_bytes=pcie,
            communication_bytes=_comm_bytes("zero3", world, pbytes) if world > 1 else 0)


def _longest_sequence(ctx: _Ctx, nid: str):
    """The longest sequence below the design's that fits (exact: the peak grows with the length),
    steered by the envelope of the moments' parabolas in the length (engine/sequence_curve.py),
    settled by exact runs; (length, its report) or None when not even one token fits."""
    length = int(ctx.design.nodes[nid].props["shape"][0])
    s, dev = ctx.s.with_(seq_len=0), ctx.dev  # each trial's length is its design's, not the setting's
    analysed: dict[int, tuple] = {}

    src = ctx.source if ctx.source.blocks and nid in ctx.source.nodes else None

    def design_at(n):
        if n not in analysed:
            if src is not None:  # the collapsed design: its repeated blocks are analysed once each
                analysed[n] = transient_view(at_length(src, n))
            else:
                d = at_length(ctx.design, n)
                analysed[n] = (d, analyze(d))
        return analysed[n]

    def peak(n):
        d, an = design_at(n)
        if not an.ok:
            return 2 * dev.memory_bytes
        ctx.runs += 1
        return estimate(d, s, device=dev, analysis=an).device_peak_bytes

    single = s.gpus == 1 and s.tensor_parallel == 1 and s.pipeline_parallel == 1 and s.mode != "generate"

    def traced(n):  # the run estimate() makes, with every checked moment kept
        d, an = design_at(n)
        if not an.ok:
            return None
        d, an, _ = prepare(d, s, an)
        ctx.runs += 1
        sim = Simulation(d, an, s, dev.allocator_rounding, trace=True, rank=0).run()
        return sim.mem.rpeak + dev.runtime_overhead_bytes, sim.mem.trace

    best = longest_fitting(length, dev.memory_bytes, peak, traced if single else None,
                           overhead=dev.runtime_overhead_bytes)
    if best is None:
        return None
    d, an = design_at(best)
    ctx.runs += 1
    return best, estimate(d, s, device=dev, analysis=an)


def _plan_on(ctx: _Ctx, s2: Settings, kinds, label: str, notes: list, base=None) -> Suggestion | None:
    """Planned selective checkpointing on top of ``s2``: the cheapest layers to recompute."""
    if s2.checkpointing or s2.checkpoint_layers or s2.checkpoint_units:
        base = None  # planned from scratch: the all-or-nothing choice replaced by a planned one
    # what checkpointing saves depends on the activations, not on the optimizer: measured once per kind
    # (QLoRA's 4-bit base keeps LoRA's activations: the plan is re-simulated, so a shared guess is safe)
    akey = (s2.dtype, s2.amp, s2.batch, bool(s2.lora_r), s2.master_weights, s2.freeze, s2.lora_targets)
    runs = []
    plan = plan_checkpoints(ctx.design, s2, ctx.dev, analysis=ctx.an, base=base, gains=ctx.gains.get(akey),
                            runs=runs)
    ctx.runs += sum(runs)
    if plan is None:
        return None
    ctx.gains[akey] = plan.gains
    k = len(plan.units)
    shown = ", ".join(plan.units[:4]) + (", ..." if k > 4 else "")
    what = f"checkpoint {k} of {plan.candidates} layers ({shown})"
    s3 = s2.with_(checkpointing=False, checkpoint_layers=False, checkpoint_units=plan.units)
    return ctx.add(plan.report, tuple(kinds) + ("checkpointing",), f"{label} + {what}" if label else what, s3,
                   list(notes) + [f"torch.utils.checkpoint(use_reentrant=False) on {k} layers, chosen by a "
                                  "0/1 knapsack on the engine's savings: their forward runs again in backward"],
                   checkpoint_units=list(plan.units))


def make_it_fit(design: Design, settings: Settings | None = None, *, device, **kw) -> FitAdvice:
    """Rank the changes that make ``design`` fit ``device`` (a Device or an id)."""
    s, dev = resolve_settings(settings, device, kw)
    if dev is None:
        raise ValueError("device: make-it-fit needs a device")
    design, _ = sized_for(design, None, s.seq_len)  # the advice is for the design at that length
    ctx = _Ctx(design, s, dev)
    base = ctx.est(s)
    seq = next(iter(token_inputs(ctx.design)), None)
    knobs = []
    for kind, over, label, note in _knobs(s, llm=seq is not None):
        try:
            knobs.append((kind, s.with_(**over), label, note))
        except ValueError:
            continue
    results = {}
    for kind, s2, label, note in knobs:
        results[kind] = ctx.add(ctx.est(s2), (kind,), label, s2, [note])
    if s.training:
        _plan_on(ctx, s, (), "", [], base=base)
    # useful pairs: a precision and an optimizer change where neither alone is enough
    prec = [k for k in knobs if k[0] in ("amp", "bf16_master")]
    opts = [k for k in knobs if k[0] in ("adamw8bit", "adafactor", "momentum", "sgd")]
    pairs = []
    for a, b in itertools.product(prec, opts):
        if results[a[0]].fits or results[b[0]].fits:
            continue
        try:
            s2 = s.with_(**{**_overrides(a[1], s), **_overrides(b[1], s)})
        except ValueError:
            continue
        pairs.append(ctx.add(ctx.est(s2), (a[0], b[0]), f"{a[2]} + {b[2]}", s2, [a[3], b[3]]))
    # planned checkpointing on top of the changes that come closest without fitting
    if s.training:
        near = sorted((g for g in list(results.values()) + pairs if not g.fits and g.kinds[0] != "bf16"),
                      key=lambda g: g.device_peak_bytes)[:2]
        for g in near:
            _plan_on(ctx, Settings(**g.settings), g.kinds, g.change, g.cost["notes"], base=ctx.reports[g.change])
    min_gpus = _sharding(ctx, base)
    # a smaller batch per step, and the same global batch by gradient accumulation
    # (the peak grows with the batch: when batch 1 is the design as given and does not fit, none does)
    max_batch = 0 if s.batch == 1 and not base.device["fits"] else _largest_batch(ctx, s, dev)
    if s.batch > 1:
        if 0 < max_batch < s.batch:
            s2 = s.with_(batch=max_batch)
            ctx.add(ctx.est(s2), ("batch",), f"batch {max_batch} (the largest that fits)", s2,
                    [f"batch {max_batch} per step instead of {s.batch}: the global batch shrinks"])
        if s.training:
            b = _accumulation_batch(ctx, max_batch)
            if b:
                k = s.batch // b
                s2 = s.with_(batch=b, grad_accum=s.grad_accum * k)
                ctx.add(ctx.est(s2), ("accum",), f"batch {b} x {k} gradient-accumulation steps", s2,
                        [f"the same global batch ({s.batch * s.grad_accum}) in {k} micro-batches of {b}: the "
                         "same FLOPs in more, smaller kernels; .grad persists between micro-steps"],
                        global_batch=s.batch * s.grad_accum, micro_steps=s.grad_accum * k)
    # a shorter sequence for token models
    max_seq = None
    if seq is not None:
        length = ctx.design.nodes[seq].props["shape"][0]
        best = None if base.device["fits"] else _longest_sequence(ctx, seq)
        max_seq = length if base.device["fits"] else (best[0] if best else 0)
        if best is not None:
            n, rep = best
            if s.seq_len:  # a run setting: the change is to the setting, the design stays
                ctx.add(rep, ("sequence",), f"sequence length {n} (the longest that fits)", s.with_(seq_len=n),
                        [f"seq_len {n} instead of {length}"])
            else:
                ctx.add(rep, ("sequence",), f"sequence length {n} (the longest that fits)", s,
                        [f"input {seq!r}: {n} tokens instead of {length}"],
                        design_change={"node": seq, "prop": "shape", "value": [n]})
    # other hardware: the smallest shipped or user device of the same kind that fits as given
    bigger = sorted((d for d in all_devices() if d.kind == dev.kind and d.memory_bytes > dev.memory_bytes),
                    key=lambda d: d.memory_bytes)
    for d in bigger:
        if d.allocator_rounding == dev.allocator_rounding and \
                base.device_peak_bytes - dev.runtime_overhead_bytes + d.runtime_overhead_bytes > d.memory_bytes:
            continue  # the same step on this device: only its runtime overhead differs, and it does not fit
        same = d.allocator_rounding == dev.allocator_rounding and s.mode != "generate"
        rep = _same_step_on(base, dev, d) if same else ctx.est(s, dev=d)
        if rep.device["fits"]:
            ctx.add(rep, ("device",), f"a device with more memory: {d.name}", s,
                    [f"the smallest {d.kind} profile ({d.memory_bytes / 1e9:.0f} GB) that fits the design as given"],
                    dev=d)
            break
    # a change that does not lower the peak is no suggestion; the same settings once
    out, seen = [], set()
    for g in sorted(ctx.out, key=lambda g: (not g.fits, g.price, g.device_peak_bytes)):
        key = (repr(sorted(g.settings.items())), g.device, repr(g.design_change))
        if key in seen or not (g.fits or g.device_peak_bytes < base.device_peak_bytes):
            continue
        seen.add(key)
        out.append(g)
    return FitAdvice(device=dev.id, capacity_bytes=dev.memory_bytes, fits_as_given=base.device["fits"],
                     device_peak_bytes=base.device_peak_bytes, max_batch=max_batch, suggestions=out,
                     min_gpus=min_gpus, max_sequence=max_seq, engine_runs=ctx.runs, candidates=len(ctx.out))


def _largest_batch(ctx: _Ctx, s: Settings, dev: Device) -> int:
    """As `estimate --max-batch` finds it: in generate mode whole generations per batch (the
    one-forward batch curve said 13 where a generation of 64 new tokens fits 28)."""
    if s.mode == "generate":
        from memdesigner.engine.generate import largest_generate_batch

        design, _ = sized_for(ctx.design, ctx.an, s.seq_len)  # (as batch_sweep does)
        return largest_generate_batch(design, s, dev)
    return largest_batch(ctx.design, s, dev, ctx.an)


def _accumulation_batch(ctx: _Ctx, max_batch: int) -> int:
    """The largest divisor b of the batch (below it) whose micro-steps fit with gradient
    accumulation (0: none). Accumulation only adds the persistent .grad, so b is at most the
    largest batch that fits without it: the divisors from there down are estimated with the
    suggestion's own settings (the first that fits is the answer; the peak grows with the batch),
    and after two misses the accumulation's batch curve bounds the rest."""
    s = ctx.s
    divs = [d for d in range(min(max_batch, s.batch - 1), 0, -1) if s.batch % d == 0]
    for d in divs[:2]:
        if ctx.est(s.with_(batch=d, grad_accum=s.grad_accum * (s.batch // d))).device["fits"]:
            return d
    if len(divs) <= 2:
        return 0
    b_max = largest_batch(ctx.design, s.with_(grad_accum=max(2, s.grad_accum)), ctx.dev, ctx.an)
    return next((d for d in divs[2:] if d <= b_max), 0)


def _same_step_on(base, dev: Device, d: Device):
    """``base`` (estimated on ``dev``) as ``d`` reports it: a device of the same kind and allocator
    rounding runs the same simulation (the backend and the rounding are all an estimate takes from
    a device), so only the runtime overhead, and with it the verdict, differ."""
    rep = copy.copy(base)
    rep.device_peak_bytes = base.device_peak_bytes - dev.runtime_overhead_bytes + d.runtime_overhead_bytes
    rep.runtime_overhead_bytes = d.runtime_overhead_bytes
    rep.device = {"id": d.id, "name": d.name, "kind": d.kind, "capacity_bytes": d.memory_bytes,
                  "runtime_overhead_bytes": d.runtime_overhead_bytes,
                  "fits": rep.device_peak_bytes <= d.memory_bytes,
                  "headroom_bytes": d.memory_bytes - rep.device_peak_bytes}
    return rep


def _overrides(s2: Settings, s: Settings) -> dict:
    """The fields where ``s2`` differs from ``s``."""
    a, b = s2.to_dict(), s.to_dict()
    return {k: v for k, v in a.items() if b.get(k) != v}

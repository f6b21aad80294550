"""Make it fit: the changes that bring a design under a device's capacity, ranked by their price.

Every suggestion is a complete set of run settings (and, for a shorter sequence, one design
edit) that the engine estimated: re-estimating ``suggestion.settings`` gives ``peak_bytes``
exactly. Nothing here is a rule of thumb; the price says what the change costs besides memory:
recomputed FLOPs, a different optimizer's or precision's numerics, a smaller batch per step,
or other hardware.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field

from memdesigner.engine.devices import Device, all_devices
from memdesigner.engine.estimate import _resolve, estimate, largest_batch
from memdesigner.engine.settings import Settings
from memdesigner.model.analysis import analyze
from memdesigner.model.design import Design

# what each kind of change costs besides memory, for ranking (lower is cheaper)
_PRICE = {"checkpointing": 1.0, "amp": 1.5, "batch": 2.0, "sequence": 2.5, "momentum": 3.0, "sgd": 3.5,
          "bf16": 4.0, "device": 5.0, "zero1": 2.2, "zero2": 2.4, "zero3": 2.8, "gpus": 4.5,
          "offload": 3.2}
STAGES = ("ddp", "zero1", "zero2", "zero3")


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

    def to_dict(self) -> dict:
        return {"device": self.device, "capacity_bytes": self.capacity_bytes, "fits_as_given": self.fits_as_given,
                "device_peak_bytes": self.device_peak_bytes, "max_batch": self.max_batch,
                "suggestions": [s.to_dict() for s in self.suggestions]}


def _single_changes(s: Settings) -> list[tuple[str, dict, str, str]]:
    """(kind, settings overrides, label, price note) for every one-knob change that can lower the peak."""
    out = []
    if s.training:
        if not s.checkpointing:
            out.append(("checkpointing", {"checkpointing": True}, "activation checkpointing",
                        "checkpoint_sequential in sqrt(n) segments: the same result, the segments' forward runs "
                        "again in backward"))
        if not s.amp and s.dtype == "fp32":
            out.append(("amp", {"amp": True}, "mixed precision (AMP)",
                        "autocast: low-precision activations and matmuls, fp32 weights"))
        if s.optimizer in ("adam", "adamw"):
            out.append(("momentum", {"optimizer": "momentum"}, "optimizer SGD with momentum",
                        "one state tensor per weight instead of Adam's two; retune the learning rate"))
        if s.optimizer in ("adam", "adamw", "momentum"):
            out.append(("sgd", {"optimizer": "sgd"}, "optimizer SGD",
                        "no optimizer state; retune the learning rate"))
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


def _sharding(design: Design, s: Settings, dev: Device, an) -> list[Suggestion]:
    """A higher ZeRO stage on the same GPUs, or, on one GPU, zero3 over the fewest GPUs (2, 4, 8)
    that fit; the price is the extra communication per step."""
    if not s.training:
        return []
    out = []
    pbytes = None
    if s.gpus > 1 and s.strategy in STAGES:
        for st in STAGES[STAGES.index(s.strategy) + 1:]:
            if st == "zero1":
                continue  # zero2 shards the same state and the gradients too
            s2 = s.with_(strategy=st)
            rep = estimate(design, s2, device=dev, analysis=an)
            pbytes = pbytes or rep.params * (2 if s.dtype in ("fp16", "bf16") else 4)
            extra = _comm_bytes(st, s.gpus, pbytes) - _comm_bytes(s.strategy, s.gpus, pbytes)
            sug = _suggestion(rep, (st,), f"{st} (FSDP2 fully_shard) on the same {s.gpus} GPUs", s2, dev,
                              [f"{'parameters, ' if st == 'zero3' else ''}gradients and optimizer state sharded "
                               f"over {s.gpus} ranks; {max(0, extra)} more bytes received per rank per step"])
            sug.cost["communication_bytes"] = max(0, extra)
            out.append(sug)
    if s.strategy in ("zero2", "zero3") and s.offload == "none":
        s2 = s.with_(offload="params")
        rep = estimate(design, s2, device=dev, analysis=an)
        host = max(r.get("host_bytes", 0) for r in rep.per_rank)
        sug = _suggestion(rep, ("offload",), "CPU offload of the shards, gradients and optimizer (CPUOffloadPolicy)",
                          s2, dev, [f"{host} bytes of host RAM per rank; every all-gather copies the unit's shards "
                                    "to the device and every gradient shard goes back over PCIe; the optimizer "
                                    "step runs on the CPU"])
        sug.cost["host_bytes"] = host
        out.append(sug)
    elif s.gpus == 1:
        for n in (2, 4, 8):
            s2 = s.with_(gpus=n, strategy="zero3")
            rep = estimate(design, s2, device=dev, analysis=an)
            if rep.device["fits"] or n == 8:
                pbytes = rep.params * (2 if s.dtype in ("fp16", "bf16") else 4)
                comm = _comm_bytes("zero3", n, pbytes)
                sug = _suggestion(rep, ("gpus",), f"{n} GPUs with zero3 (FSDP2 fully_shard), batch {s.batch} per GPU",
                                  s2, dev, [f"{n} x {dev.name}; the global batch grows {n}x unless the per-GPU "
                                            f"batch shrinks; {comm} bytes received per rank per step"])
                sug.cost["communication_bytes"] = comm
                out.append(sug)
                break
    return out


def _sequence_input(design: Design, an) -> str | None:
    """The token input whose length is the sequence: an int64 Input with a 1-D per-sample shape."""
    for nid in an.order:
        node = design.nodes[nid]
        info = an.nodes[nid]
        if node.type == "Input" and info.ok and info.outputs and info.outputs[0].kind == "int64" \
                and len(info.outputs[0].shape) == 1:
            return nid
    return None


def _longest_sequence(design: Design, s: Settings, dev: Device, nid: str) -> tuple[int, Design] | None:
    """The longest sequence below the design's that fits, by bisection on the engine's peak."""
    length = int(design.nodes[nid].props["shape"][0])

    def trial(n):
        d = copy.deepcopy(design)
        d.nodes[nid].props = dict(d.nodes[nid].props, shape=[n])
        d.nodes[nid].rev += 1
        an = analyze(d)
        if not an.ok:
            return None, d
        return estimate(d, s, device=dev, analysis=an), d

    lo, hi = 0, length
    best = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        rep, d = trial(mid)
        if rep is not None and rep.device["fits"]:
            lo, best = mid, (mid, d)
        else:
            hi = mid
    return best


def make_it_fit(design: Design, settings: Settings | None = None, *, device, **kw) -> FitAdvice:
    """Rank the changes that make ``design`` fit ``device`` (a Device or an id)."""
    s, dev = _resolve(settings, device, kw)
    if dev is None:
        raise ValueError("device: make-it-fit needs a device")
    an = analyze(design)
    if not an.ok:
        raise ValueError(str(an.issues[0]))
    base = estimate(design, s, device=dev, analysis=an)
    out: list[Suggestion] = []
    singles = _single_changes(s)
    results = {}
    for kind, over, label, note in singles:
        s2 = s.with_(**over)
        rep = estimate(design, s2, device=dev, analysis=an)
        results[kind] = rep
        out.append(_suggestion(rep, (kind,), label, s2, dev, [note]))
    # useful combinations: two or three knobs where no part alone is enough
    for r in (2, 3):
        for combo in itertools.combinations(singles, r):
            kinds = [c[0] for c in combo]
            if {"sgd", "momentum"} <= set(kinds) or {"amp", "bf16"} <= set(kinds):
                continue
            if any(results.get(k) is not None and results[k].device["fits"] for k in kinds):
                continue
            over = {}
            for c in combo:
                over.update(c[1])
            try:
                s2 = s.with_(**over)
            except ValueError:
                continue
            rep = estimate(design, s2, device=dev, analysis=an)
            out.append(_suggestion(rep, kinds, " + ".join(c[2] for c in combo), s2, dev, [c[3] for c in combo]))
    out.extend(_sharding(design, s, dev, an))
    # a smaller batch per step
    if s.batch > 1:
        b = largest_batch(design, s, dev, an)
        if 0 < b < s.batch:
            s2 = s.with_(batch=b)
            rep = estimate(design, s2, device=dev, analysis=an)
            k = -(-s.batch // b)
            note = (f"batch {b} per step instead of {s.batch}" +
                    (f"; keeping the global batch needs {k} accumulation steps (gradient accumulation is not "
                     "modelled yet: its persistent gradients are not in this peak)" if s.training else ""))
            out.append(_suggestion(rep, ("batch",), f"batch {b} (the largest that fits)", s2, dev, [note]))
    # a shorter sequence for token models
    seq = _sequence_input(design, an)
    if seq is not None:
        best = _longest_sequence(design, s, dev, seq)
        if best is not None:
            n, d2 = best
            rep = estimate(d2, s, device=dev)
            out.append(_suggestion(rep, ("sequence",), f"sequence length {n} (the longest that fits)", s, dev,
                                   [f"input {seq!r}: {n} tokens instead of "
                                    f"{design.nodes[seq].props['shape'][0]}"],
                                   design_change={"node": seq, "prop": "shape", "value": [n]}))
    # other hardware: the smallest shipped or user device of the same kind that fits as given
    bigger = sorted((d for d in all_devices() if d.kind == dev.kind and d.memory_bytes > dev.memory_bytes),
                    key=lambda d: d.memory_bytes)
    for d in bigger:
        rep = estimate(design, s, device=d, analysis=an)
        if rep.device["fits"]:
            out.append(_suggestion(rep, ("device",), f"a device with more memory: {d.name}", s, d,
                                   [f"the smallest {d.kind} profile ({d.memory_bytes / 1e9:.0f} GB) that fits the design as given"]))
            break
    # a change that does not lower the peak is no suggestion
    out = [g for g in out if g.fits or g.device_peak_bytes < base.device_peak_bytes]
    out.sort(key=lambda g: (not g.fits, g.price, g.device_peak_bytes))
    mb = largest_batch(design, s, dev, an)
    return FitAdvice(device=dev.id, capacity_bytes=dev.memory_bytes, fits_as_given=base.device["fits"],
                     device_peak_bytes=base.device_peak_bytes, max_batch=mb, suggestions=out)

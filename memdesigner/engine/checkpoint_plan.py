"""Selective activation checkpointing, planned: which layers to recompute so that a training step
fits a memory budget at the least recomputation.

The candidates ("units") are the design's layers as a person wraps them in
``torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)``: a repeated layer
``<prefix>.<k>`` as a whole (the way HF checkpoints a decoder layer), else each node. The
engine runs a chosen set exactly as it runs ``checkpoint_layers`` (non-reentrant: the checkpoint
keeps the layer's inputs, backward reruns its forward), so ``Settings(checkpoint_units=...)``
is estimated like any other setting.

PyTorch's own selective-checkpointing memory-budget solver
(torch/_functorch/partitioners.py ``_optimize_runtime_with_given_memory``, knapsack.py) treats the
memory of what is saved as additive and solves a 0/1 knapsack (greedy, DP or ILP). We solve the
same knapsack exactly (dynamic programming over memory buckets, savings rounded down so the chosen
set really meets the requirement), but each layer's saving is what the engine measures when that
layer alone is checkpointed (one run per distinct layer: repeated layers alike in structure and
shapes share one), and the plan is then re-simulated: where additivity was optimistic the
shortfall is added to the requirement and the knapsack solved again, and layers the plan turns
out not to need are dropped while it still fits.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from memdesigner.engine import finetune
from memdesigner.engine.checkpoint_units import SKIP_TYPES, unit_segments, units  # noqa: F401 (unit_segments: re-exported)
from memdesigner.engine.estimate import estimate
from memdesigner.model.analysis import analyze
from memdesigner.model.blocks import for_engine


def knapsack_min_cost(weights: list[int], costs: list[int], need: int, buckets: int = 4096,
                      exact_below: int = 1 << 16) -> list[int] | None:
    """Indices of a subset with sum(weights) >= need at the least sum(costs): the 0/1 knapsack by
    dynamic programming over ``buckets`` memory buckets. Weights are rounded down to buckets, so the
    subset found really meets ``need``; None when even all of them do not. A need of at most
    ``exact_below`` is solved on the weights themselves (one bucket per unit)."""
    if need <= 0:
        return []
    if sum(weights) < need:
        return None
    b = need if need <= exact_below else buckets
    w = [min(b, wi * b // need) for wi in weights]
    inf = float("inf")
    dp = np.full(b + 1, inf)
    dp[0] = 0.0
    take = np.zeros((len(w), b + 1), dtype=bool)
    pred_top = [0] * len(w)  # where the capped bucket b was reached from
    for i, (wi, ci) in enumerate(zip(w, costs)):
        cand = np.full(b + 1, inf)
        if wi < b:
            cand[wi:b] = dp[:b - wi] + ci
            j = int(np.argmin(dp[b - wi:])) + b - wi
        else:
            j = int(np.argmin(dp))
        cand[b] = dp[j] + ci
        pred_top[i] = j
        better = cand < dp
        take[i] = better
        dp = np.where(better, cand, dp)
    if not np.isfinite(dp[b]):
        return None
    chosen, j = [], b
    for i in range(len(w) - 1, -1, -1):
        if take[i, j]:
            chosen.append(i)
            j = pred_top[i] if j == b else j - w[i]
    return sorted(chosen)


def _units_of(design, an) -> dict[str, list[list[str]]]:
    """``units`` of a design, kept on its analysis: every plan over one analysis (make-it-fit plans
    on top of several changes) reads the same layers."""
    memo = an.__dict__.get("_checkpoint_units")
    if memo is not None and memo[0] is design and memo[1] == len(design.edges):
        return memo[2]
    in_edges: dict = {}
    for e in design.edges:
        in_edges.setdefault(e.dst, []).append(e)
    found = units(an.order, design.nodes, in_edges)
    an.__dict__["_checkpoint_units"] = (design, len(design.edges), found)
    return found


@dataclass
class CheckpointPlan:
    units: tuple  # the layers to checkpoint, in execution order
    report: object  # the engine's Report for the plan's settings (verified)
    recompute_flops: int  # forward FLOPs run again in backward (the report's)
    fits: bool
    candidates: int  # layers considered
    runs: int  # engine runs the planning took
    method: str
    gains: dict | None = None  # layer -> (saving, recompute FLOPs) as measured


class _Planner:
    def __init__(self, design, settings, dev, analysis=None):
        if design.blocks:
            design, analysis = for_engine(design, analysis)
        self.design = design
        self.an = analysis or analyze(design)
        self.s = settings.with_(checkpointing=False, checkpoint_layers=False, checkpoint_units=())
        self.given = (self.design, self.an, self.s)  # what every trial (and so the plan) is estimated with
        if finetune.active(self.s):
            # LoRA / QLoRA / frozen parts: the layers are those of the rewritten design the engine
            # simulates (finetune.prepare keeps it on the analysis: the trials reuse it)
            self.design, self.an, _ = finetune.prepare(self.design, self.s, self.an)
        self.dev = dev
        self.cap = dev.memory_bytes
        self._estimate = estimate
        self.runs = 0
        self._cache: dict[tuple, object] = {}
        found = _units_of(self.design, self.an)
        self.names = list(found)
        self.runs_of = found

    def run(self, names) -> object:
        key = tuple(n for n in self.names if n in set(names))
        if key not in self._cache:
            self.runs += 1
            d, an, s = self.given
            self._cache[key] = self._estimate(d, s.with_(checkpoint_units=key), device=self.dev, analysis=an)
        return self._cache[key]

    def fits(self, rep) -> bool:
        return rep.device_peak_bytes <= self.cap

    def signature(self, name) -> tuple:
        sig = []
        for run in self.runs_of[name]:
            for nid in run:
                info = self.an.nodes[nid]
                sig.append((self.design.nodes[nid].type, tuple((o.shape, o.kind) for o in info.outputs),
                            tuple(p.numel for p in info.params)))
        return tuple(sig)

    def recording(self) -> set:
        """The ops that may record for backward (autograd's rule: an input that requires grad or a
        parameter that does; every recording op's outputs taken to require grad, so the set is
        never too small). A pipeline stage's received inputs require grad."""
        an, nodes = self.an, self.design.nodes
        inputs_rg = getattr(self.design, "inputs_require_grad", False)
        in_src: dict = {}
        for e in self.design.edges:
            in_src.setdefault(e.dst, []).append(e.src)
        rg = set()
        for nid in an.order:
            info = an.nodes[nid]
            if nodes[nid].type == "Input":
                if inputs_rg:
                    rg.add(nid)
                continue
            if any(p.requires_grad for p in info.params) or any(src in rg for src in in_src.get(nid, ())):
                rg.add(nid)
        return rg

    @staticmethod
    def fb_peak(rep) -> int:
        """The forward/backward peak: what checkpointing lowers (the optimizer step's is untouched)."""
        return max(rep.phase_peaks.get("forward", 0), rep.phase_peaks.get("backward", 0))

    def measure(self, gains: dict | None = None):
        """(saving, recompute FLOPs) of each layer checkpointed alone: the drop of the forward/
        backward peak, which no optimizer change moves; alike layers measured once."""
        base = self.run(())
        if gains is not None and set(gains) == set(self.names):
            return base, gains
        fb = self.fb_peak(base)
        by_sig: dict[tuple, tuple] = {}
        out = {}
        recording = self.recording()
        for name in self.names:
            runs = self.runs_of[name]
            if not any(nid in recording for run in runs for nid in run):
                # no op of it records for backward: its checkpoint keeps and recomputes nothing that
                # backward would need (the run would be the base run), so it saves nothing
                out[name] = (0, sum(self.an.nodes[n].flops for run in runs for n in run) * self.s.batch)
                continue
            sig = self.signature(name)
            if sig not in by_sig:
                rep = self.run((name,))
                by_sig[sig] = (fb - self.fb_peak(rep), rep.recompute_flops)
            out[name] = by_sig[sig]
        return base, out

    def result(self, names, method) -> CheckpointPlan:
        rep = self.run(names)
        key = tuple(n for n in self.names if n in set(names))
        return CheckpointPlan(key, rep, rep.recompute_flops, self.fits(rep), len(self.names), self.runs, method)

    def prune(self, chosen: list, gain: dict, tries: int = 4) -> list:
        """Drop the most expensive layers the plan does not need, while it still fits: only those
        whose measured saving the plan's headroom could spare are tried."""
        headroom = self.cap - self.run(chosen).device_peak_bytes
        for name in sorted(chosen, key=lambda n: (-gain[n][1], -self.names.index(n))):
            if tries <= 0:
                break
            if gain[name][0] > headroom:
                continue
            tries -= 1
            trial = [n for n in chosen if n != name]
            rep = self.run(trial)
            if self.fits(rep):
                chosen, headroom = trial, self.cap - rep.device_peak_bytes
        return chosen


def plan_checkpoints(design, settings, dev, analysis=None, method: str = "knapsack", base=None,
                     gains: dict | None = None, runs: list | None = None) -> CheckpointPlan | None:
    """The cheapest set of layers to checkpoint so that ``design`` fits ``dev`` (a Device) with
    ``settings`` (training); None when it fits without, or when no checkpointing can lower the
    peak (it is in the optimizer step). When no set fits, the plan that checkpoints every layer
    that helps (``fits`` False). ``base``: the report without checkpointing, when the caller has
    it; ``gains``: the savings a plan for the same activations measured (``plan.gains``);
    ``runs``: a list the number of engine runs is appended to."""
    if not settings.training:
        return None
    p = _Planner(design, settings, dev, analysis)
    if base is not None and not (settings.checkpointing or settings.checkpoint_layers or settings.checkpoint_units):
        p._cache[()] = base
    try:
        return _plan(p, method, gains)
    finally:
        if runs is not None:
            runs.append(p.runs)


def _plan(p: _Planner, method: str, gains: dict | None) -> CheckpointPlan | None:
    if not p.names:
        return None
    base = p.run(())
    if p.fits(base):
        return None
    if base.phase_peaks.get("optimizer_step", 0) + base.device_peak_bytes - base.peak_bytes > p.cap:
        return None  # the optimizer step's peak alone is too big: no recomputation helps
    base, gain = p.measure(gains)
    fb = p.fb_peak(base)
    need = base.device_peak_bytes - p.cap - (base.peak_bytes - fb)  # what the forward/backward peak must lose
    if fb < base.peak_bytes and base.device_peak_bytes - (base.peak_bytes - fb) <= p.cap:
        need = 0
    useful = [n for n in p.names if gain[n][0] > 0]
    if not useful:
        return None
    if method == "greedy":
        plan = _greedy(p, useful, gain, need)
    else:
        plan = _knapsack(p, useful, gain, need)
    plan.gains = gain
    return plan


def _knapsack(p: _Planner, useful: list, gain: dict, need: int) -> CheckpointPlan:
    extra = 0
    chosen = None
    for _ in range(5):
        idx = knapsack_min_cost([gain[n][0] for n in useful], [gain[n][1] for n in useful], need + extra)
        if idx is None:
            break
        trial = [useful[i] for i in idx]
        rep = p.run(trial)
        if p.fits(rep):
            chosen = trial
            break
        extra += rep.device_peak_bytes - p.cap  # additivity was optimistic: ask for the shortfall too
    if chosen is None and p.fits(p.run(useful)):
        chosen = useful
    if chosen is None:
        return p.result(useful, "knapsack")
    return p.result(p.prune(chosen, gain), "knapsack")


def _greedy(p: _Planner, useful: list, gain: dict, need: int) -> CheckpointPlan:
    """torch's greedy_knapsack: layers by saving per recomputed FLOP, added until the plan fits."""
    ranked = sorted(useful, key=lambda n: -gain[n][0] / gain[n][1] if gain[n][1] else -float("inf"))
    chosen, total = [], 0
    for n in ranked:
        chosen.append(n)
        total += gain[n][0]
        if total >= need and p.fits(p.run(chosen)):
            break
    return p.result(chosen, "greedy")


def brute_force_plan(design, settings, dev, analysis=None, limit: int = 14) -> CheckpointPlan | None:
    """Every subset of layers simulated: the fitting one with the least recompute (for checking the
    planner on small designs; 2^n engine runs)."""
    p = _Planner(design, settings, dev, analysis)
    if len(p.names) > limit:
        raise ValueError(f"brute force: {len(p.names)} layers is more than {limit}")
    best = None
    for r in range(len(p.names) + 1):
        for combo in itertools.combinations(p.names, r):
            rep = p.run(combo)
            if p.fits(rep) and (best is None or rep.recompute_flops < best[1]):
                best = (combo, rep.recompute_flops)
    return p.result(best[0], "brute force") if best else None

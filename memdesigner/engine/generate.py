"""Generation: the prefill of the prompt, then decode steps of one token with the KV cache, as
``model.generate(ids, attention_mask=mask, max_new_tokens=N, do_sample=False, use_cache=True)``
runs them in transformers (generation/utils.py ``_sample``).

Every step is one run of the ordinary simulation on a copy of the design whose Input carries the
step's tokens and whose KVCache nodes know how many tokens are cached. What lives across steps is
carried into the next run: the cache (a dynamic cache is rebuilt by ``torch.cat`` in each layer,
so the old and the new cache of a layer coexist for a moment; a static cache is allocated in
full at the prefill and written in place), the growing ``input_ids`` and ``attention_mask``
(``torch.cat`` with the new token each step; the caller's originals stay alive too) and the fp32
copy of the last step's next-token logits, which is alive while the next forward runs. The prefill
computes the head on the last position only (``logits_to_keep=1``).

Every size grows with the cached length, so the last decode step is the highest of the decode
steps; long generations simulate a sample of decode steps for the timeline, always the last.
"""

from __future__ import annotations

from dataclasses import replace

from memdesigner.engine.devices import Device
from memdesigner.engine.report import Report
from memdesigner.engine.search import largest_fitting
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import CATS, A, Event, Simulation
from memdesigner.engine.step import device_peak, resolve_settings, run_step
from memdesigner.model.analysis import analyze
from memdesigner.model.blocks import expand
from memdesigner.model.design import Design, Edge
from memdesigner.model.registry import Issue
from memdesigner.units import DTYPE_ALIASES

TIMELINE_STEPS = 16  # decode steps simulated for the timeline (the first and the last among them)
HEAD = "lm_head"  # the HF module path of a causal LM's head (logits_to_keep applies to it)


class GenerateError(ValueError):
    """A design that cannot be generated from (one line for the user)."""


def _expanded(design: Design) -> Design:
    return expand(design)


def token_input(design: Design) -> str:
    ids = [n.id for n in design.nodes.values() if n.type == "Input" and n.props.get("dtype") == "int64"]
    if len(ids) != 1:
        raise GenerateError("generate: the design needs exactly one Input of int64 token ids (the prompt)")
    return ids[0]


def cache_nodes(design: Design) -> list[str]:
    return [n.id for n in design.nodes.values() if n.type == "KVCache"]


def step_design(design: Design, *, tokens: int, past: int, cache: str, max_len: int = 0, kv_dtype: str = "auto",
                keep_last: bool = False) -> Design:
    """A copy of ``design`` for one step: ``tokens`` new tokens per sequence, ``past`` cached.
    keep_last: the head sees the last position only (generate's logits_to_keep=1)."""
    d = Design(name=design.name, channels_last=design.channels_last)
    tid = token_input(design)
    for n in design.nodes.values():
        props = dict(n.props)
        if n.id == tid:
            props["shape"] = (tokens,) + tuple(props["shape"][1:])
        elif n.type == "KVCache":
            props.update(past=past, cache=cache, max_len=max_len, dtype=kv_dtype)
        elif n.type == "AbsolutePositions":
            props["batched"] = True  # prepare_inputs_for_generation: attention_mask.cumsum(-1) - 1
            props["offset"] = past
        d.nodes[n.id] = replace(n, props=props, tied=dict(n.tied))
    edges = list(design.edges)
    head = next((n for n in design.nodes.values() if n.name == HEAD or n.id == HEAD), None)
    if keep_last and head is not None and tokens > 1:
        cut = "lm_head.logits_to_keep"
        d.add_node("Slice", {"dim": 1, "start": tokens - 1, "end": tokens}, id=cut, name=cut, scope=head.scope)
        edges = [Edge(e.src, cut, e.src_port, 0) if e.dst == head.id else e for e in edges]
        edges.append(Edge(cut, head.id, 0, 0))
        order = list(d.nodes)
        order.remove(cut)
        order.insert(order.index(head.id), cut)
        d.nodes = {k: d.nodes[k] for k in order}
    d.edges = edges
    return d


def with_cache(design: Design, cache: str = "dynamic") -> Design:
    """The design with every KVCache set to ``cache`` (no past): a plain forward with
    ``use_cache=True``, whose returned cache holds every layer's keys and values."""
    d = _expanded(design)
    d = step_design(d, tokens=d.nodes[token_input(d)].props["shape"][0], past=0, cache=cache)
    for n in d.nodes.values():
        if n.type == "AbsolutePositions":
            n.props["batched"] = False  # a plain forward makes position ids (1, tokens)
    return d


def _vocab(design: Design, an) -> int:
    head = next((n for n in design.nodes.values() if n.name == HEAD or n.id == HEAD), None)
    if head is not None and an.nodes[head.id].ok:
        return an.nodes[head.id].outputs[0].shape[-1]
    return 0


def _run_step(d: Design, settings: Settings, rounding: int, carry: list):
    an = analyze(d)
    if not an.ok:
        first = an.issues[0] if an.issues else None
        raise GenerateError(f"generate: {first}" if first else "generate: the design has errors")
    sim = Simulation(d, an, settings, rounding, carry=carry).run()
    return sim, an


class _Plan:
    def __init__(self, design: Design, settings: Settings):
        self.design = _expanded(design)
        self.tid = token_input(self.design)
        self.caches = cache_nodes(self.design)
        if not self.caches:
            raise GenerateError("generate: the design has no KVCache nodes (import the model with "
                                "`memdesigner import hf` to get one per attention layer)")
        self.prompt = self.design.nodes[self.tid].props["shape"][0]
        self.settings = settings
        self.new = settings.new_tokens
        self.max_len = self.prompt + self.new - 1 if settings.kv_cache == "static" else 0


def _steps(plan: _Plan, sample: bool) -> list[int]:
    """Decode steps k = 1 .. new-1 to simulate (k tokens generated before the step)."""
    n = plan.new - 1
    if n <= 0:
        return []
    if not sample or n <= TIMELINE_STEPS:
        return list(range(1, n + 1))
    picks = {1 + round(i * (n - 1) / (TIMELINE_STEPS - 1)) for i in range(TIMELINE_STEPS)}
    return sorted(picks)


def simulate_generate(plan: _Plan, rounding: int, *, sample: bool = True, peak_only: bool = False):
    """[(phase, step, Simulation, Analysis)] for the prefill and the decode steps."""
    s = plan.settings.with_(mode="inference")
    b = s.batch
    i64 = 8
    ids_item = b * i64
    kvd = plan.settings.kv_dtype
    out = []
    d0 = step_design(plan.design, tokens=plan.prompt, past=0, cache=plan.settings.kv_cache, max_len=plan.max_len,
                     kv_dtype=kvd, keep_last=True)
    user = [(None, plan.prompt * ids_item, "attention_mask (the caller's)"),
            (None, plan.prompt * ids_item, "position_ids (cumsum of the mask, masked_fill)"),
            (None, plan.prompt * ids_item, "a copy of the prompt's ids kept by generate")]
    sim, an = _run_step(d0, s, rounding, user)
    vocab = _vocab(d0, an)
    _sample_moment(sim, b * vocab * 4)
    out.append(("prefill", 0, sim, an))
    persisted = sim.persisted
    steps = _steps(plan, sample)
    if peak_only and steps:
        steps = [steps[-1]]
    prev_k = 0
    for k in steps:
        # the cache after k - 1 decode steps (a sampled step scales the sizes of the last one run)
        total = plan.prompt + k - 1
        carry = list(user)
        carry += [(None, plan.prompt * ids_item, "input_ids (the caller's)"),
                  (None, (plan.prompt + k) * ids_item, "input_ids (grown by torch.cat)"),
                  (None, (plan.prompt + k) * ids_item, "attention_mask (grown by torch.cat)"),
                  (None, b * vocab * 4, "next_token_logits of the previous step (fp32 copy)")]
        for nid in plan.caches:
            sizes = persisted.get(nid, [])
            for j, nb in enumerate(sizes):
                if plan.settings.kv_cache == "dynamic" and prev_k != k - 1:
                    nb = nb // (plan.prompt + prev_k) * total if (plan.prompt + prev_k) else nb
                label = ("keys", "values")[j % 2] + " cache (previous step)"
                carry.append((nid if plan.settings.kv_cache == "dynamic" else None, nb, label))
        dk = step_design(plan.design, tokens=1, past=total, cache=plan.settings.kv_cache, max_len=plan.max_len,
                         kv_dtype=kvd)
        sim, an = _run_step(dk, s, rounding, carry)
        _sample_moment(sim, b * vocab * 4)
        out.append(("decode", k, sim, an))
        if plan.settings.kv_cache == "dynamic":
            persisted = sim.persisted
            prev_k = k
    return out


def _sample_moment(sim: Simulation, nbytes: int) -> None:
    """``outputs.logits[:, -1].to(copy=True, dtype=float32)`` while this step's logits and the
    previous step's copy are alive."""
    mem = sim.mem
    mem.alloc(nbytes, A, 1, "next_token_logits (fp32 copy)")
    mem.event("forward", None, "next-token logits (fp32 copy)")


def _peak(runs) -> tuple[int, int, tuple, str, str | None]:
    best = max(runs, key=lambda r: r[2].mem.peak)
    phase, k, sim, _ = best
    at = sim.mem.peak_at or (None, None)
    return sim.mem.peak, sim.mem.rpeak, sim.mem.peak_by, phase, at[1]


def generate(design: Design, settings: Settings | None = None, *, device=None, max_batch: bool = False,
             max_context: bool = False, **kw) -> Report:
    """The report of a whole generation: the peak over the prefill and every decode step; the
    timeline holds the prefill and the decode steps (each decode step shown as its peak moment,
    the last one in full)."""
    settings, dev = resolve_settings(settings, device, kw)
    settings = settings.with_(mode="generate")
    if dev is not None and settings.backend != dev.kind:
        settings = settings.with_(backend=dev.kind)
    plan = _Plan(design, settings)
    rounding = dev.allocator_rounding if dev is not None else (512 if settings.backend == "cuda" else 1)
    runs = simulate_generate(plan, rounding)
    d0, an0 = runs[0][2].design, runs[0][3]
    rep = run_step(d0, an0, settings.with_(mode="inference"), dev)
    peak, rpeak, by, phase, layer = _peak(runs)
    events = []
    for i, (ph, k, sim, _) in enumerate(runs):
        evs = sim.events
        if ph == "decode" and i != len(runs) - 1:
            top = max(evs, key=lambda e: e.bytes)
            evs = [top]
        for e in evs:
            label = e.label if ph == "prefill" else f"step {k}: {e.label}"
            events.append(Event(ph, e.node, label, e.bytes, e.by_category, e.device_bytes))
    rep.settings = settings.to_dict()
    rep.peak_bytes = peak
    rep.device_peak_bytes = device_peak(rpeak, dev)
    rep.phase_peaks = {"prefill": runs[0][2].mem.peak,
                       "decode": max((r[2].mem.peak for r in runs[1:]), default=0)}
    rep.at_peak = dict(zip(CATS, by))
    rep.peak_phase = phase
    rep.peak_layer = layer
    rep.timeline = events
    if dev is not None and rep.device is not None:
        rep.device["fits"] = rep.device_peak_bytes <= dev.memory_bytes
        rep.device["headroom_bytes"] = dev.memory_bytes - rep.device_peak_bytes
    cache_bytes = sum(sum(v) for v in runs[-1][2].persisted.values())
    if settings.kv_cache == "static":
        cache_bytes = sum(sum(v) for v in runs[0][2].persisted.values())
    rep.generate = {"prompt": plan.prompt, "new_tokens": plan.new, "kv_cache": settings.kv_cache,
                    "kv_cache_bytes": cache_bytes, "decode_steps": plan.new - 1,
                    "steps_simulated": [k for _, k, _, _ in runs]}
    if dev is not None and max_batch:
        rep.max_batch = largest_generate_batch(design, settings, dev)
    if dev is not None and max_context:
        rep.generate["max_context"] = longest_context(design, settings, dev)
    return rep


def generate_or_issue(design: Design, settings: Settings, dev: Device | None, max_batch: bool = False) -> Report:
    """generate(), or the inference report of the design with the reason as an issue (estimate's
    generate mode: the window shows it like any other error)."""
    try:
        return generate(design, settings, device=dev, max_batch=max_batch)
    except GenerateError as err:
        s = settings.with_(mode="inference")
        rep = run_step(design, analyze(design), s, dev)
        rep.issues.append(Issue("", "mode", str(err)))
        rep.settings = settings.to_dict()
        return rep


def generate_peak(design: Design, settings: Settings, dev: Device | None) -> int:
    """The device peak of a generation (prefill and the last decode step only)."""
    plan = _Plan(design, settings)
    rounding = dev.allocator_rounding if dev is not None else (512 if settings.backend == "cuda" else 1)
    runs = simulate_generate(plan, rounding, peak_only=True)
    return device_peak(max(r[2].mem.rpeak for r in runs), dev)


def generate_sweep(design: Design, settings: Settings, dev: Device | None, is_stale=lambda: False):
    """(batches, device peaks, largest batch or None) for the window's peak-vs-batch view: powers
    of two up to twice the batch (or the largest that fits), each a whole generation; None when a
    newer edit made it pointless or the design cannot be generated from."""
    try:
        best = largest_generate_batch(design, settings, dev) if dev is not None else None
        top = max(2 * settings.batch, 2 * (best or 1), 8)
        batches, b = [], 1
        while b <= top:
            batches.append(b)
            b *= 2
        batches = sorted(set(batches) | {settings.batch} | ({best, best + 1} if best else set()))
        peaks = []
        for b in batches:
            if is_stale():
                return None
            peaks.append(generate_peak(design, settings.with_(batch=b), dev))
    except GenerateError:
        return None
    return batches, peaks, best


def largest_generate_batch(design: Design, settings: Settings, dev: Device, limit: int = 1 << 30) -> int:
    """The most concurrent sequences (batch) whose generation fits the device (exact: a search
    over whole generate estimates; 0 when one sequence does not fit)."""
    return largest_fitting(lambda b: generate_peak(design, settings.with_(batch=b), dev) <= dev.memory_bytes, 1, limit)


class _Stale(Exception):
    pass


def longest_context(design: Design, settings: Settings, dev: Device, limit: int = 1 << 20,
                    is_stale=lambda: False) -> int | None:
    """The longest context (prompt + new tokens) whose generation fits the device, new tokens as
    set; 0 when even a one-token prompt does not fit or the design's positions run out. None when
    ``is_stale()`` turned true between estimates (the window's newer edit: seconds on 8B models)."""
    d = _expanded(design)

    def fits(prompt: int) -> bool:
        if is_stale():
            raise _Stale
        probe = step_design(d, tokens=prompt, past=0, cache="none")
        try:
            return generate_peak(probe, settings, dev) <= dev.memory_bytes
        except GenerateError:  # e.g. past the model's positions
            return False

    try:
        best = largest_fitting(fits, 1, limit)
    except _Stale:
        return None
    return best + settings.new_tokens if best > 0 else 0


__all__ = ["generate", "generate_peak", "largest_generate_batch", "longest_context", "step_design", "with_cache",
           "GenerateError", "DTYPE_ALIASES"]

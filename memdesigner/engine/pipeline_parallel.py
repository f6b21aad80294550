"""Pipeline parallelism, per stage: torch.distributed.pipelining's ``PipelineStage`` +
``Schedule1F1B`` (docs/memory-model.md, "Pipeline parallel"; torch 2.13
``torch/distributed/pipelining/stage.py``, ``schedules.py``).

- **Stages.** The design's top-level units (a child module: the first scope component that is an
  item of a container, ``layers.0``, else the first one; each layer of a design drawn by hand) are cut
  into ``P`` contiguous stages of about equal **trainable parameter counts**: a stage closes once
  the parameters so far reach ``s/P`` of the total. Ops outside every unit join the stage before.
- **Micro-batches.** ``--batch`` is the micro-batch; each step runs ``M`` of them. Stage ``s`` runs
  1F1B: at most ``k = min(P - s, M)`` micro-batches are in flight (forward done, backward not yet),
  so the first stage holds ``min(P, M)``.
- **What a stage holds** beyond one micro-batch's step (simulated on the stage's own design, with
  the gradients of earlier micro-batches present from the start: ``grad_accum``):
  * the other in-flight micro-batches' activations (what one micro-batch leaves alive from its
    forward to its backward: its saved tensors and its cached output): during backward ``i``,
    ``min(i + k - 1, M - 1) - i`` of them; the highest moment over ``i >= 1`` (gradients of earlier
    micro-batches present) and backward 0 (``k - 1`` in flight, no gradients yet) is the stage's;
  * two sent tensors that outlive their use: warm-up micro-batch ``k - 2``'s output (``send_work``
    keeps its send's Work to the end of the step) and the previous micro-batch's input gradient
    (``bwd_sends`` is rebound only after the next backward);
  * the receive buffers the stage allocates once for every micro-batch (``_make_tensor_from_meta``
    per chunk): the inputs of a stage after the first (``M x`` its input), the output gradients of
    a stage before the last (``M x`` its output);
  * stage 0 holds the whole batch ``x`` (``M`` micro-batches; the schedule's chunks are views);
  * the last stage keeps every micro-batch's output and loss to the end of the step, and returns
    their ``torch.cat`` (``merge_chunks``), made while the chunks still exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memdesigner.engine.simulate import INFLIGHT, Simulation
from memdesigner.model.analysis import analyze
from memdesigner.model.design import Design, Edge, Node
from memdesigner.units import DTYPE_BYTES

_ITEM = re.compile(r"(^|\.)\d+$")


def unit_of(scope: str, nid: str) -> str:
    """The top-level unit an op belongs to ("" for root-level ops of an imported model)."""
    if not scope:
        return ""
    parts = scope.split("/")
    for p in parts:
        if _ITEM.search(p):
            return p
    return parts[0]


@dataclass
class Stage:
    index: int
    nodes: list  # node ids in execution order
    units: list  # unit names, in order
    params: int = 0


def split_stages(design, an, P: int) -> list[Stage]:
    """Contiguous stages of about equal trainable parameter counts (module docstring)."""
    order = [n for n in an.order if an.nodes[n].ok]
    hand = not any(design.nodes[n].scope for n in order)
    units: list[str] = []
    unit_nodes: dict[str, list] = {}
    unit_params: dict[str, int] = {}
    cur = None
    for nid in order:
        node = design.nodes[nid]
        u = nid if hand else unit_of(node.scope, nid)
        if node.type == "Input":
            u = cur if cur is not None else "<input>"
        if u == "" and cur is not None:
            u = cur  # root-level ops join the unit before them
        if u not in unit_nodes:
            units.append(u)
            unit_nodes[u] = []
            unit_params[u] = 0
        unit_nodes[u].append(nid)
        unit_params[u] += sum(p.numel for p in an.nodes[nid].params if p.trainable and p.name not in node.tied)
        cur = u
    total = sum(unit_params.values()) or 1
    stages = [Stage(0, [], [])]
    acc = 0
    for i, u in enumerate(units):
        st = stages[-1]
        st.units.append(u)
        st.nodes.extend(unit_nodes[u])
        st.params += unit_params[u]
        acc += unit_params[u]
        left = len(units) - i - 1
        if len(stages) < P and acc * P >= total * len(stages) and left >= P - len(stages) and unit_params[u]:
            stages.append(Stage(len(stages), [], []))
    if not stages[-1].nodes:
        stages.pop()
    if len(stages) < P:
        n = sum(1 for u in units if unit_params[u])
        raise ValueError(f"pipeline_parallel: {P} stages, but the design splits into only {len(stages)} "
                         f"({n} top-level units with parameters)")
    return stages


def stage_design(design, an, stages: list[Stage], s: int) -> tuple[Design, int, int]:
    """The design stage ``s`` runs: its ops, an Input per value it receives, its values that later
    stages read marked as outputs. Returns (design, received bytes per sample, sent bytes per sample)."""
    mine = set(stages[s].nodes)
    d = Design(f"{design.name}.stage{s}", design.channels_last)
    recv: dict = {}
    sent: set = set()
    edges = []
    def elems(key):
        o = an.nodes[key[0]].outputs[key[1]]
        n = 1
        for x in o.shape:
            n *= x
        return n, o

    recv_bytes = sent_bytes = 0
    for e in design.edges:
        if e.dst in mine and e.src not in mine:
            key = (e.src, e.src_port)
            if key not in recv:
                n, o = elems(key)
                iid = f"{e.src}.recv{e.src_port}"
                recv[key] = iid
                kind = "int64" if o.kind == "int64" else "float"
                recv_bytes += n * (8 if kind == "int64" else 4)
                d.nodes[iid] = Node(iid, "Input", iid, {"shape": tuple(o.shape), "dtype": kind})
            edges.append(Edge(recv[key], e.dst, 0, e.dst_port))
        elif e.src in mine and e.dst not in mine:
            key = (e.src, e.src_port)
            if key not in sent:
                sent.add(key)
                sent_bytes += elems(key)[0] * DTYPE_BYTES["float32"]
        elif e.src in mine and e.dst in mine:
            edges.append(e)
    for nid in stages[s].nodes:
        n = design.nodes[nid]
        d.nodes[nid] = Node(n.id, n.type, n.name, dict(n.props), n.pos, n.bits, scope=n.scope,
                            keep_until=n.keep_until if n.keep_until in mine else "", tied=dict(n.tied),
                            fused=n.fused, layout=n.layout, output=n.output or any(k[0] == nid for k in sent),
                            trainable=n.trainable)
    d.edges = edges
    return d, recv_bytes, sent_bytes


def in_flight(P: int, M: int, s: int) -> int:
    """1F1B: micro-batches stage ``s`` holds at once (forward done, backward pending)."""
    return min(P - s, M)


def run_stages(design, an, settings, rounding, run_ranks):
    """(busiest stage's simulation, per_rank over every stage) with global rank =
    stage x (dp x tp) + the stage's own rank."""
    P, M = settings.pipeline_parallel, settings.micro_batches
    stages = split_stages(design, an, P)
    st_settings = settings.with_(grad_accum=max(settings.grad_accum, 2)) if M > 1 and settings.training else settings
    per_rank, best, rows, events = [], None, {}, {}
    for s in range(P):
        d, recv_pb, sent_pb = stage_design(design, an, stages, s)
        d.inputs_require_grad = s > 0  # PipelineStage receives activations with requires_grad_()
        a = analyze(d)
        B = settings.batch
        # what one micro-batch leaves alive from forward to backward: live at the end of its
        # forward minus live at its start, plus its input (a stage input is its receive buffer)
        probe = Simulation(d, a, settings, rounding, rank=0).run()
        held = max(0, probe.fwd_end_bytes - probe.base_bytes - _input_bytes(a, d, B)) if settings.training else 0
        k = in_flight(P, M, s) if settings.training else 1
        base = []  # allocated once per step and kept
        if s > 0 and M > 1:  # receive buffers for every micro-batch; the stage's Input is one of them
            base.append((None, (M - 1) * recv_pb * B, "receive buffers of the other micro-batches"))
        if s == 0 and M > 1:
            base.append((None, (M - 1) * _input_bytes(a, d, B), "the rest of the batch (M micro-batches)"))
        if s < P - 1 and settings.training and M > 1:
            # the simulation's own output gradient (MeanBackward0's) stands for the current one
            base.append((None, (M - 1) * sent_pb * B, "output-gradient receive buffers of the other micro-batches"))
        if s == P - 1 and M > 1:  # the schedule keeps every micro-batch's output (output_chunks) and loss
            base.append((None, (M - 1) * (_output_bytes(a, d, B) + 4), "earlier micro-batches' outputs and losses"))
        # backward i >= 1 (earlier gradients present): forwards 0 .. min(i + k - 1, M - 1) are done,
        # so min(i + k - 1, M - 1) - i other micro-batches are in flight. Two sent tensors outlive
        # their use: the output of warm-up micro-batch k - 2 (``send_work`` keeps the Work of the
        # second-to-last warm-up send to the end of the step; extra once its backward ran, i > k - 2)
        # on a stage before the last, and the previous micro-batch's input gradient (``bwd_sends``
        # is rebound only after the next backward) on a stage after the first
        carry = list(base)
        if settings.training and M > 1:
            out_b, in_b = sent_pb * B if s < P - 1 else 0, recv_pb * B if s > 0 else 0

            _, others, lingering = max(_moment(i, k, M, held, out_b, in_b) for i in range(1, M))
            if others > 0 and held:
                carry.append((INFLIGHT, others * held, f"{others} more in-flight micro-batches (1F1B)"))
            if lingering and out_b:
                carry.append((INFLIGHT, out_b, "a warm-up micro-batch's output (its send's Work is kept)"))
            if in_b:
                carry.append((INFLIGHT, in_b, "previous micro-batch's input gradient (its send op is kept)"))
        others1 = min(k, M - 1) - 1 if settings.training else 0  # in flight beside backward 1
        d.stage_carry = carry
        if s == P - 1 and M > 1:  # ``merge_chunks``: the step's return value, beside the chunks
            d.stage_merge_bytes = M * _output_bytes(a, d, B)
        sim, ranks = run_ranks(d, a, st_settings, rounding)
        if settings.training and k - 1 > others1 and held:
            # backward 0: no gradients yet, but all k - 1 other warm-up micro-batches in flight
            d.stage_carry = base + [(INFLIGHT, (k - 1) * held, f"{k - 1} more in-flight micro-batches (1F1B)")]
            d.stage_merge_bytes = 0
            sim0, ranks0 = run_ranks(d, a, settings, rounding)
            if sim0.mem.peak > sim.mem.peak:
                sim, ranks = sim0, ranks0
        n = len(ranks)
        for e in ranks:
            e["stage"] = s
            e["rank"] = s * n + e["rank"]
        events.update({s * n + r: ev for r, ev in getattr(sim, "rank_events", {}).items()})
        per_rank.extend(ranks)
        rows.update(sim.rows)
        if best is None or sim.mem.peak > best.mem.peak:
            best = sim
    best.rows = rows  # the report's per-layer table covers every stage's layers
    best.rank_events = events
    best.stage_of = {nid: st.index for st in stages for nid in st.nodes}
    return best, per_rank


def _moment(i: int, k: int, M: int, held: int, out_b: int, in_b: int) -> tuple:
    """(bytes beside backward ``i``'s own, other micro-batches in flight, lingering warm-up output)."""
    others = min(i + k - 1, M - 1) - i
    lingering = 1 if (k >= 2 and i > k - 2) else 0
    return (others * held + lingering * out_b + in_b, others, lingering)


def _input_bytes(an, d, batch: int) -> int:
    n = 0
    for nid, node in d.nodes.items():
        if node.type == "Input" and an.nodes[nid].ok:
            o = an.nodes[nid].outputs[0]
            k = 1
            for x in o.shape:
                k *= x
            n += k * batch * (DTYPE_BYTES["int64"] if o.kind == "int64" else DTYPE_BYTES["float32"])
    return n


def _output_bytes(an, d, batch: int) -> int:
    """The model's outputs per micro-batch (what the last stage returns)."""
    used = {(e.src, e.src_port) for e in d.edges}
    n = 0
    for nid in an.order:
        info = an.nodes[nid]
        if info.ok and info.outputs and d.nodes[nid].type != "Input" and (nid, 0) not in used:
            k = 1
            for x in info.outputs[0].shape:
                k *= x
            n += k * batch * DTYPE_BYTES["float32"]
    return n

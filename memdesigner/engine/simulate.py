"""Liveness simulation of one eager PyTorch step, op by op.

Storages are reference counted the way PyTorch frees them: a tensor dies when its last consumer
ran (inference), or when the backward that saved it ran (training); gradients of activations die
as backward moves on; parameter gradients appear when their layer's backward runs (AccumulateGrad
steals the fresh gradient: no copy); optimizer state exists from the start (steady state, step 2).

The reference step (shared/truth): ``zero_grad(set_to_none=True); out = model(x);
loss = out.mean(); loss.backward(); opt.step()`` with ``out`` and ``loss`` alive through the
step; inference is ``with torch.no_grad(): out = model(x)``.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import NamedTuple

from memdesigner.engine import distributed, fsdp, optim_state, param_order, tensor_parallel
from memdesigner.engine.settings import Settings
from memdesigner.model.analysis import Analysis
from memdesigner.model.design import GC_HELD, Design
from memdesigner.model.layout import contiguous_strides, dense_like
from memdesigner.model.oprules import In, MemCtx, OpMem, Out, Param, T
from memdesigner.units import DTYPE_BYTES

# categories, in the order of the by_category tuples
CATS = ("weights", "gradients", "optimizer_state", "activations", "workspace")
W, G, O, A, K = range(5)

FLOATS = ("float32", "float16", "bfloat16", "float64")
INFLIGHT = "<in-flight micro-batches>"  # carried storage freed when backward ends (engine/pipeline_parallel.py)


class Event(NamedTuple):
    phase: str  # forward | backward | optimizer_step
    node: str | None  # node id (None for the loss / whole-model steps)
    label: str
    bytes: int  # live tensor bytes at the op's peak moment
    by_category: tuple  # bytes per CATS at that moment
    device_bytes: int = 0  # with allocator rounding


_NONE = MappingProxyType({})  # an empty, read-only stand-in for per-op lists and dicts most ops leave empty
_tuple_new = tuple.__new__  # Event(...) without the NamedTuple's Python-level __new__

# memoised memory rules: (type, props identity, inputs, settings) -> (MemCtx, OpMem, props, outputs,
# params, _Compiled)
_RULES: dict = {}

# saved-entry kinds of _Compiled.saved
_S_EXTRA, _S_IN, _S_OUT, _S_PARAM, _S_NONE = range(5)
# input-gradient kinds of _Compiled.grads_in
_G_ALIAS, _G_STAGE, _G_T, _G_NEW = range(4)


class _Compiled:
    """One memory rule's answer turned into byte counts and small tuples, once per cached rule:
    a run then walks plain numbers instead of re-reading T/In/Out objects and recomputing
    sizes, strides and dtypes for every op of every estimate (the same rule serves every
    repetition of a layer and every re-estimate after an edit elsewhere)."""

    __slots__ = ("records", "temps", "outs", "extras", "kept", "saved", "vals", "bwd_temps", "grads_in",
                 "casts", "pgrads", "stages", "specs", "affine", "late")

    def __init__(self, m: MemCtx, op: OpMem, outputs, params, pitem: int):
        self.records = m.records
        self.temps = [(_nbytes(t), t.what) for t in op.temps]
        # per output: (nbytes, what) for a new storage, or the input index it shares
        self.outs = [(_nbytes(o), o.what) if isinstance(o, T) else o.i for o in op.outputs]
        self.extras = [(id(t), _nbytes(t), t.what) for t in op.saved if isinstance(t, T)]
        self.kept = sum(nb for _, nb, _ in self.extras)
        saved = []
        for t in op.saved:
            if isinstance(t, T):
                saved.append((_S_EXTRA, id(t)))
            elif isinstance(t, In):
                saved.append((_S_IN, t.i))
            elif isinstance(t, Out):
                saved.append((_S_OUT, t.j))
            elif isinstance(t, Param):
                saved.append((_S_PARAM, t.k))
            else:
                saved.append((_S_NONE, None))
        self.saved = saved
        # per output: (dtype, full shape, strides, is a float)
        batch = m.batch
        in_shapes, in_strides = m.in_shapes, m.in_strides
        ostr = op.out_strides
        vals = []
        for j in range(len(op.outputs)):
            dt = op.out_dtypes[min(j, len(op.out_dtypes) - 1)]
            oshape = (batch,) + outputs[j].shape
            if ostr is not None and ostr[j] is not None:
                st = ostr[j]
            else:
                o = op.outputs[j]
                if isinstance(o, T):
                    if op.elementwise and in_strides and in_shapes[0] == oshape:
                        st = dense_like(oshape, in_strides[0])
                    else:
                        st = contiguous_strides(oshape)
                else:
                    src = in_strides[o.i]
                    st = src if in_shapes[o.i] == oshape else contiguous_strides(oshape)
            vals.append((dt, oshape, st, dt in FLOATS))
        self.vals = vals
        # the value each output becomes, (shape, dtype, requires grad, strides): [without grad, with]
        self.specs = [((oshape, dt, False, st), (oshape, dt, flt, st)) for dt, oshape, st, flt in vals]
        self.affine = op.affine
        self.late = op.late_outputs
        self.bwd_temps = [(_nbytes(t), t.what) for t in op.bwd_temps]
        # per input that requires grad: (index, kind, bytes, what)
        gi = []
        for i in range(len(m.in_shapes)):
            if not m.in_rg[i]:
                continue
            how = op.grad_in[i] if op.grad_in and i < len(op.grad_in) else "new"
            if how is None:
                continue
            new_nb = m.in_elems(i) * DTYPE_BYTES[m.in_dtypes[i]]
            if how == "alias":
                gi.append((i, _G_ALIAS, new_nb, None))  # nb: the input's own size (a sum of views is that big)
            elif how == "stage":
                gi.append((i, _G_STAGE, new_nb, None))  # a new gradient when no stage made it
            elif isinstance(how, T):
                gi.append((i, _G_T, _nbytes(how), how.what))
            else:
                gi.append((i, _G_NEW, new_nb, None))
        self.grads_in = gi
        self.casts = [(k, _nbytes(t), t.what) for k, t in op.casts]
        # parameters that get gradients: (index, name, bytes at the parameter dtype)
        self.pgrads = [(k, p.name, p.numel * pitem, p.numel) for k, p in enumerate(params) if p.requires_grad]
        self.stages = [([(_nbytes(t), t.what) for t in temps_], pidx, release)
                       for temps_, pidx, release in op.bwd_stages]


class _Mem:
    """The live set: storages with refcounts and a running total per category."""

    __slots__ = ("nb", "cat", "rc", "rnb", "cur", "by", "rcur", "peak", "peak_by", "peak_at", "round", "what",
                 "ppeak", "rpeak", "capture", "captured", "events", "label", "trace", "slack", "exact")

    def __init__(self, rounding: int):
        self.nb: list[int] = []
        self.rnb: list[int] = []
        self.cat: list[int] = []
        self.rc: list[int] = []
        self.what: list[str] = []
        self.cur = 0
        self.rcur = 0
        self.by = [0, 0, 0, 0, 0]
        self.peak = 0
        self.peak_by = (0, 0, 0, 0, 0)
        self.peak_at = None
        self.round = rounding
        self.ppeak = 0  # peak of the current phase
        self.rpeak = 0  # peak with allocator rounding
        self.capture = None  # snapshot the live set when the total first reaches this value
        self.captured = None
        self.events: list | None = None  # the timeline; every moment that raises a peak lands in it
        self.label = str  # node id -> display label, for events a bare mark() has to create
        self.trace: list | None = None  # (live bytes, rounded bytes, rounding slack bound) at every mark
        self.slack = 0  # the most that allocator rounding can add to the live tensors, whatever their sizes
        self.exact: set = set()  # aggregates whose rounded size is given (alloc_exact)

    def alloc(self, nbytes: int, cat: int, refs: int = 1, what="") -> int:
        sid = len(self.nb)
        self.nb.append(nbytes)
        r = self.round
        rn = ((nbytes + r - 1) // r) * r if r > 1 and nbytes else nbytes
        self.rnb.append(rn)
        self.cat.append(cat)
        self.rc.append(refs)
        self.what.append(what)
        self.cur += nbytes
        self.rcur += rn
        self.by[cat] += nbytes
        if nbytes and r > 1:
            self.slack += r - 1
        if refs <= 0:
            self._release(sid)
        return sid

    def alloc_exact(self, nbytes: int, rounded: int, cat: int, what="") -> int:
        """A long-lived aggregate of many tensors: its raw and allocator-rounded sizes."""
        sid = self.alloc(nbytes, cat, 1, what)
        self.rcur += rounded - self.rnb[sid]
        self.rnb[sid] = rounded
        if nbytes and self.round > 1:
            self.slack -= self.round - 1
        self.slack += rounded - nbytes
        self.exact.add(sid)
        return sid

    def incref(self, sid: int, n: int = 1) -> None:
        self.rc[sid] += n

    def decref(self, sid: int, n: int = 1) -> None:
        rc = self.rc[sid] - n
        self.rc[sid] = rc
        if rc == 0:
            self._release(sid)

    def _release(self, sid: int) -> None:
        nb = self.nb[sid]
        self.cur -= nb
        self.rcur -= self.rnb[sid]
        self.by[self.cat[sid]] -= nb
        if sid in self.exact:
            self.slack -= self.rnb[sid] - nb
        elif nb and self.round > 1:
            self.slack -= self.round - 1

    def begin_phase(self, phase: str) -> None:
        self.ppeak = 0

    def mark(self, where) -> None:
        """A moment worth checking. It raises the running op's timeline event when it is higher,
        or adds one when it raises the peak, so the timeline's maximum is always the peak."""
        cur = self.cur
        if cur > self.ppeak:
            self.ppeak = cur
        if self.rcur > self.rpeak:
            self.rpeak = self.rcur
        raised = cur > self.peak
        if raised:
            self.peak = cur
            self.peak_by = tuple(self.by)
            self.peak_at = where
        if self.capture is not None and cur == self.capture and self.captured is None:
            self.captured = [(self.what[i], self.nb[i], self.cat[i]) for i in range(len(self.nb)) if self.rc[i] > 0]
        if self.trace is not None:
            self.trace.append((cur, self.rcur, self.slack))
        ev = self.events
        if ev is not None:
            last = ev[-1] if ev else None
            if last is not None and last.phase == where[0] and last.node == where[1]:
                if cur > last.bytes:
                    ev[-1] = Event(last.phase, last.node, last.label, cur, tuple(self.by), self.rcur)
            elif raised:
                ev.append(Event(where[0], where[1], self.label(where[1]), cur, tuple(self.by), self.rcur))

    def event(self, phase: str, node, label: str) -> None:
        """The op's own timeline point (always a new event), after checking the moment (mark()
        without its timeline part, inlined: this runs once per op and per backward op)."""
        cur, rcur = self.cur, self.rcur
        if cur > self.ppeak:
            self.ppeak = cur
        if rcur > self.rpeak:
            self.rpeak = rcur
        by = tuple(self.by)
        if cur > self.peak:
            self.peak = cur
            self.peak_by = by
            self.peak_at = (phase, node)
        if self.capture is not None and cur == self.capture and self.captured is None:
            self.captured = [(self.what[i], self.nb[i], self.cat[i]) for i in range(len(self.nb)) if self.rc[i] > 0]
        if self.trace is not None:
            self.trace.append((cur, rcur, self.slack))
        self.events.append(_tuple_new(Event, (phase, node, label, cur, by, rcur)))


def _release(mem, saved: list) -> None:
    for sid in saved:
        if sid is not None:
            mem.decref(sid)


def _nbytes(t: T) -> int:
    return t.elems * DTYPE_BYTES[t.dtype]


def _param_bytes(p, dtype: str, bits: int | None) -> int:
    """Bit-packed weights for quantized layers; biases stay at 32 bits below 16-bit weights."""
    if p.dtype is not None and p.dtype not in FLOATS:
        return p.numel * DTYPE_BYTES[p.dtype]
    if bits is None or p.kind == "buffer":
        return p.numel * DTYPE_BYTES[dtype]
    if p.kind == "bias":
        return p.numel * (bits // 8 if bits >= 16 else 4)
    return (p.numel * bits + 7) // 8


_FACTS: dict = {}


def _param_facts(params: list, pdtype: str, bits: int | None) -> list:
    """Per parameter: (spec, numel, trainable, requires_grad, bytes), memoised per parameter list
    (analysis hands the same list to every estimate until the layer is edited)."""
    key = (id(params), pdtype, bits)
    hit = _FACTS.get(key)
    if hit is not None and hit[0] is params:
        return hit[1]
    facts = [(p, p.numel, p.trainable, p.requires_grad, _param_bytes(p, pdtype, bits)) for p in params]
    if len(_FACTS) > 20000:
        _FACTS.clear()
    _FACTS[key] = (params, facts)
    return facts


class _Structure:
    """What a run reads from the graph alone (valid order, inputs, consumers, sinks, module-call
    holds): the same for every run over one analysis (a batch curve's probes, the ranks of a
    distributed step, the window's re-estimates of an unchanged expansion)."""

    def __init__(self, design: Design, an: Analysis):
        nodes = design.nodes
        infos = an.nodes
        self.order = order = [n for n in an.order if infos[n].issue is None and infos[n].blocked_by is None]
        self.valid = valid = set(order)
        self.in_edges = in_edges = {n: [] for n in order}
        self.n_cons = n_cons = {}
        for e in design.edges:
            if e.dst in valid and e.src in valid:
                in_edges[e.dst].append(e)
                n_cons[(e.src, e.src_port)] = n_cons.get((e.src, e.src_port), 0) + 1
        for lst in in_edges.values():
            if len(lst) > 1:
                lst.sort(key=lambda e: e.dst_port)
        self.in_keys = {nid: [(e.src, e.src_port) for e in lst] for nid, lst in in_edges.items()}
        # one pass over the nodes: the model's outputs (sinks: nodes none of whose outputs feed
        # anything; an op whose first output is ignored but whose second is used, like
        # `_, h_n = gru(x)`, is not one), a Loss node, fused groups, positions, output keys
        self.sinks = sinks = set()
        self.position = position = {}
        self.out_keys = out_keys = {}
        has_loss = scoped = False
        last_of: dict[str, str] = {}
        for i, n in enumerate(order):
            node = nodes[n]
            position[n] = i
            k = len(infos[n].outputs)
            out_keys[n] = [(n, j) for j in range(k)]
            if node.fused:
                last_of[node.fused] = n
            if node.scope:
                scoped = True
            t = node.type
            if t == "Loss":
                has_loss = True
            elif t == "Input":
                continue
            if not node.output:
                if (n, 0) in n_cons:  # (a count is never 0)
                    continue
                if k > 1 and any((n, j) in n_cons for j in range(1, k)):
                    continue
            sinks.add(n)
        self.has_loss_node = has_loss
        # inference of a fused group (TransformerEncoderLayer): every op but its last
        self.fused_inner = {n for n in order if nodes[n].fused and last_of[nodes[n].fused] != n} if last_of else set()
        self.holds_at, self.release_at = Simulation._scope_holds(order, nodes, in_edges) if scoped else ({}, {})


def _structure(design: Design, an: Analysis) -> _Structure:
    """The graph's structure for ``an``, kept on the analysis for the next run over it."""
    memo = an.__dict__.get("_sim_structure")
    if memo is not None and memo[0] is design and memo[1] == len(design.edges):
        return memo[2]
    st = _Structure(design, an)
    an.__dict__["_sim_structure"] = (design, len(design.edges), st)
    return st


class Simulation:
    """Runs the step once and keeps the events, per-layer rows and phase peaks."""

    def __init__(self, design: Design, analysis: Analysis, settings: Settings, rounding: int = 1,
                 capture: int | None = None, trace: bool = False, rank: int | None = None,
                 carry: list | None = None):
        self.capture = capture
        # storages an earlier step left alive (engine/generate.py): (node id or None, bytes, label);
        # a node whose rule says releases_carried frees its own, the rest live to the end of the run
        # (pipeline parallel: what other micro-batches and receive buffers hold, engine/pipeline_parallel.py)
        self.carry = carry or list(getattr(design, "stage_carry", ()))
        self.persisted: dict[str, list[int]] = {}  # node -> bytes of its outputs that outlive the step
        self.rank = rank  # data-parallel rank (engine/distributed.py); None: the heaviest
        self.trace = trace  # keep every checked moment (engine/batch_curve.py fits lines through them)
        self.design = design
        self.an = analysis
        self.s = settings
        self.rounding = rounding
        self.events: list[Event] = []
        self.phase_peaks = {"forward": 0, "backward": 0, "optimizer_step": 0}
        self.rows: dict[str, dict] = {}
        self.recomputed: list[str] = []
        self.affine = True  # every size is a + b·batch (see OpMem.affine)
        self.gc_holds = True  # outputs kept_until GC_HELD live to the end of the step

    def _new_mem(self) -> _Mem:
        """The live set; a subclass may log every allocation (memdesigner.snapshot.writer)."""
        return _Mem(self.rounding)

    # ----------------------------------------------------------------------------------
    def run(self) -> Simulation:
        s = self.s
        design, an = self.design, self.an
        train = s.training
        dtype = s.torch_dtype
        pdtype = "float32" if s.amp else dtype
        amp = s.amp_dtype
        mem = self._new_mem()
        mem.capture = self.capture
        mem.trace = [] if self.trace else None
        self.mem = mem
        events = self.events
        mem.events = events
        mem.label = lambda nid: design.nodes[nid].name if nid in design.nodes else "step"
        batch = s.batch

        st = _structure(design, an)
        order, n_cons, in_keys = st.order, st.n_cons, st.in_keys
        self.order = order  # the valid nodes, in execution order
        has_loss_node, sinks = st.has_loss_node, st.sinks
        nodes = design.nodes

        # -- weights, buffers, optimizer state (steady state) --------------------------------
        trainable: list[tuple[str, int, int]] = []  # (node, bytes, numel) per trainable tensor
        opt = s.optimizer if train else "none"
        state_per_param = {"none": 0, "sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}.get(opt, 0)
        new_opt = opt in optim_state.NEW_OPTIMIZERS
        master = train and s.master_weights and opt != "none"
        sf = 4 // DTYPE_BYTES[pdtype] if master else 1  # the step works on fp32 masters
        paged_total = 0
        shapes: list[tuple] = []  # per trainable tensor, for the optimizers whose state follows the shape
        pnames: list[str] = []  # per trainable tensor: its parameter name (engine/param_order.py)
        step_tensor = 4 if (opt in ("adam", "adamw") and s.backend == "cpu") else 0  # host tensor on CUDA
        pitem = DTYPE_BYTES[pdtype]
        rnd = self.rounding
        weights_total = state_total = weights_r = state_r = 0
        # FSDP2 (zero2/zero3): sharded parameters, per-unit gathers and reduce-scatters (engine/fsdp.py)
        tp = tensor_parallel.plan_of(design)  # the collectives of tensor parallelism (None without)
        fs = (fsdp.FsdpStep(s.data_parallel, s.gpus, gloo=s.backend == "cpu", offload=s.offload == "params")
              if train and s.data_parallel in fsdp.FSDP_STRATEGIES else None)
        self.fsdp = fs
        self.trainable_shapes: list[tuple] = []
        uscope = fsdp.unit_scopes(nodes) if fs is not None else {}
        host_shards = 0
        self.host_bytes = 0  # host RAM this rank needs for offloaded state (zero2/zero3 offload params)
        t_p = t_nt = t_rg = t_pb = t_bb = 0
        for nid in order:
            info = an.nodes[nid]
            bits = nodes[nid].bits
            tied = nodes[nid].tied
            pb = bb = n_p = n_nt = n_rg = 0
            params = info.params
            for p, numel, trainable_, requires_grad, nb in (_param_facts(params, pdtype, bits) if params else ()):
                if tied and p.name in tied:  # the same tensor as another layer's parameter: counted there
                    continue
                if fs is not None and trainable_:
                    nb = fs.add_param(uscope[nid], p.shape, pitem)  # this rank's padded shard
                if trainable_:
                    pb += nb
                    n_p += numel
                else:
                    bb += nb
                    # a float buffer is a non-trainable parameter in Keras's sense (moving statistics);
                    # an int64 step counter (num_batches_tracked) is not
                    n_nt += numel if p.dtype is None else 0
                weights_total += nb
                weights_r += nb if rnd <= 1 else -(-nb // rnd) * rnd
                if requires_grad:
                    n_rg += numel
                    tb = numel * pitem
                    if fs is not None:  # the optimizer state follows the rank's own rows
                        numel = fsdp.sharded_numel(p.shape, s.gpus, self.rank or 0)
                        tb = numel * pitem
                    self.trainable_shapes.append(p.shape)
                    trainable.append((nid, tb, numel))
                    shapes.append(p.shape)
                    pnames.append(p.name)
                    if fs is not None and fs.offload:  # CPUOffloadPolicy: the shard lives on the host
                        host_shards += nb
                        weights_total -= nb
                        weights_r -= nb if rnd <= 1 else -(-nb // rnd) * rnd
                    if new_opt:
                        raw, rr, pg = optim_state.state_of(opt, p.shape, numel, s.backend, rnd)
                        state_total += raw
                        state_r += rr
                        paged_total += pg
                    elif state_per_param:
                        sb = numel * 4 if master else tb  # fp32 states beside low-precision weights
                        state_total += state_per_param * sb + step_tensor
                        state_r += state_per_param * (sb if rnd <= 1 else -(-sb // rnd) * rnd) + step_tensor
                    if master:  # the fp32 master copy the optimizer updates
                        mb = numel * 4
                        state_total += mb
                        state_r += mb if rnd <= 1 else -(-mb // rnd) * rnd
            self.rows[nid] = {"params": n_p, "non_trainable": n_nt, "param_bytes": pb, "buffer_bytes": bb,
                              "activation_bytes": 0, "kept_bytes": 0, "requires_grad": n_rg}
            t_p += n_p
            t_nt += n_nt
            t_rg += n_rg
            t_pb += pb
            t_bb += bb
        self.totals = (t_p, t_nt, t_rg, t_pb, t_bb)  # over all valid nodes: params, non-trainable, requiring
        # grad, parameter bytes, buffer bytes
        if fs is not None:
            fs.finish_layout(order, uscope)
        fcats = (W, G, K)
        # data parallel: this rank's optimizer shard, DDP's gradient buckets (engine/distributed.py)
        self.trainable = trainable
        self.plan = plan = distributed.plan_for(s, self.rank, trainable, rnd) if train else None
        local = trainable  # the tensors this rank's optimizer updates
        if plan is not None and plan.owned is not None:
            local = [trainable[i] for i in plan.owned]
            state_total = sum(state_per_param * tb + step_tensor for _, tb, _ in local) if state_per_param else 0
            state_r = sum(state_per_param * (tb if rnd <= 1 else -(-tb // rnd) * rnd) + step_tensor
                          for _, tb, _ in local) if state_per_param else 0
        offload = fs is not None and fs.offload
        owned = plan.owned if plan is not None else None  # the per-parameter loop's order: engine/param_order.py
        if offload:
            # the optimizer (its state and its step's temporaries) runs on the host
            prev_nb = worst = 0
            if opt in ("adam", "adamw"):
                # for-loop Adam on the CPU: sqrt, denominator, the previous denominator
                for _, nb, _, _ in param_order.loop_order(design, trainable, shapes, pnames, owned):
                    worst = max(worst, 2 * nb + prev_nb)
                    prev_nb = nb
            self.host_bytes = host_shards + state_total + worst  # + the gradients (after backward)
            state_total = state_r = 0
        if new_opt:
            shared = optim_state.shared_bytes(opt, [t[2] for t in trainable])
            state_total += shared
            state_r += shared if rnd <= 1 else -(-shared // rnd) * rnd
        self.paged_optimizer_bytes = paged_total  # unified memory: not on the device peak
        # weights and optimizer state live all step long: one block each (already rounded)
        mem.alloc_exact(weights_total, weights_r, W, "parameters and buffers (all layers)")
        if state_total:
            what = "this rank's shard" if local is not trainable else "all parameters"
            mem.alloc_exact(state_total, state_r, O, f"{opt} state ({what})")
        if plan is not None and plan.bucket_bytes:
            mem.alloc_exact(plan.bucket_bytes, plan.bucket_rounded, G, "DDP gradient buckets")
        carried: dict = {}
        for cnid, nb, label in self.carry:
            carried.setdefault(cnid, []).append(mem.alloc(nb, A, 1, (cnid, label)))
        if self.carry:
            mem.mark(("forward", None))
        # gradient accumulation: the last micro-step (the heaviest) starts with every .grad made
        # by the earlier ones; its own gradients are added in place (AccumulateGrad's add_), so
        # each is a transient of its op's backward
        accum = train and s.grad_accum > 1
        if accum:
            graw = sum(tb for _, tb, _ in trainable)
            mem.alloc_exact(graw, sum(tb if rnd <= 1 else -(-tb // rnd) * rnd for _, tb, _ in trainable), G,
                            f"gradients accumulated over {s.grad_accum - 1} earlier micro-steps")

        # -- forward ---------------------------------------------------------------------
        val_sid: dict[tuple, int] = {}
        # per value: (full shape, dtype, requires grad, strides): what the next op's rule reads
        val_spec: dict[tuple, tuple] = {}
        saved_of: dict[str, list[int]] = {}
        grad_mode: dict[str, OpMem] = {}
        ctx_of: dict[str, _Compiled] = {}
        cast_cache: dict[tuple, int] = {}  # (node, param index) -> sid (autocast weight cache)
        held_outputs: list[int] = []
        # activation checkpointing as checkpoint_sequential: ceil(sqrt(n)) segments, every one but
        # the last recomputed in backward; a checkpointed segment keeps only its input
        seg_of: dict[str, int] = {}
        segments: list = []
        layerwise = train and (s.checkpoint_layers or bool(s.checkpoint_units))  # non-reentrant, per layer
        if layerwise:
            # transformers' gradient_checkpointing_enable(): each decoder layer (a scope <prefix>.<k>)
            # is one checkpoint, the last one included; checkpoint_units: only the layers named
            from memdesigner.engine.checkpoint_plan import unit_segments
            from memdesigner.engine.finetune import layer_segments

            segments = unit_segments(order, nodes, s.checkpoint_units, st.in_edges) if s.checkpoint_units \
                else layer_segments(order, nodes)
            for si, seg in enumerate(segments):
                for nid in seg:
                    seg_of[nid] = si
        elif train and s.checkpointing:
            layers = [n for n in order if nodes[n].type != "Input"]
            k = max(1, math.ceil(math.sqrt(len(layers))))
            size = max(1, len(layers) // k)
            segments = [layers[i:i + size] for i in range(0, size * (k - 1), size)]
            for si, seg in enumerate(segments):
                for nid in seg:
                    seg_of[nid] = si
        self.recomputed = [nid for seg in segments for nid in seg]  # forward ops run again in backward
        # HF's gradient_checkpointing_enable() calls enable_input_require_grads(): the input
        # embedding's output requires grad, so backward runs down to it even with a frozen base
        input_grads_at = next((n for n in order if nodes[n].type == "Embedding"), None) \
            if train and s.checkpoint_layers else None
        # a pipeline stage after the first: its received inputs require grad (their gradient is sent back)
        recv_grad = train and getattr(design, "inputs_require_grad", False)
        seg_inputs: dict[int, list] = {}  # segment -> storages its checkpoint keeps
        seg_base: dict[int, int] = {}  # segment -> live bytes when its forward began
        seg_live: dict[int, list] = {}  # segment -> [(node, bytes its forward held above that)]
        layer_saved: dict[int, dict] = {}  # checkpoint_layers: segment -> {value its ops save: first saver}
        new_out: dict[tuple, int] = {}  # checkpoint_layers: bytes of each new output
        alias_of: dict[tuple, tuple] = {}  # checkpoint_layers: a view/no-op output -> the value it shares
        settings_key = (dtype, train, s.backend, amp, batch)

        fused_inner = st.fused_inner if not train and not amp else None
        holds_at, release_at = st.holds_at, st.release_at
        held = set()
        position = st.position
        local_release: dict[str, list] = {}
        if fs is not None:
            fs.forward_begin(mem, fcats)
        rules = _RULES
        ncons_get = n_cons.get
        alloc, incref, decref = mem.alloc, mem.incref, mem.decref
        an_nodes = an.nodes
        self.base_bytes = mem.cur  # before the first op (the batch is the Input op's output)
        for nid in order:
            keys = in_keys[nid]
            if fs is not None:
                fs.where = ("forward", nid)
                fs.before_op(mem, nid, position[nid], fcats, any(val_spec[k][2] for k in keys))
            if nid in holds_at:
                for hk in holds_at[nid]:
                    if hk[1] in val_sid:
                        incref(val_sid[hk[1]])
                        held.add(hk)
            info = an_nodes[nid]
            node = nodes[nid]
            specs = tuple([val_spec[k] for k in keys])
            props, outputs, params = info.props, info.outputs, info.params
            mkey = (node.type, id(props), id(outputs), id(params), specs, settings_key)
            hit = rules.get(mkey)
            if hit is not None and hit[2] is props and hit[3] is outputs and hit[4] is params:
                op, c = hit[1], hit[5]
            else:
                lt = node.layer
                m = MemCtx(
                    props=props, in_shapes=[sp[0] for sp in specs], in_dtypes=[sp[1] for sp in specs],
                    out_shapes=[(batch,) + o.shape for o in outputs], out_kinds=[o.kind for o in outputs],
                    params=params, dtype=dtype, grad=train, training=train, in_rg=[sp[2] for sp in specs],
                    backend=s.backend, amp=amp, batch=batch, in_strides=[sp[3] for sp in specs],
                )
                op = lt.memory(m)
                c = _Compiled(m, op, outputs, params, pitem)
                if len(rules) > 20000:
                    rules.clear()
                rules[mkey] = (m, op, props, outputs, params, c)
            if not c.affine:
                self.affine = False
            records = c.records
            ckpt = records and nid in seg_of
            if ckpt and seg_of[nid] not in seg_base:  # the segment's first op that records
                members = set(segments[seg_of[nid]])
                ext = [val_sid[k] for m_ in segments[seg_of[nid]] for k in in_keys[m_]
                       if k[0] not in members and k in val_sid]
                for sid in ext:
                    incref(sid)
                seg_inputs[seg_of[nid]] = ext
                seg_base[seg_of[nid]] = mem.cur
            # autocast's weight cache: one low-precision copy per parameter per region
            cast_sid = _NONE
            if c.casts:
                cast_sid = {}
                for k, nb, what in c.casts:
                    key = (nid, k)
                    if key not in cast_cache:
                        cast_cache[key] = alloc(nb, A, 1, what)
                    cast_sid[k] = cast_cache[key]
            # inside a fused kernel (inference of a TransformerEncoderLayer) only the group's last
            # op makes a tensor of its own: the rest lives and dies inside the kernel
            hidden = fused_inner is not None and nid in fused_inner
            tmp_sids = [alloc(nb, K, 1, what) for nb, what in c.temps] if c.temps and not hidden else _NONE
            out_sids = []
            out_bytes = 0
            late = c.late
            for j, o in enumerate(c.outs):
                if late and j in late:
                    out_sids.append(None)  # made after the op's transients are gone (below)
                elif o.__class__ is tuple:
                    nb = 0 if hidden else o[0]
                    out_bytes += nb
                    out_sids.append(alloc(nb, A, 1, (nid, o[1])))
                else:
                    src_sid = val_sid[keys[o]]
                    incref(src_sid)
                    out_sids.append(src_sid)
                    if segments:
                        alias_of[(nid, j)] = alias_of.get(keys[o], keys[o])
            kept = c.kept
            extra_sids = {tid: alloc(nb, A, 1, (nid, what)) for tid, nb, what in c.extras} if c.extras else _NONE
            mem.event("forward", nid, node.name)
            if ckpt:  # the segment's intermediates at this op: its recomputation makes them again
                si_ = seg_of[nid]
                live_ = mem.cur - seg_base[si_]
                if layerwise:
                    # a value an earlier op of the rerun saved and that is still alive here is
                    # one storage, counted once (the rerun's kept bytes already hold it)
                    for key in layer_saved.get(si_, ()):
                        sid_ = val_sid.get(key)
                        if sid_ is not None and key in new_out and seg_of.get(key[0]) == si_ and mem.rc[sid_] > 0:
                            live_ -= new_out[key]
                seg_live.setdefault(si_, []).append((nid, live_))
            for sid in tmp_sids:
                decref(sid)
            if tp is not None and nid in tp.fwd_allreduce and out_sids and out_sids[0] is not None:
                # rowwise Linear: the all-reduce's output beside the partial sum (engine/tensor_parallel.py)
                t_ = mem.alloc(mem.nb[out_sids[0]], A, 1, (nid, "tensor-parallel all-reduce output"))
                mem.mark(("forward", nid))
                mem.decref(t_)
            own = carried.pop(nid, []) if op.releases_carried else []
            if own and late:
                for sid in own[:len(own) // 2]:
                    decref(sid)
                own = own[len(own) // 2:]
            if late:
                for j in late:
                    nb = c.outs[j][0]
                    out_bytes += nb
                    out_sids[j] = alloc(nb, A, 1, (nid, c.outs[j][1]))
                mem.mark(("forward", nid))
            for sid in own:
                decref(sid)
            if op.persists:
                self.persisted[nid] = [mem.nb[sid] for sid in out_sids if sid is not None]
                for sid in out_sids:
                    if sid is not None:
                        incref(sid)
                        held_outputs.append(sid)
            # what autograd keeps
            if records:
                sv = []
                for kind, x in c.saved:
                    if kind == _S_EXTRA:
                        sv.append(extra_sids[x])
                    elif kind == _S_IN:
                        sid = val_sid[keys[x]]
                        incref(sid)
                        sv.append(sid)
                    elif kind == _S_OUT:
                        incref(out_sids[x])
                        sv.append(out_sids[x])
                    elif kind == _S_PARAM and x in cast_sid:
                        incref(cast_sid[x])
                        sv.append(cast_sid[x])
                    else:
                        sv.append(None)  # a parameter: kept anyway
                saved_of[nid] = sv
                grad_mode[nid] = op
                ctx_of[nid] = c
            else:
                for sid in extra_sids.values():
                    decref(sid)
            ku = node.keep_until
            if ku == GC_HELD:
                # in a reference cycle: freed when Python's cyclic garbage collector runs, after
                # the step as measured (Keras 3.15 models); without gc_holds, when the forward returns
                if self.gc_holds and out_sids:
                    mem.incref(out_sids[0])
                    held_outputs.append(out_sids[0])
                    ku = ""
                else:
                    ku = order[-1]
            if ku and out_sids and position.get(ku, -1) > position[nid]:
                # a Python variable in the model's code still refers to this output; taken while
                # the op still holds it, so an output nothing reads (``_, h = gru(x)``) stays too
                incref(out_sids[0])
                local_release.setdefault(ku, []).append(out_sids[0])
            # outputs become values; each consumer holds one reference
            is_input = node.type == "Input"
            grads_here = 1 if records or nid == input_grads_at or (recv_grad and node.type == "Input") else 0
            for j, sid in enumerate(out_sids):
                key = (nid, j)
                refs = ncons_get(key, 0)
                if j == 0 and nid in sinks and (refs == 0 or node.output) and \
                        (not has_loss_node or node.type == "Loss" or not train):
                    refs += 1
                    held_outputs.append(sid)
                if is_input:
                    refs += 1  # the caller keeps the batch alive
                val_sid[key] = sid
                val_spec[key] = c.specs[j][grads_here]
                # each consumer's reference, less the op's own
                if refs == 0:
                    decref(sid)
                elif refs > 1:
                    incref(sid, refs - 1)
            if nid == input_grads_at and out_sids and not records:
                # requires_grad_() made the frozen embedding's output a leaf: its AccumulateGrad
                # node holds it for as long as the graph lives (until the loss is dropped, after
                # the step). An output that already had a grad_fn is no leaf: nothing holds it.
                incref(out_sids[0])
                held_outputs.append(out_sids[0])
            for k in keys:
                decref(val_sid[k])
            if nid in local_release:
                for sid in local_release.pop(nid):
                    decref(sid)
            if nid in release_at:
                for hk in release_at[nid]:
                    if hk in held:
                        held.discard(hk)
                        decref(val_sid[hk[1]])
            row = self.rows[nid]
            row["activation_bytes"] = out_bytes
            row["kept_bytes"] = kept
            if ckpt:
                # checkpointed: nothing is kept now; backward recomputes the segment first
                _release(mem, saved_of.pop(nid, []))
                last = nid == segments[seg_of[nid]][-1]
                row["recompute"] = kept + (0 if last else out_bytes)
                if layerwise:
                    # non-reentrant checkpoint: the recomputation keeps only what the layer's ops
                    # save (their extras and the saved outputs of its own ops); the rest dies
                    # as it would in a no-grad forward
                    # a recomputed value dies with the backward of its earliest saver in forward
                    # order (the last of its savers to run backward): its block goes there
                    # a value saved through a view or a no-op cast (peft's x.to(lora_A.dtype) in
                    # fp32) keeps the storage it shares: the saver keeps that value alive
                    ss = layer_saved.setdefault(seg_of[nid], {})
                    for t in op.saved:
                        if isinstance(t, In):
                            ss.setdefault(alias_of.get(keys[t.i], keys[t.i]), nid)
                        elif isinstance(t, Out):
                            ss.setdefault(alias_of.get((nid, t.j), (nid, t.j)), nid)
                    for j, o in enumerate(op.outputs):
                        if isinstance(o, T):
                            new_out[(nid, j)] = 0 if hidden else _nbytes(o)
                    row["recompute"] = kept
            if fs is not None:
                fs.after_op(mem, nid, position[nid])
        if layerwise:
            for si, savers in layer_saved.items():
                for key, saver in savers.items():
                    if key in new_out and key[0] in seg_of and seg_of[key[0]] == si:
                        self.rows[saver]["recompute"] += new_out[key]
        if fs is not None:
            fs.forward_end(mem)
        self.fwd_end_bytes = mem.cur  # what the forward leaves alive for backward (and its output)
        self.phase_peaks["forward"] = mem.ppeak

        if not train:
            if amp:
                for sid in cast_cache.values():
                    mem.decref(sid)
            return self

        # -- loss --------------------------------------------------------------------------
        loss_sids = []
        grads: dict[tuple, int] = {}
        if not has_loss_node:
            for nid in order:
                key = (nid, 0)
                if nid in sinks and an.nodes[nid].outputs and key in val_sid and val_spec[key][2]:
                    ldt = val_spec[key][1]
                    loss_sids.append(mem.alloc(DTYPE_BYTES[ldt], A, 1, "loss = out.mean()"))
                    grads[key] = None  # filled in backward
        if amp:
            for sid in cast_cache.values():
                mem.decref(sid)
        mem.event("forward", None, "loss")
        self.phase_peaks["forward"] = mem.ppeak

        # -- backward ----------------------------------------------------------------------
        mem.begin_phase("backward")
        # no output requires grad (an Input alone, everything frozen): there is no loss to seed
        # and no backward (PyTorch's backward() would refuse), not a phantom 4-byte seed
        seeded = has_loss_node or bool(loss_sids)
        ones = mem.alloc(DTYPE_BYTES[amp or dtype], G, 1, "ones_like(loss)") if seeded else None  # the loss's dtype
        for key in list(grads):
            shape = an.nodes[key[0]].outputs[key[1]].shape
            n = batch * math.prod(shape)
            grads[key] = mem.alloc(n * DTYPE_BYTES[val_spec[key][1]], G, 1, "MeanBackward0 gradient")
        mem.event("backward", None, "loss backward")
        loss_node_ones = has_loss_node
        grad_owned: set = set()  # "node.param" keys whose .grad exists (shared parameters)
        recomputed: dict[int, dict] = {}  # checkpointed segment -> {node: recomputed block}
        if fs is not None:
            fs.where = ("backward", None)
            fs.backward_begin(mem, fcats)

        def param_grads(nid, tied, entries) -> list:
            """The gradients AccumulateGrad keeps as p.grad (one block per layer). For a shared
            parameter that already has .grad the contribution and its sum are transients,
            returned for the caller to free after the op. ``entries``: _Compiled.pgrads."""
            raw = rsum = 0
            transient = []
            for _, name, nb, _ in entries:
                if accum:  # .grad exists: this gradient is added into it in place, then freed
                    transient.append(mem.alloc(nb, K, 1, (nid, name + " gradient (added to .grad)")))
                    continue
                pkey = tied.get(name) or f"{nid}.{name}"
                if pkey in grad_owned:
                    # a shared parameter already has .grad: AccumulateGrad sums this contribution
                    # into a new tensor (out of place, as the tracked reference run shows), which
                    # replaces the old .grad; the contribution and the old .grad die
                    transient.append(mem.alloc(nb, K, 1, (nid, name + " gradient contribution")))
                    transient.append(mem.alloc(nb, K, 1, (nid, name + " gradient sum")))
                    continue
                grad_owned.add(pkey)
                raw += nb
                rsum += nb if rnd <= 1 else -(-nb // rnd) * rnd
            if raw:
                sid = mem.alloc_exact(raw, rsum, G, (nid, "parameter gradients"))
                if fs is not None:
                    fs.grad_made(nid, sid)
            return transient
        out_keys = st.out_keys
        grads_pop = grads.pop
        alloc, incref, decref = mem.alloc, mem.incref, mem.decref
        for nid in reversed(order):
            if fs is not None:
                fs.where = ("backward", nid)
                fs.before_backward_op(mem, nid, fcats)
            if nid not in grad_mode:
                continue
            op = grad_mode[nid]
            c = ctx_of[nid]
            node = nodes[nid]
            g_out = [grads_pop(k, None) for k in out_keys[nid]]
            if loss_node_ones and node.type == "Loss":
                g_out = [ones]
                mem.incref(ones)
            for g0 in g_out:
                if g0 is not None:
                    break
            else:
                _release(mem, saved_of.pop(nid, []))
                continue
            si = seg_of.get(nid)
            if si is not None and si not in recomputed:
                # entering a checkpointed segment from its end: rerun its forward with grad
                recomputed[si] = {m_: mem.alloc(self.rows[m_].get("recompute", 0), A, 1,
                                                (m_, "recomputed for backward (checkpoint)"))
                                  for m_ in segments[si]}
                # while the forward reruns, each op's intermediates live as they did the first time,
                # beside what the ops before it saved again: the rerun's highest moment may be
                # above everything it keeps
                kept_before = rerun_peak = 0
                for m_, live in seg_live.get(si, ()):
                    rerun_peak = max(rerun_peak, kept_before + live)
                    kept_before += self.rows[m_].get("recompute", 0)
                if rerun_peak > kept_before:
                    t_ = mem.alloc(rerun_peak - kept_before, K, 1, (nid, "recomputed forward's intermediates"))
                    mem.mark(("backward", nid))
                    mem.decref(t_)
            rsid = recomputed[si].pop(nid, None) if si is not None else None
            keys = in_keys[nid]
            tmp = [alloc(nb, K, 1, what) for nb, what in c.bwd_temps]
            done_params = _NONE
            stage_tmp: list = []
            if c.stages:
                done_params = set()
                # a multi-layer op (stacked LSTM) runs its backward layer by layer: each stage
                # makes that layer's gradients, then releases what that layer kept
                sv = saved_of.get(nid, [])
                for temps_, pidx, release in c.stages:
                    st_tmp = [mem.alloc(nb, G, 1, what) for nb, what in temps_]
                    done_params.update(pidx)
                    pg_at = {e[0]: e for e in c.pgrads}
                    st_tmp += param_grads(nid, node.tied, [pg_at[k] for k in pidx if k in pg_at])
                    mem.event("backward", nid, node.name)
                    for sid in stage_tmp:
                        mem.decref(sid)
                    stage_tmp = st_tmp
                    for idx in release:
                        if idx < len(sv) and sv[idx] is not None:
                            mem.decref(sv[idx])
                            sv[idx] = None
            new_grads = []
            for i, kind, nb, what in c.grads_in:
                k = keys[i]
                if kind == _G_ALIAS:
                    incref(g0)
                    new_grads.append((k, g0, nb))
                elif kind == _G_STAGE and stage_tmp:
                    # the last backward stage already made this input's gradient (its first temp)
                    new_grads.append((k, stage_tmp.pop(0), 0))
                elif kind == _G_T:
                    new_grads.append((k, alloc(nb, G, 1, what), 0))
                else:
                    new_grads.append((k, alloc(nb, G, 1, (k[0], "gradient")), 0))
            if stage_tmp:
                tmp += stage_tmp
            # parameter gradients (AccumulateGrad keeps them as p.grad). Under autocast the op
            # makes low-precision gradients; ToCopyBackward0 casts them to fp32 after the op's
            # saved tensors and incoming gradient are released.
            halves = _NONE
            if op.param_grads and c.pgrads:
                pg = [e for e in c.pgrads if e[0] not in done_params] if done_params else c.pgrads
                if amp:
                    halves = []
                    for _, name, nb, numel in pg:
                        halves.append((mem.alloc(numel * DTYPE_BYTES[amp], G, 1, (nid, "low-precision grad")), nb,
                                       name))
                else:
                    tmp += param_grads(nid, node.tied, pg)
            mem.event("backward", nid, node.name)
            for sid in tmp:
                decref(sid)
            if rsid is not None:
                decref(rsid)
            if si is not None and nid == segments[si][0]:
                for sid in recomputed[si].values():
                    mem.decref(sid)
                recomputed[si] = {}
                for sid in seg_inputs.pop(si, []):
                    mem.decref(sid)
            for sid in saved_of.pop(nid, _NONE):
                if sid is not None:
                    decref(sid)
            for g in g_out:
                if g is not None:
                    decref(g)
            for half, nb, pname in halves:
                pkey = node.tied.get(pname) or f"{nid}.{pname}"
                if accum:  # cast to fp32, added into .grad in place
                    part = mem.alloc(nb, G, 1, (nid, pname + " gradient (added to .grad)"))
                    mem.mark(("backward", nid))
                    mem.decref(half)
                    mem.decref(part)
                    continue
                if pkey in grad_owned:  # a shared parameter: summed into a new .grad, as in fp32
                    part = mem.alloc(nb, G, 1, (nid, pname + " gradient contribution"))
                    mem.mark(("backward", nid))
                    mem.decref(half)  # cast to fp32: the low-precision gradient is gone
                    total = mem.alloc(nb, G, 1, (nid, pname + " gradient sum"))
                    mem.mark(("backward", nid))
                    mem.decref(part)
                    mem.decref(total)
                    continue
                grad_owned.add(pkey)
                gsid = mem.alloc(nb, G, 1, (nid, pname + ".grad"))
                if fs is not None:
                    fs.grad_made(nid, gsid)
                mem.mark(("backward", nid))
                mem.decref(half)
            if tp is not None and nid in tp.bwd_allreduce:
                for _k, g, _ in new_grads:  # colwise Linear: its partial input gradient all-reduced
                    t_ = mem.alloc(mem.nb[g], G, 1, (nid, "tensor-parallel all-reduce of the input gradient"))
                    mem.mark(("backward", nid))
                    mem.decref(t_)
            for k, g, view_nb in new_grads:
                old = grads.get(k)
                if old is None:
                    grads[k] = g
                else:
                    # autograd sums a fan-in's gradients into a new tensor (add.Tensor) as the
                    # tracked reference run shows; both summands die right after. The sum has
                    # the tensor's own size, also when a summand is a slice of a bigger gradient
                    # (Concat's backward: DenseNet's features read by every later layer's cat)
                    summed = mem.alloc(view_nb or mem.nb[g], G, 1, "accumulated gradient")
                    mem.mark(("backward", nid))
                    mem.decref(old)
                    mem.decref(g)
                    grads[k] = summed
        for k, g in grads.items():
            if g is not None:
                if k == (input_grads_at, 0) and input_grads_at not in grad_mode:
                    held_outputs.append(g)  # that leaf's .grad: it lives as long as the leaf
                else:
                    mem.decref(g)
        for sv in saved_of.values():
            _release(mem, sv)
        if fs is not None:  # the root's final callback runs inside backward(): ones_like(loss) is alive
            fs.where = ("backward", None)
            fs.backward_end(mem, fcats)
        if ones is not None:
            mem.decref(ones)
        for sid in carried.pop(INFLIGHT, ()):  # other micro-batches' activations, pending sends: done
            mem.decref(sid)
        merge = getattr(design, "stage_merge_bytes", 0)
        if merge:  # the last pipeline stage returns torch.cat of every micro-batch's output
            t_ = mem.alloc(merge, A, 1, "merged outputs of the micro-batches (torch.cat)")
            mem.mark(("backward", None))
            mem.decref(t_)
        self.phase_peaks["backward"] = mem.ppeak

        # -- optimizer step ----------------------------------------------------------------
        mem.begin_phase("optimizer_step")
        mem.mark(("optimizer_step", None))
        if offload:
            self.host_bytes += fs.host_grads
        elif opt in ("adam", "adamw"):
            if s.use_foreach:
                total = sum(nb for _, nb, _ in local) * sf
                t = mem.alloc(total, K, 1, "Adam step temporary: _foreach_sqrt of every exp_avg_sq")
                mem.event("optimizer_step", None, "adam (foreach)")
                mem.decref(t)
            else:
                # for-loop Adam: sqrt(exp_avg_sq) and the div denominator of parameter i, while the
                # previous parameter's denominator is only freed when the next one is made
                prev = None
                for nid, nb, _, _ in param_order.loop_order(design, trainable, shapes, pnames, owned):
                    nb *= sf
                    t1 = mem.alloc(nb, K, 1, (nid, "Adam step temporary: sqrt(exp_avg_sq)"))
                    t2 = mem.alloc(nb, K, 1, (nid, "Adam step temporary: denominator"))
                    mem.mark(("optimizer_step", nid))  # raises this parameter's event if it has one
                    last = events[-1]
                    if last.phase != "optimizer_step" or last.node != nid:
                        events.append(Event("optimizer_step", nid, nodes[nid].name, mem.cur, tuple(mem.by), mem.rcur))
                    if prev is not None:
                        mem.decref(prev)
                    mem.decref(t1)
                    prev = t2
                if prev is not None:
                    mem.decref(prev)
        elif opt == "adafactor":
            prev: list = []
            for nid, _, numel, shape in param_order.loop_order(design, trainable, shapes, pnames, owned):
                temps = [mem.alloc(nb, K, 1, (nid, "Adafactor step temporary")) for nb in
                         optim_state.step_temps(opt, shape, numel, pitem)]
                mem.mark(("optimizer_step", nid))
                last = events[-1]
                if last.phase != "optimizer_step" or last.node != nid:
                    events.append(Event("optimizer_step", nid, nodes[nid].name, mem.cur, tuple(mem.by), mem.rcur))
                for sid in prev:
                    mem.decref(sid)
                prev = temps
            for sid in prev:
                mem.decref(sid)
        elif opt != "none":  # SGD, momentum and bnb's fused 8-bit kernels update in place: nothing new
            seen = set()
            for nid, _, _ in local:
                if nid not in seen:
                    seen.add(nid)
                    events.append(Event("optimizer_step", nid, nodes[nid].name, mem.cur, tuple(mem.by), mem.rcur))
        self.phase_peaks["optimizer_step"] = mem.ppeak
        for sid in held_outputs + loss_sids:
            mem.decref(sid)
        return self

    # ----------------------------------------------------------------------------------
    @staticmethod
    def _scope_holds(order, nodes, in_edges):
        """A module call keeps its input alive in the caller's frame until the call returns
        (``return self.conv(x)`` holds ``x``; nn.Sequential's loop variable holds each child's
        input). A scope is the chain of module calls an op ran in, outermost first, joined by
        '/' ("features/features.3/features.3.conv"). For every call in the chain: the values its
        ops read from outside are held from its first op until its last op ran."""
        groups: dict[str, list] = {}
        for i, nid in enumerate(order):
            scope = nodes[nid].scope
            if not scope:
                continue
            parts = scope.split("/")
            for k in range(1, len(parts) + 1):
                g = groups.setdefault("/".join(parts[:k]), [i, i, set()])
                g[1] = i
                g[2].add(nid)
        holds_at: dict[str, list] = {}
        release_at: dict[str, list] = {}
        for gid, (first, last, members) in groups.items():
            ext = []
            for nid in members:
                for e in in_edges[nid]:
                    key = (gid, (e.src, e.src_port))
                    if e.src not in members and key not in ext:
                        ext.append(key)
            if ext and last > first:
                holds_at.setdefault(order[first], []).extend(ext)
                release_at.setdefault(order[last], []).extend(ext)
        return holds_at, release_at


"""The loss and the backward pass: ``loss = out.mean()`` on every output that requires grad, then
each recorded op's backward in reverse order (its transients, its input gradients, AccumulateGrad's
parameter gradients, autocast's casts), freeing what the op saved; fan-ins sum their gradients."""

from __future__ import annotations

import math

from memdesigner.engine.checkpoint_rerun import rerun_segment
from memdesigner.engine.compiled_rule import G_ALIAS, G_STAGE, G_T, op_table
from memdesigner.engine.compiled_rule import NONE as _NONE
from memdesigner.engine.live_set import A, Event, G, K, LiveSet, _tuple_new, release_all
from memdesigner.engine.param_state import INFLIGHT
from memdesigner.units import DTYPE_BYTES


def run_loss(sim, r) -> None:
    """The loss of every output that requires grad. With a Loss node that op is the loss, and
    the other tensors the model returns with it (an imported model's ``(loss, logits)``, Node.output)
    join it as the truth harness's step does: ``loss.mean() + logits.mean()``."""
    an, mem, order, st, nodes = r.an, r.mem, r.order, r.st, r.nodes
    val_sid, val_spec, cast_cache, amp = r.val_sid, r.val_spec, r.cast_cache, r.amp
    has_loss_node, sinks = st.has_loss_node, st.sinks
    # -- loss --------------------------------------------------------------------------
    loss_sids = []
    grads: dict[tuple, int] = {}
    for nid in filter(sinks.__contains__, order):  # (outputs no op reads: the only candidates)
        if has_loss_node and not (nodes[nid].output and nodes[nid].type != "Loss"):
            continue
        key = st.base[nid]  # its first output
        if an.nodes[nid].outputs and val_sid[key] is not None and val_spec[key][2]:
            ldt = val_spec[key][1]
            loss_sids.append(mem.alloc(DTYPE_BYTES[ldt], A, 1, "loss = out.mean()"))
            grads[key] = None  # filled in backward
    if amp:
        for sid in cast_cache.values():
            mem.decref(sid)
    mem.event("forward", None, "loss")
    sim.phase_peaks["forward"] = mem.ppeak
    r.loss_sids, r.grads = loss_sids, grads


def run_backward(sim, r) -> None:
    """Backward from the loss's seed down to the first op that requires grad."""
    design, an, mem, nodes, order, st = r.design, r.an, r.mem, r.nodes, r.order, r.st
    dtype, amp, batch, rnd = r.dtype, r.amp, r.batch, r.rnd
    fs, tp, carried, fcats, accum = r.fs, r.tp, r.carried, r.fcats, r.accum
    base_of, n_out, vkey, has_loss_node = st.base, st.n_out, st.vkey, st.has_loss_node
    val_spec, saved_at, ctx_at = r.val_spec, r.saved_at, r.ctx_at  # (per op by its place in the order)
    held_outputs, seg_of, segments, seg_inputs, seg_live = r.held_outputs, r.seg_of, r.segments, r.seg_inputs, r.seg_live
    input_grads_at, loss_sids, grads = r.input_grads_at, r.loss_sids, r.grads
    # -- backward ----------------------------------------------------------------------
    mem.begin_phase("backward")
    # no output requires grad (an Input alone, everything frozen): there is no loss to seed
    # and no backward (PyTorch's backward() would refuse), not a phantom 4-byte seed
    seeded = has_loss_node or bool(loss_sids)
    ones = mem.alloc(DTYPE_BYTES[amp or dtype], G, 1, "ones_like(loss)") if seeded else None  # the loss's dtype
    for key in list(grads):
        knid, kj = st.vkey[key]
        shape = an.nodes[knid].outputs[kj].shape
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
    grads_pop = grads.pop
    rcl, free = mem.rc, mem._release
    # the ops the fast path below may run: none under FSDP, checkpointing, autocast, tensor
    # parallelism, gradient accumulation or with shared (tied) parameters; not a multi-stage op
    fast = fs is None and not seg_of and not amp and tp is None and not accum and not st.has_tied
    alloc, incref, decref = mem.alloc, mem.incref, mem.decref
    # a plain live set with no capture and no trace: the fast path runs alloc() and event() inline,
    # without the rounding slack (LiveSet.slack: only a trace reads it)
    lean = mem.__class__ is LiveSet and mem.capture is None and mem.trace is None and mem.events is not None
    nbl, by, rnbl, catl = mem.nb, mem.by, mem.rnb, mem.cat
    # (no labels: a lean run has no capture to read them, LiveSet.what)
    nb_app, rnb_app, cat_app, rc_app = nbl.append, mem.rnb.append, mem.cat.append, rcl.append
    nb_ext, rnb_ext, cat_ext, rc_ext = nbl.extend, mem.rnb.extend, mem.cat.extend, rcl.extend
    ev_app = mem.events.append if mem.events is not None else None
    events = mem.events
    rel, mk = mem.rel, mem.marks  # a replay's log (LiveSet.rel / marks), kept inline too
    ins_l, base_l, nout_l = op_table(st)
    for place, nid, keys, b, k_, name in zip(range(len(order) - 1, -1, -1), reversed(order), reversed(ins_l),
                                         reversed(base_l), reversed(nout_l), reversed(r.names)):
        if fs is not None:
            fs.where = ("backward", nid)
            fs.before_backward_op(mem, nid, fcats)
        c = ctx_at[place]  # (the ops that recorded for backward)
        if c is None:
            continue
        if k_ == 1:
            g0 = grads_pop(b, None)
            g_out = (g0,)
        else:
            g_out = [grads_pop(v, None) for v in range(b, b + k_)]
            g0 = next((g for g in g_out if g is not None), None)
        if loss_node_ones and nodes[nid].type == "Loss":
            g0 = ones
            g_out = (ones,)
            mem.incref(ones)
        if g0 is None:  # no gradient reached this op's outputs
            release_all(mem, saved_at[place] or ())
            saved_at[place] = None
            continue
        if fast and not c.stages:
            # the general path below, less what this op has no part in
            if not c.bwd_temps:
                tmp = _NONE
            elif lean:  # alloc(), inlined
                tmp = []
                for nb, _ in c.bwd_temps:
                    tmp.append(len(nbl))
                    nb_app(nb)
                    if rnd > 1 and nb:
                        rn = -(-nb // rnd) * rnd
                    else:
                        rn = nb
                    rnb_app(rn)
                    cat_app(K)
                    rc_app(1)
                    mem.cur += nb
                    mem.rcur += rn
                    by[K] += nb
            else:
                tmp = [alloc(nb, K, 1, what) for nb, what in c.bwd_temps]
            # its new input gradients, then its parameters' gradients (param_grads(), without
            # accumulation or shared parameters): one block of storages, base, base + 1, ...
            gb = c.grad_blocks.get(rnd) or c.grad_block(rnd)
            base = len(nbl)
            if lean:  # alloc() and alloc_exact(), inlined, for the whole block
                if gb.nbs:
                    nb_ext(gb.nbs)
                    rnb_ext(gb.rns)
                    cat_ext(gb.cats)
                    rc_ext(gb.ones)
                    mem.cur += gb.nb_sum
                    mem.rcur += gb.rn_sum
                    by[G] += gb.nb_sum
            else:
                for i, nb, what in zip(gb.inputs, gb.nbs, gb.labels):  # (the input gradients)
                    alloc(nb, G, 1, what or (vkey[keys[i]][0], "gradient"))
                if gb.pgrad_at is not None:
                    mem.alloc_exact(c.pgrad_bytes, gb.pgrad_rounded, G, (nid, "parameter gradients"))
            if gb.n_alias:  # inputs whose gradient is the outgoing one itself: a reference each
                rcl[g0] += gb.n_alias
            if lean:  # event(), inlined (no capture, no trace)
                cur, rcur = mem.cur, mem.rcur
                if mk is not None:
                    mk += (len(nbl), len(rel))
                if cur > mem.ppeak:
                    mem.ppeak = cur
                if rcur > mem.rpeak:
                    mem.rpeak = rcur
                by_ = tuple(by)
                if cur > mem.peak:
                    mem.peak = cur
                    mem.peak_by = by_
                    mem.peak_at = ("backward", nid)
                ev_app(_tuple_new(Event, ("backward", nid, name, cur, by_, rcur)))
            else:
                mem.event("backward", nid, name)
            for sid in tmp:
                decref(sid)
            # what the op saved, then its incoming gradients (decref inlined: the refcounts, the
            # _release hook); the popped list is this op's own, so the gradients join it
            sv = saved_at[place]
            saved_at[place] = None
            if sv is None:
                sv = g_out
            else:
                sv += g_out
            for sid in sv:
                if sid is not None:
                    x = rcl[sid] - 1
                    rcl[sid] = x
                    if x == 0:
                        if lean:  # _release(), inlined
                            if rel is not None:
                                rel.append(sid)
                            nb = nbl[sid]
                            mem.cur -= nb
                            mem.rcur -= rnbl[sid]
                            by[catl[sid]] -= nb
                        else:
                            free(sid)
            # each input's new gradient (GradBlock.grads: its place in the block, or the outgoing
            # gradient itself), summed into the one already there (a fan-in)
            for i, at, view_nb in gb.grads:
                k = keys[i]
                g = g0 if at is None else base + at
                old = grads.get(k)
                if old is None:
                    grads[k] = g
                elif not lean:  # (the general path's sum below)
                    summed = alloc(view_nb or mem.nb[g], G, 1, "accumulated gradient")
                    mem.mark(("backward", nid))
                    decref(old)
                    decref(g)
                    grads[k] = summed
                else:  # the same, with alloc(), mark() and the summands' decref() inlined
                    nb = view_nb or nbl[g]
                    grads[k] = len(nbl)
                    nb_app(nb)
                    if rnd > 1 and nb:
                        rn = -(-nb // rnd) * rnd
                    else:
                        rn = nb
                    rnb_app(rn)
                    cat_app(G)
                    rc_app(1)
                    mem.cur = cur = mem.cur + nb
                    mem.rcur = rcur = mem.rcur + rn
                    by[G] += nb
                    # mark(): the last event is this op's own; the sum raises it when higher
                    if mk is not None:
                        mk += (len(nbl), len(rel))
                    if cur > mem.ppeak:
                        mem.ppeak = cur
                    if rcur > mem.rpeak:
                        mem.rpeak = rcur
                    if cur > mem.peak:
                        mem.peak = cur
                        mem.peak_by = tuple(by)
                        mem.peak_at = ("backward", nid)
                    last = events[-1]
                    if cur > last.bytes:
                        events[-1] = _tuple_new(Event, ("backward", nid, last.label, cur, tuple(by), rcur))
                    for sid in (old, g):
                        x = rcl[sid] - 1
                        rcl[sid] = x
                        if x == 0:  # _release(), inlined
                            if rel is not None:
                                rel.append(sid)
                            nb = nbl[sid]
                            mem.cur -= nb
                            mem.rcur -= rnbl[sid]
                            by[catl[sid]] -= nb
            continue
        node = nodes[nid]
        op = c.op
        si = seg_of.get(nid) if seg_of else None
        if si is not None and si not in recomputed:
            # entering a checkpointed segment from its end: rerun its forward with grad
            recomputed[si] = rerun_segment(mem, sim.table.recompute, segments[si], seg_live.get(si, ()), nid)
        rsid = recomputed[si].pop(nid, None) if si is not None else None
        tmp = [alloc(nb, K, 1, what) for nb, what in c.bwd_temps]
        done_params = _NONE
        stage_tmp: list = []
        if c.stages:
            done_params = set()
            # a multi-layer op (stacked LSTM) runs its backward layer by layer: each stage
            # makes that layer's gradients, then releases what that layer kept
            sv = saved_at[place] or []
            if op.grad_out_stands_in and g0 is not None and rcl[g0] > 1:
                # another reader holds the incoming gradient (the other branch of a residual Add):
                # it outlives the op's first node, so its bytes stand for nothing the stages make
                tmp.append(alloc(mem.nb[g0], G, 1, (nid, "incoming gradient, also held by another reader")))
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
            if kind == G_ALIAS:
                incref(g0)
                new_grads.append((k, g0, nb))
            elif kind == G_STAGE and stage_tmp:
                # the last backward stage already made this input's gradient (its first temp)
                new_grads.append((k, stage_tmp.pop(0), 0))
            elif kind == G_T:
                new_grads.append((k, alloc(nb, G, 1, what), 0))
            else:
                new_grads.append((k, alloc(nb, G, 1, (vkey[k][0], "gradient")), 0))
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
        for sid in saved_at[place] or _NONE:
            if sid is not None:
                decref(sid)
        saved_at[place] = None
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
    # the value of the leaf input_grads_at made (its first output), if any
    leaf_v = base_of[input_grads_at] if input_grads_at in base_of and n_out[input_grads_at] else -1
    for k, g in grads.items():
        if g is not None:
            if k == leaf_v and ctx_at[st.position[input_grads_at]] is None:
                held_outputs.append(g)  # that leaf's .grad: it lives as long as the leaf
            else:
                mem.decref(g)
    for sv in saved_at:
        if sv is not None:
            release_all(mem, sv)
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
    sim.phase_peaks["backward"] = mem.ppeak

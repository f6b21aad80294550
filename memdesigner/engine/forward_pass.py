"""The forward pass: every op allocates its outputs and transients, autograd keeps what the op
saves, and each value dies when its last consumer ran (or, in training, when the backward that
saved it ran). Module calls hold their inputs; activation checkpointing keeps only a segment's
input and notes what its rerun will make again."""

from __future__ import annotations

from itertools import count
from operator import attrgetter

from memdesigner.engine.checkpoint_segments import checkpoint_segments
from memdesigner.engine.compiled_rule import NONE as _NONE
from memdesigner.engine.compiled_rule import (
    RULES,
    S_EXTRA,
    S_IN,
    S_OUT,
    S_PARAM,
    CompiledRule,
    nbytes,
    op_ids,
    op_table,
    settings_id,
)
from memdesigner.engine.live_set import A, Event, K, LiveSet, _tuple_new, release_all
from memdesigner.model.design import GC_HELD
from memdesigner.model.oprules import In, MemCtx, Out, T

_NAME = attrgetter("name")


def _ordinary(st, special: set) -> list:
    """Per op of the order: not in ``special`` (the fast path may run it); for the structure's
    own set kept on it, so that a run tests no node id against the set."""
    if special is not st.special:
        return [n not in special for n in st.order]
    memo = st.__dict__.get("_ordinary")
    if memo is None:
        memo = st.__dict__["_ordinary"] = [n not in special for n in st.order]
    return memo


def run_forward(sim, r) -> None:
    """Runs every valid op once; leaves on ``r`` what the loss and backward read."""
    s, design, an, mem, nodes, order, st = r.s, r.design, r.an, r.mem, r.nodes, r.order, r.st
    train, dtype, amp, batch, pitem = r.train, r.dtype, r.amp, r.batch, r.pitem
    fs, tp, carried, fcats = r.fs, r.tp, r.carried, r.fcats
    ins, base_of, refs_of, vkey, sinks, has_loss_node = st.ins, st.base, st.refs, st.vkey, st.sinks, st.has_loss_node
    nv = len(vkey)
    val_sid: list = [None] * nv  # per value (sim_structure.Structure): its storage, once made
    # per value: (full shape, dtype, requires grad, strides): what the next op's rule reads; and
    # that spec's number (compiled_rule.spec_id), for the rule cache's key
    val_spec: list = [None] * nv
    val_key: list = [None] * nv
    # per op, by its place in the order (a list, not a dict by node: no hashing, no probing), for the
    # ops that recorded for backward: the storages it saved, and its compiled rule (and .op)
    saved_at: list = [None] * len(order)
    ctx_at: list = [None] * len(order)
    cast_cache: dict[tuple, int] = {}  # (node, param index) -> sid (autocast weight cache)
    held_outputs: list[int] = []
    segments, seg_of, layerwise = checkpoint_segments(s, order, nodes, st.in_edges)
    sim.recomputed = [nid for seg in segments for nid in seg]  # forward ops run again in backward
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
    skey = settings_id((dtype, train, s.backend, amp, batch))

    fused_inner = st.fused_inner if not train and not amp else None
    holds_at, release_at = st.holds_at, st.release_at
    held = set()
    position = st.position
    local_release: dict[str, list] = {}
    if fs is not None:
        fs.forward_begin(mem, fcats)
    rules = RULES
    alloc, incref, decref = mem.alloc, mem.incref, mem.decref
    an_nodes = an.nodes
    sim.base_bytes = mem.cur  # before the first op (the batch is the Input op's output)
    # the ops the fast path below may run: none under FSDP or checkpointing; not the ops with a
    # part to play beyond their rule (graph inputs and outputs, module-call holds, Python
    # references, fused groups, tensor-parallel collectives, the leaf HF's checkpointing makes)
    fast = fs is None and not segments
    special = st.special
    if fast and (fused_inner or input_grads_at is not None or tp is not None):
        special = special | (fused_inner or set()) | ({input_grads_at} if input_grads_at is not None else set()) \
            | (set(tp.fwd_allreduce) if tp is not None else set())
    table = sim.table
    ran = table.ops.append  # per op: its compiled rule, or (activation bytes, kept bytes) (engine/row_table.py)
    recompute = table.recompute
    rcl, free = mem.rc, mem._release
    # a plain live set with no capture and no trace: the fast path runs alloc() and event() inline,
    # without the rounding slack (LiveSet.slack: only a trace reads it)
    lean = mem.__class__ is LiveSet and mem.capture is None and mem.trace is None and mem.events is not None
    nbl, rnd, by, rnbl, catl = mem.nb, mem.round, mem.by, mem.rnb, mem.cat
    # (no labels: a lean run has no capture to read them, LiveSet.what)
    nb_app, rnb_app, cat_app, rc_app = nbl.append, mem.rnb.append, mem.cat.append, rcl.append
    nb_ext, rnb_ext, cat_ext, rc_ext = nbl.extend, mem.rnb.extend, mem.cat.extend, rcl.extend
    ev_app = mem.events.append if mem.events is not None else None
    rel, mk = mem.rel, mem.marks  # a replay's log (LiveSet.rel / marks), kept inline too
    ins_l, base_l, _ = op_table(st)
    names = r.names = list(map(_NAME, map(nodes.__getitem__, order)))  # (the events' labels, read in C)
    for place, nid, oid, keys, v0, name, ordinary in zip(count(), order, op_ids(design, an, order), ins_l, base_l,
                                                        names, _ordinary(st, special)):
        mkey = (skey, oid, val_key[keys[0]]) if len(keys) == 1 else (skey, oid, tuple([val_key[k] for k in keys]))
        c = rules.get(mkey)
        if c is not None:
            op = c.op
        else:
            info = an_nodes[nid]
            props, outputs, params = info.props, info.outputs, info.params
            specs = [val_spec[k] for k in keys]
            lt = nodes[nid].layer
            m = MemCtx(
                props=props, in_shapes=[sp[0] for sp in specs], in_dtypes=[sp[1] for sp in specs],
                out_shapes=[(batch,) + o.shape for o in outputs], out_kinds=[o.kind for o in outputs],
                params=params, dtype=dtype, grad=train, training=train, in_rg=[sp[2] for sp in specs],
                backend=s.backend, amp=amp, batch=batch, in_strides=[sp[3] for sp in specs],
            )
            op = lt.memory(m)
            c = CompiledRule(m, op, outputs, params, pitem)
            if len(rules) > 20000:
                rules.clear()
            rules[mkey] = c
        if not c.affine:
            sim.affine = False
        records = c.records
        if fast and c.plain and ordinary:
            # the general path below, less what this op has no part in
            if not c.temps:
                tmp_sids = _NONE
            elif lean:  # alloc(), inlined
                tmp_sids = []
                for nb, _ in c.temps:
                    tmp_sids.append(len(nbl))
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
                tmp_sids = [alloc(nb, K, 1, what) for nb, what in c.temps]
            # its new outputs, then its saved extras: one block of storages, base, base + 1, ...
            blk = c.blocks.get(rnd) or c.block(rnd)
            base = len(nbl)
            if lean:  # alloc(), inlined, for the whole block
                if blk.nbs:
                    nb_ext(blk.nbs)
                    rnb_ext(blk.rns)
                    cat_ext(blk.cats)
                    rc_ext(blk.ones)
                    mem.cur += blk.nb_sum
                    mem.rcur += blk.rn_sum
                    by[A] += blk.nb_sum
            else:
                for nb, what in zip(blk.nbs, blk.labels):
                    alloc(nb, A, 1, (nid, what))
            if blk.one:
                out_sids = [base]
            else:
                out_sids = []
                for o in blk.outs:
                    if o < 0:  # it shares input ~o's storage
                        src_sid = val_sid[keys[~o]]
                        rcl[src_sid] += 1
                        out_sids.append(src_sid)
                    else:
                        out_sids.append(base + o)
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
                    mem.peak_at = ("forward", nid)
                ev_app(_tuple_new(Event, ("forward", nid, name, cur, by_, rcur)))
            else:
                mem.event("forward", nid, name)
            for sid in tmp_sids:
                decref(sid)
            if records:
                sv = []
                for kind, x in blk.saved:
                    if kind == S_IN:
                        sid = val_sid[keys[x]]
                        rcl[sid] += 1
                        sv.append(sid)
                    elif kind == S_OUT:
                        sid = out_sids[x]
                        rcl[sid] += 1
                        sv.append(sid)
                    elif kind == S_EXTRA:  # its place in the block
                        sv.append(base + x)
                    else:
                        sv.append(None)  # a parameter: kept anyway (no autocast copy: not plain)
                saved_at[place] = sv
                ctx_at[place] = c
                grads_here = 1
            else:  # (decref inlined below: the live set's refcounts, its _release hook)
                for sid in range(base + blk.n_outs, base + len(blk.nbs)):  # its extras: nothing keeps them
                    decref(sid)
                grads_here = 0
            v = v0
            if blk.one:  # the loop below, for its one new output
                refs = refs_of[v]
                val_sid[v] = base
                val_spec[v] = c.specs[0][grads_here]
                val_key[v] = c.spec_ids[0][grads_here]
                if refs == 0:
                    decref(base)
                elif refs > 1:
                    rcl[base] += refs - 1
            else:
                specs_, ids_ = c.specs, c.spec_ids
                for j, sid in enumerate(out_sids):
                    refs = refs_of[v]
                    val_sid[v] = sid
                    val_spec[v] = specs_[j][grads_here]
                    val_key[v] = ids_[j][grads_here]
                    if refs == 0:
                        decref(sid)
                    elif refs > 1:
                        rcl[sid] += refs - 1
                    v += 1
            for k in keys:
                sid = val_sid[k]
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
            ran(c)  # (its row: c.new_bytes, c.kept)
            continue
        node = nodes[nid]
        if fs is not None:
            fs.where = ("forward", nid)
            fs.before_op(mem, nid, position[nid], fcats, any(val_spec[k][2] for k in keys))
        if nid in holds_at:
            for hk in holds_at[nid]:
                if val_sid[hk[1]] is not None:
                    incref(val_sid[hk[1]])
                    held.add(hk)
        ckpt = records and nid in seg_of
        if ckpt and seg_of[nid] not in seg_base:  # the segment's first op that records
            members = set(segments[seg_of[nid]])
            ext = [val_sid[k] for m_ in segments[seg_of[nid]] for k in ins[m_]
                   if vkey[k][0] not in members and val_sid[k] is not None]
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
                    alias_of[(nid, j)] = alias_of.get(vkey[keys[o]], vkey[keys[o]])
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
                    sid_ = val_sid[base_of[key[0]] + key[1]]
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
            sim.persisted[nid] = [mem.nb[sid] for sid in out_sids if sid is not None]
            for sid in out_sids:
                if sid is not None:
                    incref(sid)
                    held_outputs.append(sid)
        # what autograd keeps
        if records:
            sv = []
            for kind, x in c.saved:
                if kind == S_EXTRA:
                    sv.append(extra_sids[x])
                elif kind == S_IN:
                    sid = val_sid[keys[x]]
                    incref(sid)
                    sv.append(sid)
                elif kind == S_OUT:
                    incref(out_sids[x])
                    sv.append(out_sids[x])
                elif kind == S_PARAM and x in cast_sid:
                    incref(cast_sid[x])
                    sv.append(cast_sid[x])
                else:
                    sv.append(None)  # a parameter: kept anyway
            saved_at[place] = sv
            ctx_at[place] = c
        else:
            for sid in extra_sids.values():
                decref(sid)
        ku = node.keep_until
        if ku == GC_HELD:
            # in a reference cycle: freed when Python's cyclic garbage collector runs, after
            # the step as measured (Keras 3.15 models); without gc_holds, when the forward returns
            if sim.gc_holds and out_sids:
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
        b = base_of[nid]
        for j, sid in enumerate(out_sids):
            v = b + j
            refs = refs_of[v]
            if j == 0 and nid in sinks and (refs == 0 or node.output) and \
                    (not has_loss_node or node.type == "Loss" or not train or node.output):
                refs += 1
                held_outputs.append(sid)
            if is_input:
                refs += 1  # the caller keeps the batch alive
            val_sid[v] = sid
            val_spec[v] = c.specs[j][grads_here]
            val_key[v] = c.spec_ids[j][grads_here]
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
        ran((out_bytes, kept))
        if ckpt:
            # checkpointed: nothing is kept now; backward recomputes the segment first
            release_all(mem, saved_at[place] or ())
            saved_at[place] = None
            last = nid == segments[seg_of[nid]][-1]
            recompute[nid] = kept + (0 if last else out_bytes)
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
                        ss.setdefault(alias_of.get(vkey[keys[t.i]], vkey[keys[t.i]]), nid)
                    elif isinstance(t, Out):
                        ss.setdefault(alias_of.get((nid, t.j), (nid, t.j)), nid)
                for j, o in enumerate(op.outputs):
                    if isinstance(o, T):
                        new_out[(nid, j)] = 0 if hidden else nbytes(o)
                recompute[nid] = kept
        if fs is not None:
            fs.after_op(mem, nid, position[nid])
    if layerwise:
        for si, savers in layer_saved.items():
            for key, saver in savers.items():
                if key in new_out and key[0] in seg_of and seg_of[key[0]] == si:
                    recompute[saver] += new_out[key]
    if fs is not None:
        fs.forward_end(mem)
    sim.fwd_end_bytes = mem.cur  # what the forward leaves alive for backward (and its output)
    sim.phase_peaks["forward"] = mem.ppeak
    r.val_sid, r.val_spec, r.saved_at, r.ctx_at = val_sid, val_spec, saved_at, ctx_at
    r.cast_cache, r.held_outputs, r.seg_of, r.segments = cast_cache, held_outputs, seg_of, segments
    r.seg_inputs, r.seg_live, r.input_grads_at = seg_inputs, seg_live, input_grads_at

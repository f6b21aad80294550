"""What lives before the first op of a step: weights and buffers, optimizer state (steady state,
step 2), DDP's gradient buckets, FSDP2's sharded layout, storages an earlier step left alive, and
the gradients earlier micro-steps accumulated. Also the per-layer parameter rows."""

from __future__ import annotations

from operator import attrgetter

from memdesigner.engine import distributed, fsdp, optim_state, param_order, tensor_parallel
from memdesigner.engine.compiled_rule import FLOATS, settings_id
from memdesigner.engine.live_set import A, G, K, O, W
from memdesigner.engine.row_table import RowTable
from memdesigner.units import DTYPE_BYTES

INFLIGHT = "<in-flight micro-batches>"  # carried storage freed when backward ends (engine/pipeline_parallel.py)


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


_LAYERS: dict = {}
_ZERO_ROW = {"params": 0, "non_trainable": 0, "param_bytes": 0, "buffer_bytes": 0, "activation_bytes": 0,
             "kept_bytes": 0, "requires_grad": 0}


def _layer_sums(params: list, pdtype: str, bits: int | None, rnd: int, opt: str, master: bool, backend: str) -> tuple:
    """One layer's parameter sums without FSDP sharding or tied parameters (place_weights' loop,
    for one parameter list): (parameter bytes, buffer bytes, parameters, non-trainable, requiring
    grad, weight bytes, rounded, state bytes, rounded, paged state bytes, [(grad bytes, numel,
    shape, name) per parameter that requires grad], the layer's row)."""
    state_per_param = {"none": 0, "sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}.get(opt, 0)
    new_opt = opt in optim_state.NEW_OPTIMIZERS
    step_tensor = 4 if (opt in ("adam", "adamw") and backend == "cpu") else 0
    pitem = DTYPE_BYTES[pdtype]
    pb = bb = n_p = n_nt = n_rg = w = wr = st = sr = pg = 0
    entries = []
    for p, numel, trainable_, requires_grad, nb in _param_facts(params, pdtype, bits):
        if trainable_:
            pb += nb
            n_p += numel
        else:
            bb += nb
            n_nt += numel if p.dtype is None else 0
        w += nb
        wr += nb if rnd <= 1 else -(-nb // rnd) * rnd
        if requires_grad:
            n_rg += numel
            tb = numel * pitem
            entries.append((tb, numel, p.shape, p.name))
            if new_opt:
                raw, rr, pgb = optim_state.state_of(opt, p.shape, numel, backend, rnd)
                st += raw
                sr += rr
                pg += pgb
            elif state_per_param:
                sb = numel * 4 if master else tb
                st += state_per_param * sb + step_tensor
                sr += state_per_param * (sb if rnd <= 1 else -(-sb // rnd) * rnd) + step_tensor
            if master:
                mb = numel * 4
                st += mb
                sr += mb if rnd <= 1 else -(-mb // rnd) * rnd
    row = {"params": n_p, "non_trainable": n_nt, "param_bytes": pb, "buffer_bytes": bb, "activation_bytes": 0,
           "kept_bytes": 0, "requires_grad": n_rg}  # the layer's parameter row (shared: engine/row_table.py)
    return pb, bb, n_p, n_nt, n_rg, w, wr, st, sr, pg, entries, row


_PARAMS = attrgetter("params")
_BITS = attrgetter("bits")
_TIED = attrgetter("tied")


def _placed_reads(infos: dict, nodes: dict) -> tuple | None:
    """What place_weights' loop reads per op without FSDP, for every node (a superset of the run's
    order, read in C): its parameter list (the analysis hands the same list until the layer
    changes) and bit width; None when some node has tied parameters."""
    if any(map(_TIED, nodes.values())):
        return None
    return list(map(_PARAMS, infos.values())), list(map(_BITS, nodes.values()))


def _placed_memo(st, lsid: int, reads: tuple | None) -> tuple | None:
    """The loop's results kept by _keep_placed for these settings, if it read the same."""
    if reads is None:
        return None
    hit = st.__dict__.get("_placed", {}).get(lsid)
    if hit is not None and hit[0] == reads[0] and hit[1] == reads[1]:  # (identical lists compare in C)
        return hit[2]
    return None


def _keep_placed(st, lsid: int, reads: tuple, results: tuple) -> None:
    memo = st.__dict__.setdefault("_placed", {})
    if len(memo) > 8:
        memo.clear()
    memo[lsid] = (*reads, results)


def place_weights(sim, r) -> None:
    """Allocates what the step holds from its start; sets the parameter facts on ``sim`` (rows,
    totals, trainable tensors, the data-parallel plan) and the optimizer facts on ``r``."""
    s, design, an, mem, nodes, order = r.s, r.design, r.an, r.mem, r.nodes, r.order
    train, pdtype = r.train, r.pdtype
    trainable: list[tuple[str, int, int]] = []  # (node, bytes, numel) per trainable tensor
    opt = s.optimizer if train else "none"
    state_per_param = {"none": 0, "sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}.get(opt, 0)
    new_opt = opt in optim_state.NEW_OPTIMIZERS
    master = train and s.master_weights and opt != "none"
    sf = 4 // DTYPE_BYTES[pdtype] if master else 1  # the step works on fp32 masters
    paged_total = 0
    pnames: list[str] = []  # per trainable tensor: its parameter name (engine/param_order.py)
    step_tensor = 4 if (opt in ("adam", "adamw") and s.backend == "cpu") else 0  # host tensor on CUDA
    pitem = DTYPE_BYTES[pdtype]
    rnd = sim.rounding
    weights_total = state_total = weights_r = state_r = 0
    # FSDP2 (zero2/zero3): sharded parameters, per-unit gathers and reduce-scatters (engine/fsdp.py)
    tp = tensor_parallel.plan_of(design)  # the collectives of tensor parallelism (None without)
    fs = (fsdp.FsdpStep(s.data_parallel, s.gpus, gloo=s.backend == "cpu", offload=s.offload == "params")
          if train and s.data_parallel in fsdp.FSDP_STRATEGIES else None)
    sim.fsdp = fs
    # per trainable tensor: its shape (the rank signature, the optimizers whose state follows the shape)
    sim.trainable_shapes = shapes = []
    uscope = (fsdp.unit_scopes(nodes, getattr(design, "node_rep", None), getattr(design, "unit_joins", None))
              if fs is not None else {})
    host_shards = 0
    sim.host_bytes = 0  # host RAM this rank needs for offloaded state (zero2/zero3 offload params)
    t_p = t_nt = t_rg = t_pb = t_bb = 0
    infos = an.nodes
    sim.table = table = RowTable(order)
    row_app = table.base.append  # per op: its parameter row (shared, never written: engine/row_table.py)
    lsid = settings_id(("layer sums", pdtype, rnd, opt, master, s.backend))  # what _layer_sums reads of them
    # without FSDP and tied parameters the loop below reads only each op's parameter list and bit
    # width: its results are kept on the graph's structure for the next run with the same ones
    reads = _placed_reads(infos, nodes) if fs is None else None
    placed = _placed_memo(r.st, lsid, reads)
    for nid in order if placed is None else ():
        params = infos[nid].params
        if not params:
            row_app(_ZERO_ROW)
            continue
        bits = nodes[nid].bits
        tied = nodes[nid].tied
        if fs is None and not tied:  # the common case: the layer's sums, memoised per parameter list
            lkey = (id(params), bits, lsid)
            hit = _LAYERS.get(lkey)
            if hit is None or hit[0] is not params:
                if len(_LAYERS) > 20000:
                    _LAYERS.clear()
                hit = _LAYERS[lkey] = (params, _layer_sums(params, pdtype, bits, rnd, opt, master, s.backend))
            pb, bb, n_p, n_nt, n_rg, w_, wr_, st_, sr_, pg_, entries, row = hit[1]
            weights_total += w_
            weights_r += wr_
            state_total += st_
            state_r += sr_
            paged_total += pg_
            for tb, numel, shape, pname in entries:
                shapes.append(shape)
                trainable.append((nid, tb, numel))
                pnames.append(pname)
            row_app(row)
            t_p += n_p
            t_nt += n_nt
            t_rg += n_rg
            t_pb += pb
            t_bb += bb
            continue
        pb = bb = n_p = n_nt = n_rg = 0
        for p, numel, trainable_, requires_grad, nb in _param_facts(params, pdtype, bits):
            if tied and p.name in tied:  # the same tensor as another layer's parameter: counted there
                continue
            if fs is not None and trainable_:
                nb = fs.add_param(uscope[nid], p.shape, pitem, nid if requires_grad else None,
                                  f"{nodes[nid].name}.{p.name}")  # this rank's padded shard
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
                    numel = fsdp.sharded_numel(p.shape, s.gpus, sim.rank or 0)
                    tb = numel * pitem
                shapes.append(p.shape)
                trainable.append((nid, tb, numel))
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
        row_app({"params": n_p, "non_trainable": n_nt, "param_bytes": pb, "buffer_bytes": bb,
                 "activation_bytes": 0, "kept_bytes": 0, "requires_grad": n_rg})
        t_p += n_p
        t_nt += n_nt
        t_rg += n_rg
        t_pb += pb
        t_bb += bb
    if placed is not None:
        (weights_total, weights_r, state_total, state_r, paged_total, shapes, trainable, pnames, table.base,
         t_p, t_nt, t_rg, t_pb, t_bb) = placed
        sim.trainable_shapes = shapes
    elif reads is not None:
        shapes, trainable, pnames, table.base = tuple(shapes), tuple(trainable), tuple(pnames), tuple(table.base)
        sim.trainable_shapes = shapes
        _keep_placed(r.st, lsid, reads, (weights_total, weights_r, state_total, state_r, paged_total, shapes,
                                         trainable, pnames, table.base, t_p, t_nt, t_rg, t_pb, t_bb))
    sim.totals = (t_p, t_nt, t_rg, t_pb, t_bb)  # over all valid nodes: params, non-trainable, requiring
    # grad, parameter bytes, buffer bytes
    if fs is not None:
        fs.finish_layout(order, uscope, getattr(design, "param_order", None))
    fcats = (W, G, K)
    # data parallel: this rank's optimizer shard, DDP's gradient buckets (engine/distributed.py)
    sim.trainable = trainable
    sim.plan = plan = distributed.plan_for(s, sim.rank, trainable, rnd) if train else None
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
        sim.host_bytes = host_shards + state_total + worst  # + the gradients (after backward)
        state_total = state_r = 0
    if new_opt:
        shared = optim_state.shared_bytes(opt, [t[2] for t in trainable])
        state_total += shared
        state_r += shared if rnd <= 1 else -(-shared // rnd) * rnd
    sim.paged_optimizer_bytes = paged_total  # unified memory: not on the device peak
    # weights and optimizer state live all step long: one block each (already rounded)
    mem.alloc_exact(weights_total, weights_r, W, "parameters and buffers (all layers)")
    if state_total:
        what = "this rank's shard" if local is not trainable else "all parameters"
        mem.alloc_exact(state_total, state_r, O, f"{opt} state ({what})")
    if plan is not None and plan.bucket_bytes:
        mem.alloc_exact(plan.bucket_bytes, plan.bucket_rounded, G, "DDP gradient buckets")
    carried: dict = {}
    for cnid, nb, label in sim.carry:
        carried.setdefault(cnid, []).append(mem.alloc(nb, A, 1, (cnid, label)))
    if sim.carry:
        mem.mark(("forward", None))
    # gradient accumulation: the last micro-step (the heaviest) starts with every .grad made
    # by the earlier ones; its own gradients are added in place (AccumulateGrad's add_), so
    # each is a transient of its op's backward
    accum = train and s.grad_accum > 1
    if accum:
        graw = sum(tb for _, tb, _ in trainable)
        mem.alloc_exact(graw, sum(tb if rnd <= 1 else -(-tb // rnd) * rnd for _, tb, _ in trainable), G,
                        f"gradients accumulated over {s.grad_accum - 1} earlier micro-steps")

    r.opt, r.sf, r.shapes, r.pitem, r.rnd = opt, sf, shapes, pitem, rnd
    r.fs, r.tp, r.local, r.offload, r.carried, r.accum, r.fcats = fs, tp, local, offload, carried, accum, fcats
    r.trainable, r.pnames, r.owned = trainable, pnames, owned

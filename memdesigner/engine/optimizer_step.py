"""The optimizer step: what ``opt.step()`` allocates beside the weights, gradients and state
(foreach Adam's one copy of every exp_avg_sq, for-loop Adam's per-parameter temporaries,
Adafactor's factored temporaries; SGD and fused 8-bit kernels update in place)."""

from __future__ import annotations

from operator import itemgetter

from memdesigner.engine import optim_state, param_order
from memdesigner.engine.live_set import Event, K


def run_optimizer_step(sim, r) -> None:
    s, mem, nodes, events = r.s, r.mem, r.nodes, sim.events
    opt, offload, fs, local, sf, shapes, pitem = r.opt, r.offload, r.fs, r.local, r.sf, r.shapes, r.pitem
    mem.begin_phase("optimizer_step")
    mem.mark(("optimizer_step", None))
    if offload:
        sim.host_bytes += fs.host_grads
    elif opt in ("adam", "adamw"):
        if s.use_foreach:
            total = sum(map(itemgetter(1), local)) * sf  # (each tensor's bytes, summed in C)
            t = mem.alloc(total, K, 1, "Adam step temporary: _foreach_sqrt of every exp_avg_sq")
            mem.event("optimizer_step", None, f"{opt} (foreach)")  # AdamW is not shown as Adam
            mem.decref(t)
        else:
            # for-loop Adam: sqrt(exp_avg_sq) and the div denominator of parameter i, while the
            # previous parameter's denominator is only freed when the next one is made
            prev = None
            for nid, nb, _, _ in param_order.loop_order(r.design, r.trainable, shapes, r.pnames, r.owned):
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
        for nid, _, numel, shape in param_order.loop_order(r.design, r.trainable, shapes, r.pnames, r.owned):
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
    sim.phase_peaks["optimizer_step"] = mem.ppeak


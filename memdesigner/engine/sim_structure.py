"""What a run reads from the graph alone, computed once per analysis: the valid nodes in order,
each op's inputs and consumer counts, the model's outputs, fused groups and module-call holds."""

from __future__ import annotations

from operator import attrgetter

from memdesigner.model.analysis import Analysis, graph_as_recorded
from memdesigner.model.design import GC_HELD, Design


class Structure:
    """What a run reads from the graph alone (valid order, inputs, consumers, sinks, module-call
    holds): the same for every run over one analysis (a batch curve's probes, the ranks of a
    distributed step, the window's re-estimates of an unchanged expansion). Values (an op's
    outputs) are numbered in execution order, so a run keeps them in lists, not dicts."""

    def __init__(self, design: Design, an: Analysis):
        nodes = design.nodes
        infos = an.nodes
        self.order = order = [n for n in an.order if infos[n].issue is None and infos[n].blocked_by is None]
        self.valid = valid = set(order)
        # value numbers: op ``n``'s output ``j`` is value ``base[n] + j``
        base: dict[str, int] = {}
        self.vkey = vkey = []  # value -> (node, output index)
        self.n_out = n_out = {}
        for n in order:
            base[n] = len(vkey)
            k = n_out[n] = len(infos[n].outputs)
            if k == 1:
                vkey.append((n, 0))
            else:
                vkey.extend([(n, j) for j in range(k)])
        self.base = base
        self.refs = refs = [0] * len(vkey)  # consumers of each value
        self.in_edges = in_edges = {n: [] for n in order}
        for e in design.edges:
            if e.dst in valid and e.src in valid:
                in_edges[e.dst].append(e)
                refs[base[e.src] + e.src_port] += 1
        by_port = attrgetter("dst_port")
        ins = {}
        for n, lst in in_edges.items():
            if len(lst) == 1:
                e = lst[0]
                ins[n] = (base[e.src] + e.src_port,)
                continue
            if lst:
                lst.sort(key=by_port)
            ins[n] = tuple([base[e.src] + e.src_port for e in lst])
        self.ins = ins  # node -> the values it reads, by input port
        # one pass over the nodes: the model's outputs (sinks: nodes none of whose outputs feed
        # anything; an op whose first output is ignored but whose second is used, like
        # `_, h_n = gru(x)`, is not one), a Loss node, fused groups, positions
        self.sinks = sinks = set()
        self.position = position = {}
        # ops with a part beyond their memory rule: the graph's inputs and outputs, module-call
        # holds, Python references (keep_until) and the ops that drop them (the last op: a cycle's
        # references without the collector), for the forward's fast path to leave alone
        self.special = special = set()
        has_loss = scoped = tied = False
        last_of: dict[str, str] = {}
        for i, n in enumerate(order):
            node = nodes[n]
            position[n] = i
            if node.fused:
                last_of[node.fused] = n
            if node.scope:
                scoped = True
            if node.keep_until:
                special.add(n)
                special.add(node.keep_until)
            if node.tied:
                tied = True
            t = node.type
            if t == "Loss":
                has_loss = True
            elif t == "Input":
                special.add(n)
                continue
            if not node.output:
                b, k = base[n], n_out[n]
                if k and refs[b]:
                    continue
                if k > 1 and any(refs[b + j] for j in range(1, k)):
                    continue
                if node.keep_until and node.keep_until != GC_HELD:
                    continue  # a Python local nothing reads (``a, _ = attn(x, x, x)``): its name frees it
            sinks.add(n)
        self.has_loss_node = has_loss
        # inference of a fused group (TransformerEncoderLayer): every op but its last
        self.fused_inner = {n for n in order if nodes[n].fused and last_of[nodes[n].fused] != n} if last_of else set()
        holds_at, release_at = scope_holds(order, nodes, in_edges) if scoped else ({}, {})
        # the held values by number: (call, value)
        self.holds_at = {n: [(g, base[k[0]] + k[1]) for g, k in hs] for n, hs in holds_at.items()}
        self.release_at = {n: [(g, base[k[0]] + k[1]) for g, k in hs] for n, hs in release_at.items()}
        special.update(sinks, holds_at, release_at)
        if order:
            special.add(order[-1])
        self.has_tied = tied  # a parameter shared between layers


def structure_of(design: Design, an: Analysis) -> Structure:
    """The graph's structure for ``an``, kept on the analysis for the next run over it, in its
    graph memo for the analyses after edits that left the graph alone (model/analysis.py), and on
    the design for the next analysis of it (an estimate under other settings), as long as
    everything Structure reads is the same: the valid nodes in order, their output counts and
    the node fields it reads, and the very same edges."""
    memo = an.__dict__.get("_sim_structure")
    if memo is not None and memo[0] is design and memo[1] == len(design.edges):
        return memo[2]
    edges = design.edges
    shared = an.graph_memo
    st = shared.get("sim_structure")
    if st is None:
        sig = _signature(design, an)
        kept = design.__dict__.get("_sim_structure")
        if kept is not None and kept[0] == sig and kept[1] == edges:
            st = kept[2]
        else:
            st = Structure(design, an)
            design.__dict__["_sim_structure"] = (sig, list(edges), st)
        if graph_as_recorded(design, an):
            shared["sim_structure"] = st
    an.__dict__["_sim_structure"] = (design, len(edges), st)
    return st


def _signature(design: Design, an: Analysis) -> list:
    """What Structure reads from the analysis and the nodes (the edges aside), per valid node."""
    nodes, infos = design.nodes, an.nodes
    out = []
    for n in an.order:
        info = infos[n]
        if info.issue is None and info.blocked_by is None:
            nd = nodes[n]
            out.append((n, len(info.outputs), nd.type, nd.output, nd.fused, nd.scope, nd.keep_until, bool(nd.tied)))
    return out


def scope_holds(order, nodes, in_edges):
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


"""What the report reads from the graph alone, per batch element: the FLOPs, the largest pair of
adjacent feature maps (the textbook lower bound), the Generic ops without a rule and the traced
ones, whether an output waits for Python's garbage collector. Counted once per analysis, and
after an edit that left the graph alone (the analyses share a graph memo) updated from the
previous analysis' facts: the FLOPs by what the re-inferred nodes changed, the pair from each
edge's sum, kept per edge, with those of the resized nodes' edges made again."""

from __future__ import annotations

import math
from itertools import compress
from operator import is_not

from memdesigner.model.analysis import Analysis, graph_as_recorded
from memdesigner.model.design import GC_HELD, Design
from memdesigner.units import DTYPE_BYTES


def graph_facts(design: Design, an: Analysis, valid: list, el: int) -> tuple:
    """graph_facts_of, kept on the analysis for the next estimate over it (other settings, another
    batch) while the design and its edge count are the ones it was made for; after an edit that
    left the graph alone (the analyses share a graph memo), updated from the facts before it."""
    memo = an.__dict__.get("_graph_facts")
    if memo is not None and memo[0] is design and memo[1] is valid and memo[2] == len(design.edges) and memo[3] == el:
        return memo[4]
    shared = an.graph_memo
    key = ("graph_facts", el)
    before = shared.get(key)
    got = _facts_after_edit(design, an, valid, before, el) if before is not None and before[1] is valid else None
    if got is not None:
        facts, sizes = got
        shared[key] = (dict(an.nodes), valid, facts, sizes)
    else:
        facts, sizes = _count(design, an, valid, el)
        if graph_as_recorded(design, an):
            shared[key] = (dict(an.nodes), valid, facts, sizes)
    an.__dict__["_graph_facts"] = (design, valid, len(design.edges), el, facts)
    return facts


def _out_bytes(outs, el: int) -> int:
    o = outs[0]
    return math.prod(o.shape) * (DTYPE_BYTES["int64"] if o.kind == "int64" else el)


def _facts_after_edit(design: Design, an: Analysis, valid: list, before: tuple, el: int) -> tuple | None:
    """(facts, sizes) from those of an analysis of the same graph (``before``: its NodeInfos, the
    valid nodes, its facts, its sizes): the FLOPs move by what the re-inferred nodes changed, the
    pair by the sums of the edges of those whose first output changed its size; None (count
    again) when many nodes were re-inferred or one of them is a Generic op."""
    old, _, (flops, pair, unruled, traced, gc_held), sizes = before
    infos, nodes = an.nodes, design.nodes
    redone = list(compress(valid, map(is_not, map(infos.__getitem__, valid), map(old.get, valid))))  # in C
    if len(redone) * 8 > len(valid):
        return None
    resized = []
    for n in redone:
        i, o = infos[n], old.get(n)
        if o is None or nodes[n].type == "Generic":
            return None
        io, oo = i.outputs, o.outputs
        if io != oo and (len(io) != len(oo) or (io and (io[0].shape != oo[0].shape or io[0].kind != oo[0].kind))):
            resized.append(n)
        flops += i.flops - o.flops
    if resized:
        out_bytes, sums, held = dict(sizes[0]), list(sizes[1]), sizes[2]
        by_node = _edges_of(design.edges, held)
        for n in resized:
            outs = infos[n].outputs
            if outs:
                out_bytes[n] = _out_bytes(outs, el)
            else:
                out_bytes.pop(n, None)
        edges = design.edges
        for n in resized:
            for k in by_node.get(n, ()):
                e = edges[k]
                a, b = out_bytes.get(e.src), out_bytes.get(e.dst)
                sums[k] = a + b if a is not None and b is not None else 0
        pair = max(sums, default=0)
        sizes = (out_bytes, sums, held)
    return (flops, pair, unruled, traced, gc_held), sizes


def _edges_of(edges: list, held: list) -> dict:
    """Each node's edges by index (made once per graph, kept in ``held``)."""
    if not held:
        by_node: dict = {}
        for k, e in enumerate(edges):
            by_node.setdefault(e.src, []).append(k)
            by_node.setdefault(e.dst, []).append(k)
        held.append(by_node)
    return held[0]


def graph_facts_of(design: Design, an: Analysis, valid: list, el: int) -> tuple:
    """What the report reads from the graph alone, per batch element: (FLOPs of the valid nodes,
    the largest pair of adjacent first-output sizes in bytes, the Generic ops without a rule and
    the traced ones as 'id (op)', whether any output waits for Python's garbage collector)."""
    return _count(design, an, valid, el)[0]


def _count(design: Design, an: Analysis, valid: list, el: int) -> tuple:
    """(graph_facts_of's facts, sizes: each valid node's first-output bytes, each edge's sum of
    its two ends' (0 where one has none), and a holder for each node's edges by index, made
    when an edit first resizes a node: _edges_of)."""
    infos, nodes = an.nodes, design.nodes
    out_bytes = {}
    for nid in valid:
        outs = infos[nid].outputs
        if outs:
            out_bytes[nid] = _out_bytes(outs, el)
    sums = []
    get = out_bytes.get
    for e in design.edges:
        a, b = get(e.src), get(e.dst)
        sums.append(a + b if a is not None and b is not None else 0)
    pair = max(sums, default=0)
    unruled, traced = [], []
    for nid in valid:
        if nodes[nid].type == "Generic":
            op = infos[nid].props.get("op")
            (traced if infos[nid].props.get("traced") else unruled).append(f"{nid} ({op})")
    gc_held = any(nodes[n].keep_until == GC_HELD for n in an.order)
    facts = (sum([infos[nid].flops for nid in valid]), pair, tuple(unruled), tuple(traced), gc_held)
    return facts, (out_bytes, sums, [])

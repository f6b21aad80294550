"""Fold repeated identical children (a ModuleList / Sequential of the same block class and
config: a transformer's layers, a ResNet stage's blocks after the first) into one definition ×N.

Children are found by scope: the nodes whose outermost ``<prefix>.<k>`` scope part is the same
call form child k. A run of consecutive children k0..k0+N-1 folds when each is contiguous in the
node order, the children are identical (types, props, bits, internal edges, names and scopes
relative to the child) and they chain: child k+1 reads child k's values where child k0 read the
run's inputs, and reads the same outside values (a mask, rotary tables) where child k0 did; those
pass through the definition. Only the last child's values may be read after the run. The flat
network ``expand`` rebuilds has the same nodes, order, names and scopes, so estimates are equal.
"""

from __future__ import annotations

import re

from memdesigner.model.analysis import analyze
from memdesigner.model.blocks import BIN, BLOCK, BOUT, BlockDef, first_free, unique_name
from memdesigner.model.design import Design, Edge, Node

_CHILD = re.compile(r"^(.+)\.(\d+)$")


def _child_of(node: Node):
    for part in node.scope.split("/"):
        m = _CHILD.match(part)
        if m:
            return m.group(1), int(m.group(2)), part
    return None


class _Child:
    def __init__(self, prefix: str, k: int, ids: list, design: Design, where: dict, reads: dict):
        self.prefix, self.k, self.ids = prefix, k, ids
        self.pos = {nid: i for i, nid in enumerate(ids)}
        self.call = f"{prefix}.{k}"
        nodes = design.nodes
        self.sig = None
        self.outer_scope = None
        rel = []
        for nid in ids:
            n = nodes[nid]
            parts = n.scope.split("/")
            at = parts.index(self.call)
            outer, inner = parts[:at], parts[at + 1:]
            if self.outer_scope is None:
                self.outer_scope = outer
            if outer != self.outer_scope or not all(p.startswith(self.call + ".") for p in inner):
                return
            inner = [p[len(self.call) + 1:] for p in inner]
            name = n.name[len(self.call) + 1:] if n.name.startswith(self.call + ".") else None
            if name is None or n.tied:
                return
            ku = self.pos.get(n.keep_until, -1)
            if n.keep_until and ku < 0:
                # the loop variable holding a layer's output until the next layer returned (or
                # until the reader after the stack ran): the next call's scope holds it the same
                if _held_by_next(n, self, where, reads, design) is None:
                    return
                ku = -1  # dropped: exactly what the next call's scope hold (or the reader) does
            fused = n.fused.replace(self.call, "\0") if n.fused else ""
            rel.append((n.type, _frozen(n.props), n.bits, "/".join(inner), name, n.layout, n.output, fused, ku,
                        n.trainable))  # a frozen repetition is not the same as a trained one
        self.rel = rel
        self.sig = tuple(rel)


def _inner_fused(fused: str, call: str) -> str:
    """A fused group's key inside the definition, relative to the repeated call. A group that is
    the whole call (an nn.TransformerEncoderLayer repeated by its encoder) keeps a key of its own:
    an empty one would drop the fusion from every instance."""
    if not fused:
        return ""
    return fused.replace(call + ".", "").replace(call, "") or "layer"


NEXT = -2  # a keep_until the next repetition's module call (or the reader after the run) stands for


def _held_by_next(n: Node, child, where: dict, reads: dict, design: Design):
    t = n.keep_until
    w = where.get(t)
    if w is not None and w[0] == child.prefix:
        if w[1] == child.k + 1 and w[2] == t and n.id in reads.get(t, set()) | reads.get(("child", w[:2]), set()):
            return NEXT
        return None
    if n.id in reads.get(t, set()):  # outside the stack: its reader holds it anyway
        return NEXT
    return None


def _frozen(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    return v


def _ext_inputs(child: _Child, ins: dict) -> tuple[list, list]:
    """Internal edges (relative) and the distinct outside values child reads, in order."""
    internal, ext = [], []
    for nid in child.ids:
        for e in ins.get(nid, ()):
            if e.src in child.pos:
                internal.append((child.pos[e.src], e.src_port, child.pos[nid], e.dst_port))
            elif (e.src, e.src_port) not in ext:
                ext.append((e.src, e.src_port))
    return sorted(internal), ext


def fold(design: Design) -> Design:
    """Fold every foldable run in place; returns the design."""
    order = list(design.nodes)
    index = {nid: i for i, nid in enumerate(order)}
    groups: dict[str, dict[int, list]] = {}
    for nid in order:
        c = _child_of(design.nodes[nid])
        if c is not None and design.nodes[nid].type not in (BLOCK, BIN, BOUT):
            groups.setdefault(c[0], {}).setdefault(c[1], []).append(nid)
    ins: dict[str, list] = {}
    outs: dict[str, list] = {}
    for e in design.edges:
        ins.setdefault(e.dst, []).append(e)
        outs.setdefault(e.src, []).append(e)
    for v in ins.values():
        v.sort(key=lambda e: e.dst_port)
    where: dict = {}  # node -> (prefix, k, last node of that child)
    for prefix, by_k in groups.items():
        for k, ids in by_k.items():
            for nid in ids:
                where[nid] = (prefix, k, ids[-1])
    reads: dict = {}  # node -> the nodes it reads; ("child", (prefix, k)) -> what that child reads
    for e in design.edges:
        reads.setdefault(e.dst, set()).add(e.src)
        w = where.get(e.dst)
        if w is not None:
            reads.setdefault(("child", w[:2]), set()).add(e.src)
    an = analyze(design)

    def shapes(child) -> tuple:
        """What every node of a child reads and makes: children alike in structure but not in
        shapes (SqueezeNet's Fire modules, whose convolutions take other channel counts) are not
        repetitions of one definition."""
        sig = []
        for nid in child.ids:
            info = an.nodes.get(nid)
            srcs = tuple((an.nodes[e.src].outputs[e.src_port] if e.src in an.nodes and e.src_port
                          < len(an.nodes[e.src].outputs) else None) for e in ins.get(nid, ()))
            sig.append((tuple(info.outputs) if info is not None else None, srcs))
        return tuple(sig)

    runs = []
    for prefix, by_k in groups.items():
        children = []
        for k in sorted(by_k):
            ids = by_k[k]
            if index[ids[-1]] - index[ids[0]] + 1 != len(ids):  # not contiguous in the node order
                children.append(None)
                continue
            children.append(_Child(prefix, k, ids, design, where, reads))
        i = 0
        while i < len(children):
            j = i
            while (j + 1 < len(children) and children[i] is not None and children[i].sig is not None
                   and children[j + 1] is not None and children[j + 1].k == children[j].k + 1
                   and children[j + 1].sig == children[i].sig
                   and shapes(children[j + 1]) == shapes(children[i])
                   and index[children[j + 1].ids[0]] == index[children[j].ids[-1]] + 1):
                j += 1
            if j > i:
                run = _plan(children[i:j + 1], ins, outs)
                if run is not None:
                    runs.append(run)
                    i = j + 1
                    continue
            i += 1
    if runs:
        for run in runs:
            _apply(design, run, an, where, reads)
    return design


def _plan(run: list, ins: dict, outs: dict):
    """Slots (one per value the first child reads from outside) and how they chain, or None."""
    first = run[0]
    internal0, ext0 = _ext_inputs(first, ins)
    chain_src: dict[int, tuple] = {}  # slot -> (position in the previous child, port)
    for prev, cur in zip(run, run[1:]):
        internal, ext = _ext_inputs(cur, ins)
        if internal != internal0 or len(ext) != len(ext0):
            return None
        for slot, (v, v0) in enumerate(zip(ext, ext0)):
            if v[0] in prev.pos:
                src = (prev.pos[v[0]], v[1])
                if chain_src.setdefault(slot, src) != src:
                    return None
            elif v != v0 or slot in chain_src:
                return None
    if not chain_src:
        return None
    # every slot read the same way in every child: consumers in the same relative places
    members = {nid for c in run for nid in c.ids}
    last = run[-1]
    chained = {(pos, port) for pos, port in chain_src.values()}
    for c in run:
        nxt = run[run.index(c) + 1] if c is not last else None
        for nid in c.ids:
            for e in outs.get(nid, ()):
                if e.dst in c.pos or (nxt is not None and e.dst in nxt.pos):
                    continue
                if e.dst in members or c is not last or (c.pos[nid], e.src_port) not in chained:
                    return None
    return run, ext0, chain_src


def _apply(design: Design, plan, an, where: dict, reads: dict) -> None:
    run, ext0, chain_src = plan
    first, last = run[0], run[-1]
    nodes = design.nodes
    name = unique_name(design, first.prefix)
    g = Design(name=name, channels_last=design.channels_last)
    g.blocks = design.blocks
    bd = BlockDef(name, g, stack=True)
    for nid, rel in zip(first.ids, first.rel):
        n = nodes[nid]
        keep = first.ids[rel[8]] if rel[8] >= 0 else ""  # NEXT: the scope hold of the next call
        g.nodes[nid] = Node(nid, n.type, rel[4], n.props, n.pos, n.bits, n.rev, rel[3], keep, {},
                            _inner_fused(n.fused, first.call),
                            n.layout, n.output, n.trainable)
    x0 = min(n.pos[0] for n in g.nodes.values())
    y0 = min(n.pos[1] for n in g.nodes.values())
    bins = []
    for slot, _v in enumerate(ext0):
        bid = _free(g, f"in{slot}")
        g.nodes[bid] = Node(bid, BIN, bid, {"shape": (1,), "dtype": "float"}, (x0 - 220, y0 + 90 * slot))
        bins.append(bid)
    edges = []
    first_pos = first.pos
    for e in design.edges:
        if e.dst in first_pos:
            if e.src in first_pos:
                edges.append(e)
            else:
                edges.append(Edge(bins[ext0.index((e.src, e.src_port))], e.dst, 0, e.dst_port))
    y1 = max(n.pos[1] for n in g.nodes.values())
    for slot in range(len(ext0)):
        oid = _free(g, f"out{slot}")
        g.nodes[oid] = Node(oid, BOUT, oid, {}, (x0 + 440, y1 + 90 + 90 * slot))
        if slot in chain_src:
            pos, port = chain_src[slot]
            edges.append(Edge(first.ids[pos], oid, port, 0))
        else:
            edges.append(Edge(bins[slot], oid, 0, 0))
    g.edges = edges
    _fill_port_shapes(g, an, ext0)
    design.blocks[name] = bd
    # the instance replaces the run at the first child's place
    inst_id = _free(design, first.prefix)
    members = {nid for c in run for nid in c.ids}
    cx = sum(nodes[n].pos[0] for n in first.ids) / len(first.ids)
    cy = sum(nodes[n].pos[1] for n in first.ids) / len(first.ids)
    inst = Node(inst_id, BLOCK, first.prefix,
                {"definition": name, "repeat": len(run), **({"start": first.k} if first.k else {})},
                (cx, cy), scope="/".join(first.outer_scope))
    for n in nodes.values():  # a variable before the run held until a child returned: that call holds it
        if n.id not in members and n.keep_until in members:
            w = where[n.keep_until]
            if n.keep_until == w[2] and n.id in reads.get(("child", w[:2]), ()):
                n.keep_until = ""
            else:  # held until some op inside: that op's expanded id
                pos = run[w[1] - first.k].pos[n.keep_until]
                n.keep_until = f"{inst_id}.{w[1]}.{first.ids[pos]}"
    items = []
    for k, v in nodes.items():
        if k == first.ids[0]:
            items.append((inst_id, inst))
        if k not in members:
            items.append((k, v))
    nodes.clear()
    nodes.update(items)
    slot_of = {(pos, port): slot for slot, (pos, port) in chain_src.items()}
    new_edges = []
    added_in = False
    for e in design.edges:
        if e.dst in members:
            if not added_in:
                new_edges.extend(Edge(v[0], inst_id, v[1], slot) for slot, v in enumerate(ext0))
                added_in = True
            continue
        if e.src in members:  # read after the run: the last child's chained value
            new_edges.append(Edge(inst_id, e.dst, slot_of[(last.pos[e.src], e.src_port)], e.dst_port))
            continue
        new_edges.append(e)
    design.edges = new_edges


def _fill_port_shapes(g: Design, an, ext0: list) -> None:
    """Give the definition's inputs the shapes the run's inputs have (what it shows opened)."""
    for bid, v in zip((n.id for n in g.nodes.values() if n.type == BIN), ext0):
        info = an.nodes.get(v[0])
        if info is not None and info.ok and v[1] < len(info.outputs):
            spec = info.outputs[v[1]]
            g.nodes[bid].props = {"shape": tuple(spec.shape), "dtype": "int64" if spec.kind == "int64" else "float"}


def _free(design: Design, base: str) -> str:
    """A node id the design does not use yet."""
    return first_free(design.nodes, base)


def fold_repeats(design: Design) -> Design:
    """Repeated identical children of a flat design as one definition ×N; the design is folded in
    place and returned (what an importer calls last)."""
    return fold(design)

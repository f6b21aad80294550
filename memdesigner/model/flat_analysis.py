"""Shape inference over a design: output shapes, parameters, FLOPs and per-node errors.

Errors never escape as exceptions: each bad node gets an Issue naming its field; nodes fed by a
bad node are marked as blocked (they cannot be checked until it is fixed).
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
import math
from dataclasses import dataclass, field
from itertools import compress, count
from operator import attrgetter, is_not, ne

from memdesigner.model import registry
from memdesigner.model.design import Design
from memdesigner.model.registry import MAX_NUMBER_BITS, Issue, LayerError, ParamSpec, ShapeCtx, TensorSpec


class NodeInfo:
    """One node's analysis: output specs, parameters, FLOPs, coerced props, or why it is invalid."""

    __slots__ = ("id", "outputs", "params", "flops", "props", "issue", "blocked_by")

    def __init__(self, id: str, outputs=None, params=None, flops: int = 0, props=None,
                 issue: Issue | None = None, blocked_by: str | None = None):
        self.id = id
        self.outputs = outputs if outputs is not None else []  # list[TensorSpec]
        self.params = params if params is not None else []  # list[ParamSpec]
        self.flops = flops
        self.props = props if props is not None else {}  # coerced property values
        self.issue = issue
        self.blocked_by = blocked_by  # an upstream node in error

    @property
    def ok(self) -> bool:
        return self.issue is None and self.blocked_by is None

    @property
    def n_params(self) -> int:
        return sum(p.numel for p in self.params if p.trainable)


@dataclass
class Analysis:
    order: list  # topological order of node ids (all nodes, valid or not)
    nodes: dict  # id -> NodeInfo
    issues: list  # list[Issue]: the nodes' own errors (and a cycle, if any)
    # what the engine derives from the graph alone (engine/sim_structure.py), shared by the analyses
    # of a design whose edits left the graph alone: the same nodes in the same order, the same
    # edges and graph fields (_FIELDS but trainable), the same valid nodes with as many outputs
    graph_memo: dict = field(default_factory=dict)
    recorded: dict | None = None  # node id -> what analyze() read from it (_Kept.recs)

    @property
    def ok(self) -> bool:
        return not self.issues


_BY_PORT = attrgetter("dst_port")
_CACHE: dict = {}
_CACHE_MAX = 20000


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def _node_rules(lt, props: dict, specs: list, name: str):
    """Shape, parameters and FLOPs of one node; memoised on (type, props, input specs) so that
    re-estimating after an edit only recomputes what changed."""
    # (shape, kind) pairs hash in C; TensorSpec's dataclass __hash__ is a Python call per input
    key = (lt.name, id(props), tuple([(s.shape, s.kind) for s in specs]))
    hit = _CACHE.get(key)
    if hit is not None and hit[4] is props:
        return hit
    return _run_rules(key, lt, props, specs, name)


def _run_rules(key, lt, props: dict, specs: list, name: str):
    ctx = ShapeCtx(props, specs, name)
    try:
        outputs = list(lt.shape(ctx))
        params = list(lt.params(ctx))
        _check_sizes(outputs, params, "shape" if "shape" in props else "props")
        res = (outputs, params, int(lt.flops(ctx, outputs)), None, props)
    except LayerError as err:
        res = (None, None, 0, (err.field, err.message), props)
    except (ValueError, TypeError, ZeroDivisionError, IndexError) as err:
        res = (None, None, 0, ("props", f"invalid configuration: {err}"), props)
    if len(_CACHE) > _CACHE_MAX:
        _CACHE.clear()
    _CACHE[key] = res
    return res


def _check_sizes(outputs: list, params: list, field: str) -> None:
    """No output or parameter of 10^1000 elements or more (MAX_NUMBER_BITS): each dimension is
    bounded, their product is not, and a 2^20,000-element tensor made every byte total an integer
    too long to print (a traceback in the table, the JSON and the window)."""
    for kind, specs in (("output", outputs), ("parameter", params)):
        for i, spec in enumerate(specs):
            n = math.prod(spec.shape)
            if n.bit_length() > MAX_NUMBER_BITS:
                who = spec.name if kind == "parameter" else str(i)
                raise LayerError(field, f"{kind} {who} would have about 10^{int(n.bit_length() * 0.30103):,} "
                                        "elements, more than 10^1000")


_PROPS: dict = {}


def _coerced(lt, props: dict, node=None) -> dict:
    if node is not None:  # fast path: the node has not been edited since its props were coerced
        memo = node.__dict__.get("_coerced")
        # props edited in place (``node.props["k"] = v``) bypass Design's rev: compare contents too
        if memo is not None and memo[0] == node.rev and memo[1] is props and memo[2] == lt.name and memo[4] == props:
            return memo[3]
    key = (lt.name, _freeze(props))
    hit = _PROPS.get(key)
    if hit is None:
        hit = lt.coerce_props(props)
        if len(_PROPS) > _CACHE_MAX:
            _PROPS.clear()
        _PROPS[key] = hit
    if node is not None:
        node.__dict__["_coerced"] = (node.rev, props, lt.name, hit, copy.deepcopy(props))
    return hit


def analyze_flat(design: Design) -> Analysis:
    """The analysis of a design without blocks. Re-analysing after an edit re-infers only the edited
    nodes and the ones downstream whose inputs changed; the rest keep their NodeInfo (see _Kept)."""
    memo = design.__dict__.get("_analysis")
    nodes = design.nodes
    ids = list(nodes)
    prev = memo or _recent(ids)
    got = _analyze(design, ids, prev, own=bool(memo))
    if got is None:  # unchanged since the design's own kept analysis: the very same one
        return memo.an
    an, kept = got
    if kept is not None:
        _remember(kept)
        # analysed once (a one-off copy, say): the design keeps nothing; analysed again: it keeps its
        # analysis, which an unchanged design then gets back as it is (an estimate under other settings)
        design.__dict__["_analysis"] = kept if memo is not None else ()
    return an


# what analysis reads from a node: type and trainable, props and tied decide its NodeInfo; the
# others what the engine's graph structure (engine/sim_structure.py) and the report's graph facts read
_KEY_NAMES = ("type", "trainable", "output", "fused", "scope", "keep_until", "props", "tied")
_KEY = attrgetter(*_KEY_NAMES)
_PROPS_AT, _TIED_AT = 6, 7
_MISSING = object()
_NO_REC = (None,)


class _Kept:
    """What one analysis read from each node, and what it found: an analysis of the same design
    later (or of a snapshot of it: the window estimates a fresh copy after each edit) compares
    contents node by node and re-infers only what an edit can have changed. ``keys``: each node's
    record's first item, in node order (compared as one list). ``recs``: node id ->
    (_KEY values with the props deep-copied and the tied parameters copied, the layer type or
    None, the coerced props, the coercion's error as (field, message) or None); ``types``: type
    name -> layer type for those records. ``objs``: the node objects read, in node order (a
    snapshot's copies, which nobody edits, need no comparing while they are the same objects:
    model/snapshots.py). ``order``, ``infos`` and ``issues`` are private copies (callers may
    replace entries of the analysis they got); ``pos`` and ``succ`` (each node's place in the
    order, its consumers) are made when first needed."""

    __slots__ = ("ids", "keys", "edges", "ins", "recs", "types", "an", "order", "infos", "issues", "pos", "succ",
                 "objs")

    def __init__(self, ids, keys, edges, ins, recs, types, an, pos=None, succ=None, objs=None):
        self.ids, self.keys, self.edges, self.ins, self.recs, self.types, self.an = ids, keys, edges, ins, recs, types, an
        self.order, self.infos, self.issues = list(an.order), dict(an.nodes), list(an.issues)
        self.pos, self.succ, self.objs = pos, succ, objs

    def places(self) -> tuple:
        if self.pos is None:
            self.pos = {n: i for i, n in enumerate(self.order)}
            succ: dict = {}
            for n, lst in self.ins.items():
                for e in lst:
                    succ.setdefault(e.src, []).append(n)
            self.succ = succ
        return self.pos, self.succ


# the last few _Kept, newest first (a design, its snapshots, the engine's derived designs). Each
# holds a record and a NodeInfo per node: bounded by count and by nodes in all (the newest is
# always kept), so a session of big designs does not keep several of them alive for nothing
_RECENT: list = []
_RECENT_MAX = 4
_RECENT_NODES = 60000


def _recent(ids: list):
    """The kept analysis to start from: one of a design with exactly these nodes, else the newest."""
    recent = _RECENT
    for k in recent:
        if k.ids == ids:
            return k
    return recent[0] if recent else None


def _remember(kept: _Kept) -> None:
    ids = kept.ids
    out, total = [kept], len(ids)
    for k in _RECENT:
        if k.ids != ids and len(out) < _RECENT_MAX and total + len(k.ids) <= _RECENT_NODES:
            out.append(k)
            total += len(k.ids)
    _RECENT[:] = out


def _layer(type_name: str):
    try:
        return registry.get(type_name)
    except KeyError:
        return None


def _record(node, k: tuple, lt, old) -> tuple:
    """A node's record (see _Kept) from its _KEY values ``k``: the old record's coerced props when
    its props did not change."""
    props = node.props
    head = k[:_PROPS_AT]
    tied = dict(k[_TIED_AT])
    if old is not None and old[1] is lt and props == old[0][_PROPS_AT]:
        return (*head, old[0][_PROPS_AT], tied), lt, old[2], old[3]
    if lt is None:
        return (*head, copy.deepcopy(props), tied), None, None, None
    try:
        coerced = _coerced(lt, props, node)
    except LayerError as err:
        return (*head, copy.deepcopy(props), tied), lt, None, (err.field, err.message)
    memo = node.__dict__.get("_coerced")
    kept = memo[4] if memo is not None and memo[3] is coerced and memo[1] is props else copy.deepcopy(props)
    return (*head, kept, tied), lt, coerced, None


# a Design made by model/snapshots.py sets this in its __dict__: its nodes are snapshot copies,
# never edited (later snapshots share them), so one the same object as an analysis read is unchanged
READ_ONLY_NODES = "_read_only_nodes"


class _Changes:
    """What changed since the kept analysis ``prev``, node by node (step 1 of _analyze)."""

    __slots__ = ("recs", "types", "rkeys", "dirty", "same_ids", "same_graph", "retrain", "removed", "objs")


def _to_compare(design: Design, ids: list, objs: list, prev: _Kept | None, same_ids: bool) -> tuple:
    """(the indices of the nodes whose _KEY values differ from the kept records, those records in
    node order). By contents, in C (an edit made in place, behind Design's back, shows as well as
    one through it, and a snapshot matches its design); a snapshot's nodes only where they are not
    the objects ``prev`` read (the others are unchanged: READ_ONLY_NODES)."""
    if same_ids:
        rkeys = prev.keys
        pobjs = prev.objs
        if pobjs is not None and design.__dict__.get(READ_ONLY_NODES):
            maybe = list(compress(count(), map(is_not, objs, pobjs)))
            return [i for i in maybe if _KEY(objs[i]) != rkeys[i]], rkeys
    else:
        precs = prev.recs if prev is not None else {}
        rkeys = [(precs.get(nid) or _NO_REC)[0] for nid in ids]
    return list(compress(count(), map(ne, map(_KEY, objs), rkeys))), rkeys


def _changes(design: Design, ids: list, objs: list, prev: _Kept | None) -> _Changes:
    """Step 1: which nodes changed what analysis reads, their new records, and whether the graph
    structure's reads (order, edges, graph fields) may have changed."""
    nodes = design.nodes
    ch = _Changes()
    precs = prev.recs if prev is not None else {}
    ch.recs = recs = dict(precs)
    ch.types = types = dict(prev.types) if prev is not None else {}
    ch.dirty = dirty = set()  # nodes whose NodeInfo must be inferred again
    ch.same_ids = same_ids = prev is not None and ids == prev.ids
    same_graph = same_ids  # the graph structure's reads (order, edges, graph fields) unchanged
    retrain = False  # a node's trainable changed, or nodes came or went: tied parameters follow owners
    todo, rkeys = _to_compare(design, ids, objs, prev, same_ids)
    if todo:
        rkeys = list(rkeys)
    for i in todo:
        nid = ids[i]
        nd = objs[i]
        k = _KEY(nd)
        rec = precs.get(nid)
        lt = types.get(k[0], _MISSING)
        if lt is _MISSING:
            lt = types[k[0]] = _layer(k[0])
        recs[nid] = new = _record(nd, k, lt, rec)
        rkeys[i] = new[0]
        if rec is None:
            dirty.add(nid)
            retrain = True
            same_graph = False
            continue
        of = rec[0]
        if of[:2] != k[:2] or rec[1] is not lt or new[2] is not rec[2] or new[3] != rec[3] or \
                of[_TIED_AT] != k[_TIED_AT]:
            dirty.add(nid)
            retrain = retrain or of[1] != k[1]
        if of[0] != k[0] or of[2:_PROPS_AT] != k[2:_PROPS_AT] or bool(of[_TIED_AT]) != bool(k[_TIED_AT]):
            same_graph = False
    ch.removed = ()
    if prev is not None and not same_ids:
        ch.removed = removed = set(precs).difference(nodes)
        for n in removed:
            del recs[n]
        if removed:
            retrain = True
    if retrain:
        dirty.update([n for n, nd in nodes.items() if nd.tied])
    ch.rkeys, ch.same_graph, ch.retrain = rkeys, same_graph, retrain
    return ch


def _reinfer_downstream(design: Design, prev: _Kept, ch: _Changes, cache_get) -> tuple:
    """Step 2, the same nodes in the same order with the same input edges: from the old infos,
    re-infer the dirty nodes and, in order, the consumers of each node whose NodeInfo now reads
    differently downstream. (order, ins, infos, redone: [(old, new info)], pos, succ)."""
    order, ins = list(prev.order), prev.ins
    old_infos = prev.infos
    infos = dict(old_infos)
    redone: list = []
    pos, succ = prev.pos, prev.succ
    dirty, recs = ch.dirty, ch.recs
    if dirty:
        pos, succ = prev.places()
        heap = [pos[n] for n in dirty]
        heapq.heapify(heap)
        queued = set(dirty)
        while heap:
            nid = order[heapq.heappop(heap)]
            old = old_infos[nid]
            info = _node_info(design, nid, recs[nid], ins[nid], infos, cache_get)
            infos[nid] = info
            redone.append((old, info))
            if _reads_differently(old, info):
                for m in succ.get(nid, ()):
                    if m not in queued:
                        queued.add(m)
                        heapq.heappush(heap, pos[m])
    return order, ins, infos, redone, pos, succ


def _input_edges(nodes: dict, edges: list) -> dict:
    """node -> its input edges, by port."""
    ins = {n: [] for n in nodes}
    for e in edges:
        lst = ins.get(e.dst)
        if lst is not None:
            lst.append(e)
    for lst in ins.values():
        if len(lst) > 1:
            lst.sort(key=_BY_PORT)
    return ins


def _reinfer_in_order(design: Design, order: list, prev: _Kept | None, ch: _Changes, cache_get) -> tuple:
    """Step 2', another order or other edges: in order, the dirty nodes, those whose input edges
    changed and those whose inputs read differently now. (ins, infos, redone)."""
    ins = _input_edges(design.nodes, design.edges)
    dirty, recs = ch.dirty, ch.recs
    if prev is not None:
        pins = prev.ins
        dirty.update([n for n, lst in ins.items() if lst != pins.get(n)])
    old_infos = prev.infos if prev is not None else {}
    infos: dict[str, NodeInfo] = {}
    redone: list = []
    changed = set(ch.removed)  # nodes whose NodeInfo reads differently downstream
    for nid in order:
        old = old_infos.get(nid)
        if old is not None and nid not in dirty:
            if not changed:
                infos[nid] = old
                continue
            for e in ins[nid]:
                if e.src in changed:
                    break
            else:
                infos[nid] = old
                continue
        info = _node_info(design, nid, recs[nid], ins[nid], infos, cache_get)
        infos[nid] = info
        redone.append((old, info))
        if old is None or _reads_differently(old, info):
            changed.add(nid)
    return ins, infos, redone


def _cycle(design: Design, exc: ValueError) -> Analysis:
    nid = str(exc).split(":")[0]
    iss = Issue(nid, "inputs", str(exc).split(": ", 1)[-1])
    return Analysis([], {n: NodeInfo(n, issue=iss if n == nid else None) for n in design.nodes}, [iss])


def _analyze(design: Design, ids: list, prev: _Kept | None, own: bool = False):
    """(analysis, what to keep of it: None for a graph with a cycle), or None when ``prev`` is
    this design's own (``own``) and nothing it read has changed."""
    edges = design.edges
    if prev is not None and any(_layer(t) is not lt for t, lt in prev.types.items()):
        prev = None  # a layer type (re)registered since: everything again
    objs = list(design.nodes.values())
    ch = _changes(design, ids, objs, prev)
    same_edges = prev is not None and edges == prev.edges
    if own and same_edges and ch.same_graph and not ch.dirty:
        return None
    cache_get = _CACHE.get
    pos = succ = None
    same_graph = ch.same_graph
    if same_edges and ch.same_ids:
        order, ins, infos, redone, pos, succ = _reinfer_downstream(design, prev, ch, cache_get)
    else:
        same_graph = False
        try:
            order = design.topo_order()
        except ValueError as exc:
            return _cycle(design, exc), None
        ins, infos, redone = _reinfer_in_order(design, order, prev, ch, cache_get)
    # 3. the nodes' own errors in order: the old list when no re-inferred node had or has one
    if ch.same_ids and same_edges and all(o is not None and o.issue is None and i.issue is None for o, i in redone):
        issues = list(prev.issues)
    else:
        issues = [i for i in (infos[n].issue for n in order) if i is not None]
    an = Analysis(order, infos, issues)
    if same_graph and all(o.ok == i.ok and len(o.outputs) == len(i.outputs) for o, i in redone):
        # the same valid nodes with as many outputs, the same edges and graph fields: what the engine
        # derives from the graph alone (kept in graph_memo) holds for this analysis too
        an.graph_memo = prev.an.graph_memo
    an.recorded = ch.recs
    return an, _Kept(ids, ch.rkeys, list(edges), ins, ch.recs, ch.types, an, pos, succ, objs)


def _reads_differently(old: NodeInfo, new: NodeInfo) -> bool:
    """Whether a consumer of the node would see another input: other outputs, or another verdict
    on whether (and behind which node) it is blocked."""
    return old.outputs != new.outputs or (old.issue is None) != (new.issue is None) or \
        old.blocked_by != new.blocked_by


def _node_info(design: Design, nid: str, rec: tuple, edges: list, infos: dict, cache_get) -> NodeInfo:
    info = NodeInfo(nid)
    lt = rec[1]
    if lt is None:
        info.issue = Issue(nid, "type", f"unknown layer type {rec[0][0]!r}")
    elif rec[3] is not None:
        info.issue = Issue(nid, rec[3][0], rec[3][1])
    else:
        info.props = rec[2]
        _infer(design, design.nodes[nid], lt, info, edges, infos, cache_get)
    return info


def graph_as_recorded(design: Design, an: Analysis) -> bool:
    """Whether the design's nodes still have the graph fields analyze() read for ``an`` (they may
    have been edited in place since): only then does what the engine derives from the graph of
    this design hold for the other analyses sharing ``an.graph_memo``."""
    rec = an.recorded
    nodes = design.nodes
    if rec is None or len(rec) != len(nodes):
        return False
    fields = _GRAPH_FIELDS
    for nid, nd in nodes.items():
        r = rec.get(nid)
        if r is None or fields(nd) != r[0][:_PROPS_AT] or bool(nd.tied) != bool(r[0][_TIED_AT]):
            return False
    return True


_GRAPH_FIELDS = attrgetter(*_KEY_NAMES[:_PROPS_AT])


def _infer(design: Design, node, lt, info: NodeInfo, edges: list, infos: dict, cache_get) -> None:
    """One node's outputs, parameters and FLOPs from its inputs' (or why it has none)."""
    nid = info.id
    n_in = len(edges)
    if n_in == 1:
        gap = edges[0].dst_port != 0
    elif n_in > 1:
        gap = [e.dst_port for e in edges] != list(range(n_in))
    else:
        gap = False
    if n_in < lt.min_inputs or gap:
        ports = [e.dst_port for e in edges]
        need = lt.min_inputs if lt.max_inputs == lt.min_inputs else f"at least {lt.min_inputs}"
        msg = f"needs {need} connected input(s), has {n_in}" if n_in < lt.min_inputs else \
            f"input ports {ports} leave a gap"
        info.issue = Issue(nid, "inputs", msg, pending=n_in == 0)
        return
    if lt.max_inputs is not None and n_in > lt.max_inputs:
        info.issue = Issue(nid, "inputs", f"takes at most {lt.max_inputs} input(s), has {n_in}")
        return
    specs = []
    for e in edges:
        src = infos.get(e.src)
        if src is None or src.issue is not None or src.blocked_by is not None:
            info.blocked_by = e.src if src is None or src.issue else src.blocked_by
            return
        if e.src_port >= len(src.outputs):
            info.issue = Issue(nid, "inputs", f"{e.src} has no output {e.src_port}")
            return
        specs.append(src.outputs[e.src_port])
    # _node_rules' cache hit, inlined
    props = info.props
    key = (lt.name, id(props), ((specs[0].shape, specs[0].kind),) if len(specs) == 1 else
           tuple([(s.shape, s.kind) for s in specs]))
    hit = cache_get(key)
    if hit is None or hit[4] is not props:
        hit = _run_rules(key, lt, props, specs, node.name)
    outputs, params, flops, err, _ = hit
    if err is not None:
        info.issue = Issue(nid, err[0], err[1])
    else:
        if params and (not node.trainable or node.tied):
            params = _frozen(params, _frozen_names(design, node, params))
        info.outputs, info.params, info.flops = outputs, params, flops


def _frozen_names(design: Design, node, params) -> frozenset:
    """The parameters of ``node`` that do not require grad: all of a frozen node's, except that a
    tied parameter is the owner's tensor and follows the owner (freezing a tied input embedding
    freezes the output head's weight too, as requires_grad_ on the shared Parameter does)."""
    out = set()
    for p in params:
        owner = node.tied.get(p.name)
        if owner:
            o = design.nodes.get(owner.rsplit(".", 1)[0])
            if o is not None and not o.trainable:
                out.add(p.name)
        elif not node.trainable:
            out.add(p.name)
    return frozenset(out)


_FROZEN: dict = {}


def _frozen(params: list, names: frozenset) -> list:
    """The same parameters with requires_grad=False for ``names`` (one list per source list and
    names, so the engine's per-rule memo keeps hitting)."""
    if not names:
        return params
    key = (id(params), names)
    hit = _FROZEN.get(key)
    if hit is not None and hit[0] is params:
        return hit[1]
    out = [dataclasses.replace(p, frozen=True) if p.kind != "buffer" and p.name in names else p for p in params]
    if len(_FROZEN) > _CACHE_MAX:
        _FROZEN.clear()
    _FROZEN[key] = (params, out)
    return out


__all__ = ["analyze_flat", "graph_as_recorded", "Analysis", "NodeInfo", "TensorSpec", "ParamSpec"]

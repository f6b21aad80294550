"""Shape inference over a design: output shapes, parameters, FLOPs and per-node errors.

Errors never escape as exceptions: each bad node gets an Issue naming its field; nodes fed by a
bad node are marked as blocked (they cannot be checked until it is fixed).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from operator import attrgetter

from memdesigner.model.design import Design
from memdesigner.model.registry import Issue, LayerError, ParamSpec, ShapeCtx, TensorSpec


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
        res = (outputs, list(lt.params(ctx)), int(lt.flops(ctx, outputs)), None, props)
    except LayerError as err:
        res = (None, None, 0, (err.field, err.message), props)
    except (ValueError, TypeError, ZeroDivisionError, IndexError) as err:
        res = (None, None, 0, ("props", f"invalid configuration: {err}"), props)
    if len(_CACHE) > _CACHE_MAX:
        _CACHE.clear()
    _CACHE[key] = res
    return res


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


def analyze(design: Design) -> Analysis:
    if getattr(design, "blocks", None):  # instances of block definitions: analysed expanded
        from memdesigner.model.blocks import analyze_collapsed

        return analyze_collapsed(design)
    memo = design.__dict__.get("_analysis")
    if memo is None:  # analysed once: a design analysed again (not a one-off copy) keeps what it read
        design.__dict__["_analysis"] = ()
        return _analyze(design)
    if memo and _unchanged(design, memo):
        return memo[2]
    an = _analyze(design)
    kept = _snapshot(design)
    if kept is not None:
        design.__dict__["_analysis"] = (kept, list(design.edges), an)
    return an


# what analysis (and the engine's graph structure, engine/sim_structure.py, which keeps its result
# on the analysis) reads from a node beside its props and tied parameters
_FIELDS = attrgetter("type", "rev", "trainable", "output", "fused", "scope", "keep_until")


def _snapshot(design: Design) -> list | None:
    """What analysis read from each node, to tell an unchanged design from an edited one
    without analysing it again (an estimate under other settings, a batch sweep): the node
    object, its coerced-props memo (which keeps the props it coerced, so an edit in place shows),
    the fields in _FIELDS and its tied parameters. None when a node has no coerced props (an
    unknown type, props that did not coerce): such a design is analysed every time."""
    out = []
    for nid, nd in design.nodes.items():
        cm = nd.__dict__.get("_coerced")
        if cm is None:
            return None
        out.append((nid, nd, cm, _FIELDS(nd), dict(nd.tied)))
    return out


def _unchanged(design: Design, memo: tuple) -> bool:
    kept, edges = memo[0], memo[1]
    nodes = design.nodes
    if len(nodes) != len(kept) or edges != design.edges:
        return False
    fields = _FIELDS
    for (nid, nd0, cm, f, ti), (key, nd) in zip(kept, nodes.items()):
        if nd is not nd0 or key != nid or nd.__dict__.get("_coerced") is not cm or fields(nd) != f or nd.tied != ti:
            return False
        props = nd.props
        if cm[1] is not props or cm[4] != props:
            return False
    return True


def _analyze(design: Design) -> Analysis:
    try:
        order = design.topo_order()
    except ValueError as exc:
        nid = str(exc).split(":")[0]
        iss = Issue(nid, "inputs", str(exc).split(": ", 1)[-1])
        return Analysis([], {n: NodeInfo(n, issue=iss if n == nid else None) for n in design.nodes}, [iss])
    ins: dict[str, list] = {n: [] for n in design.nodes}
    for e in design.edges:
        ins[e.dst].append(e)
    infos: dict[str, NodeInfo] = {}
    issues: list[Issue] = []
    nodes = design.nodes
    types: dict = {}  # type name -> LayerType, looked up once per estimate
    cache_get = _CACHE.get
    for nid in order:
        node = nodes[nid]
        info = NodeInfo(nid)
        infos[nid] = info
        lt = types.get(node.type)
        if lt is None:
            try:
                lt = types[node.type] = node.layer
            except KeyError:
                info.issue = Issue(nid, "type", f"unknown layer type {node.type!r}")
                issues.append(info.issue)
                continue
        try:
            # _coerced's fast path, inlined: the node has not been edited since its props were coerced
            memo = node.__dict__.get("_coerced")
            nprops = node.props
            if memo is not None and memo[0] == node.rev and memo[1] is nprops and memo[2] == lt.name and \
                    memo[4] == nprops:
                info.props = memo[3]
            else:
                info.props = _coerced(lt, nprops, node)
        except LayerError as err:
            info.issue = Issue(nid, err.field, err.message)
            issues.append(info.issue)
            continue
        edges = ins[nid]
        n_in = len(edges)
        if n_in == 1:
            gap = edges[0].dst_port != 0
        elif n_in > 1:
            edges.sort(key=_BY_PORT)
            gap = [e.dst_port for e in edges] != list(range(n_in))
        else:
            gap = False
        if n_in < lt.min_inputs or gap:
            ports = [e.dst_port for e in edges]
            need = lt.min_inputs if lt.max_inputs == lt.min_inputs else f"at least {lt.min_inputs}"
            msg = f"needs {need} connected input(s), has {n_in}" if n_in < lt.min_inputs else \
                f"input ports {ports} leave a gap"
            info.issue = Issue(nid, "inputs", msg, pending=n_in == 0)
            issues.append(info.issue)
            continue
        if lt.max_inputs is not None and n_in > lt.max_inputs:
            info.issue = Issue(nid, "inputs", f"takes at most {lt.max_inputs} input(s), has {n_in}")
            issues.append(info.issue)
            continue
        specs = []
        for e in edges:
            src = infos.get(e.src)
            if src is None or src.issue is not None or src.blocked_by is not None:
                info.blocked_by = e.src if src is None or src.issue else src.blocked_by
                break
            if e.src_port >= len(src.outputs):
                info.issue = Issue(nid, "inputs", f"{e.src} has no output {e.src_port}")
                break
            specs.append(src.outputs[e.src_port])
        if info.issue:
            issues.append(info.issue)
            continue
        if info.blocked_by:
            continue
        # _node_rules' cache hit, inlined (this runs for every node of every estimate)
        props = info.props
        key = (lt.name, id(props), ((specs[0].shape, specs[0].kind),) if len(specs) == 1 else
               tuple([(s.shape, s.kind) for s in specs]))
        hit = cache_get(key)
        if hit is None or hit[4] is not props:
            hit = _run_rules(key, lt, props, specs, node.name)
        outputs, params, flops, err, _ = hit
        if err is not None:
            info.issue = Issue(nid, err[0], err[1])
            issues.append(info.issue)
        else:
            if params and (not node.trainable or node.tied):
                params = _frozen(params, _frozen_names(design, node, params))
            info.outputs, info.params, info.flops = outputs, params, flops
    return Analysis(order, infos, issues)


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


__all__ = ["analyze", "Analysis", "NodeInfo", "TensorSpec", "ParamSpec"]

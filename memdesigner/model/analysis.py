"""Shape inference over a design: output shapes, parameters, FLOPs and per-node errors.

Errors never escape as exceptions: each bad node gets an Issue naming its field; nodes fed by a
bad node are marked as blocked (they cannot be checked until it is fixed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memdesigner.model.design import Design
from memdesigner.model.registry import Issue, LayerError, ParamSpec, ShapeCtx, TensorSpec


@dataclass
class NodeInfo:
    id: str
    outputs: list = field(default_factory=list)  # list[TensorSpec]
    params: list = field(default_factory=list)  # list[ParamSpec]
    flops: int = 0
    props: dict = field(default_factory=dict)  # coerced property values
    issue: Issue | None = None
    blocked_by: str | None = None  # an upstream node in error

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


def analyze(design: Design) -> Analysis:
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
    for nid in order:
        node = design.nodes[nid]
        info = NodeInfo(nid)
        infos[nid] = info
        try:
            lt = node.layer
        except KeyError:
            info.issue = Issue(nid, "type", f"unknown layer type {node.type!r}")
            issues.append(info.issue)
            continue
        try:
            info.props = lt.coerce_props(node.props)
        except LayerError as err:
            info.issue = Issue(nid, err.field, err.message)
            issues.append(info.issue)
            continue
        edges = sorted(ins[nid], key=lambda e: e.dst_port)
        n_in = len(edges)
        ports = [e.dst_port for e in edges]
        if n_in < lt.min_inputs or ports != list(range(n_in)):
            need = lt.min_inputs if lt.max_inputs == lt.min_inputs else f"at least {lt.min_inputs}"
            msg = f"needs {need} connected input(s), has {n_in}" if n_in < lt.min_inputs else \
                f"input ports {ports} leave a gap"
            info.issue = Issue(nid, "inputs", msg)
            issues.append(info.issue)
            continue
        if lt.max_inputs is not None and n_in > lt.max_inputs:
            info.issue = Issue(nid, "inputs", f"takes at most {lt.max_inputs} input(s), has {n_in}")
            issues.append(info.issue)
            continue
        specs = []
        for e in edges:
            src = infos.get(e.src)
            if src is None or not src.ok:
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
        ctx = ShapeCtx(info.props, specs, node.name)
        try:
            info.outputs = list(lt.shape(ctx))
            info.params = list(lt.params(ctx))
            info.flops = int(lt.flops(ctx, info.outputs))
        except LayerError as err:
            info.issue = Issue(nid, err.field, err.message)
            issues.append(info.issue)
        except (ValueError, TypeError, ZeroDivisionError, IndexError) as err:
            info.issue = Issue(nid, "props", f"invalid configuration: {err}")
            issues.append(info.issue)
    return Analysis(order, infos, issues)


__all__ = ["analyze", "Analysis", "NodeInfo", "TensorSpec", "ParamSpec"]

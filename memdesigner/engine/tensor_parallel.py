"""Tensor parallelism, per rank: the Megatron column/row split of a design as torch's
``parallelize_module(model, mesh, plan)`` with ``ColwiseParallel`` / ``RowwiseParallel`` runs it
(docs/memory-model.md, "Tensor parallel"; torch 2.13 ``torch/distributed/tensor/parallel/style.py``).

The rule (structural, so designs drawn by hand get it too; names are not read):

- a Linear whose input is *replicated* is **colwise** (weight and bias ``Shard(0)``: ``out/T`` rows;
  its output is the local ``Shard(-1)`` tensor): q / k / v, gate / up, fc1;
- the ops after it run on the local shard as long as they act per feature or per head: activations,
  dropout, scaling, element-wise products and sums of two shards, reshapes that split or merge the
  sharded dimension at its outer end (``view(B, S, -1, head_dim)``: the heads are split), transposes,
  permutes, matmuls and attention over the heads, softmax along another dimension;
- a Linear whose input is such a shard is **rowwise** (weight ``Shard(1)``: ``in/T`` columns, bias
  replicated); its output is a partial sum that an all-reduce makes replicated again: o / down, fc2;
- a colwise Linear whose shard reaches anything else (a norm, a residual add with a replicated
  tensor, the model's output, a loss) stays replicated, and so does everything fed only by it.
  So a classifier head, embeddings and norms are replicated (torch's tutorial shards the token
  embedding and the output head too; that plan is not modelled).

What each rank allocates beyond the sharded shapes (measured with DTensor on gloo):
- forward, after a rowwise Linear: the functional all-reduce's output (a new tensor the size of the
  Linear's output) while the partial result still exists; then the partial dies;
- backward, after a colwise Linear whose input needs a gradient: the partial input gradient is
  all-reduced into a new tensor of its size (``DTensor.from_local``'s backward redistributes it to
  ``Replicate``), then the partial dies; each colwise Linear does its own (q, k and v: three).

``world = data-parallel size (--gpus) x tensor-parallel size``: ``--gpus`` stays the data-parallel
degree, every tensor-parallel group holds one replica, and the data-parallel strategies act on each
rank's local shards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from memdesigner.model.analysis import analyze
from memdesigner.model.design import Node

# per-feature ops: the local shard runs through the same rule with its local shape
_ELEMENTWISE = {"Dropout", "Scale", "Contiguous", "ToDtype"}
_VIEWS = {"Reshape", "Transpose", "Permute"}


@dataclass
class TpPlan:
    """Which Linear is which, and the collectives each rank runs."""

    size: int
    styles: dict = field(default_factory=dict)  # node id -> "colwise" | "rowwise"
    sharded: dict = field(default_factory=dict)  # (node, port) -> sharded dim (per-sample index)
    fwd_allreduce: set = field(default_factory=set)  # rowwise Linears: all-reduce after forward
    bwd_allreduce: set = field(default_factory=set)  # colwise Linears: all-reduce of the input gradient

    def plan_for_torch(self, design) -> dict:
        """{module name: "colwise" | "rowwise"}: the ``parallelize_module`` plan (node names are
        the modules' dotted paths in imported designs)."""
        return {design.nodes[n].name: s for n, s in self.styles.items()}


def _elementwise(lt) -> bool:
    return lt.family == "activation" and lt.name != "Softmax" or lt.name in _ELEMENTWISE


def _norm_dim(d: int, nd_full: int) -> int:
    """A dim given with the batch (0) counted, as a per-sample index."""
    return (d % nd_full) - 1


def _reshape_dim(src: tuple, dim: int, dst: tuple, size: int) -> int | None:
    """The dimension of ``dst`` that carries the sharded ``src[dim]``'s outer end: the one starting
    at the same element offset (a split C -> (H, D) shards H; a merge (H, D) -> C shards C)."""
    before = math.prod(src[:dim])
    acc = 1
    for j, d in enumerate(dst):
        if acc == before and d % size == 0 and d > 1:
            return j
        acc *= d
        if acc > before:
            return None
    return None


def _propagate(design, an, colwise: set, size: int) -> tuple[dict, dict, set]:
    """Sharded values from the colwise Linears; returns (sharded, styles, bad colwise sources)."""
    sharded: dict = {}
    source: dict = {}  # (node, port) -> colwise Linears it comes from
    styles: dict = {}
    bad: set = set()
    ins: dict = {n: [] for n in an.order}
    for e in design.edges:
        if e.dst in ins:
            ins[e.dst].append(e)
    for lst in ins.values():
        lst.sort(key=lambda e: e.dst_port)
    consumers: dict = {}
    for e in design.edges:
        consumers.setdefault((e.src, e.src_port), []).append(e.dst)
    for nid in an.order:
        info = an.nodes[nid]
        if not info.ok:
            continue
        node = design.nodes[nid]
        keys = [(e.src, e.src_port) for e in ins[nid]]
        sk = [k for k in keys if k in sharded]
        srcs = set().union(*(source[k] for k in sk)) if sk else set()
        out = (nid, 0)
        if node.type == "Linear" and not sk:
            if nid in colwise:
                styles[nid] = "colwise"
                sharded[out] = len(info.outputs[0].shape) - 1
                source[out] = {nid}
            continue
        if not sk:
            continue
        lt = node.layer
        in_shapes = [an.nodes[k[0]].outputs[k[1]].shape for k in keys]
        dim = sharded[sk[0]]
        ok = all(sharded[k] == dim for k in sk) and len(sk) == len(keys)
        new = None
        if ok and node.type == "Linear":
            if dim == len(in_shapes[0]) - 1:
                styles[nid] = "rowwise"
                continue  # replicated again
            ok = False
        elif ok and (_elementwise(lt) or node.type in ("Add", "Multiply")):
            ok = all(s == in_shapes[0] for s in in_shapes)
            new = dim
        elif ok and node.type == "Softmax":
            nd = len(in_shapes[0]) + 1
            ok = _norm_dim(int(info.props.get("dim", -1)), nd) != dim
            new = dim
        elif ok and node.type == "Transpose":
            nd = len(in_shapes[0]) + 1
            a, b = _norm_dim(int(info.props["dim0"]), nd), _norm_dim(int(info.props["dim1"]), nd)
            new = b if dim == a else a if dim == b else dim
        elif ok and node.type == "Permute":
            perm = [p - 1 for p in info.props["dims"][1:]]
            new = perm.index(dim) if dim in perm else None
            ok = new is not None
        elif ok and node.type == "Reshape":
            new = _reshape_dim(in_shapes[0], dim, info.outputs[0].shape, size)
            ok = new is not None
        elif ok and node.type in ("MatMul", "ScaledDotProductAttention"):
            nd = len(in_shapes[0])
            ok = dim < nd - 2 and len({len(s) for s in in_shapes}) == 1
            new = dim
        else:
            ok = False
        if not ok or out not in consumers or node.output:
            bad |= srcs  # the shard reaches something that needs the whole tensor (or the output)
            continue
        sharded[out] = new
        source[out] = srcs
    return sharded, styles, bad


def make_plan(design, an, size: int) -> TpPlan:
    """The colwise / rowwise assignment (module docstring), iterated until every shard region
    ends in rowwise Linears."""
    colwise = {n for n in an.order if an.nodes[n].ok and design.nodes[n].type == "Linear"
               and design.nodes[n].trainable and an.nodes[n].outputs
               and an.nodes[n].outputs[0].shape[-1] % size == 0}
    while True:
        sharded, styles, bad = _propagate(design, an, colwise, size)
        # a colwise Linear must feed at least one rowwise Linear
        feeds_rowwise = set()
        if not bad:
            rowwise = {n for n, s in styles.items() if s == "rowwise"}
            ins = {}
            for e in design.edges:
                ins.setdefault(e.dst, []).append((e.src, e.src_port))
            # walk back from every rowwise Linear through shards
            stack = [k for r in rowwise for k in ins.get(r, [])]
            seen = set()
            while stack:
                k = stack.pop()
                if k in seen or k not in sharded:
                    continue
                seen.add(k)
                if styles.get(k[0]) == "colwise":
                    feeds_rowwise.add(k[0])
                stack.extend(ins.get(k[0], []))
            bad = {n for n, s in styles.items() if s == "colwise"} - feeds_rowwise
        if not bad:
            break
        colwise -= bad
    plan = TpPlan(size, styles, sharded)
    plan.fwd_allreduce = {n for n, s in styles.items() if s == "rowwise"}
    for n, s in styles.items():
        if s == "colwise":
            plan.bwd_allreduce.add(n)  # only when its input needs a gradient (the simulation knows)
    return plan


def local_design(design, an, plan: TpPlan):
    """A copy of the design with each rank's local shapes: colwise Linears ``out/T``, reshapes of a
    shard with the heads dimension ``/T``; everything else follows from the shapes."""
    d = design.detached_copy()
    T = plan.size
    for nid, style in plan.styles.items():
        if style == "colwise":
            n = d.nodes[nid]
            n.props["out_features"] = an.nodes[nid].outputs[0].shape[-1] // T
    for (nid, port), dim in plan.sharded.items():
        node = d.nodes[nid]
        if node.type == "Reshape" and port == 0:
            shape = list(an.nodes[nid].outputs[0].shape)
            shape[dim] //= T
            node.props["shape"] = tuple(shape)
    return d


def _parent_scope(scope: str) -> str:
    return scope.rsplit("/", 1)[0] if "/" in scope else ""


def sequence_parallel(d, an, plan: TpPlan) -> None:
    """torch's tutorial's sequence parallelism on the local design ``d`` (``an`` its analysis before
    these edits): every Input is the rank's chunk of the sequence (``SequenceParallel`` takes a plain
    tensor as its local shard), so norms, residual sums and everything outside the tensor-parallel
    regions hold ``S/T`` tokens; the value that feeds colwise Linears is all-gathered once
    (``PrepareModuleInput`` on their parent module) and each rowwise Linear's partial sums are
    reduce-scattered (``RowwiseParallel(output_layouts=Shard(1))``) instead of all-reduced."""
    T = plan.size
    for nid, node in d.nodes.items():
        if node.type != "Input":
            continue
        shape = list(an.nodes[nid].outputs[0].shape)
        tokens = an.nodes[nid].outputs[0].kind == "int64"
        if (len(shape) < (1 if tokens else 2)) or shape[0] % T:
            raise ValueError(f"sequence_parallel: input {node.name!r} {tuple(shape)} has no sequence dimension "
                             f"that splits into {T}")
        shape[0] //= T
        node.props["shape"] = tuple(shape)
    edges = list(d.edges)
    gathers: dict = {}  # (src, port) -> gather node id
    before: dict = {}  # node id -> nodes to insert right before it
    after: dict = {}
    new_nodes: dict = {}
    for nid in an.order:
        style = plan.styles.get(nid)
        if style == "colwise":
            e = next(e for e in edges if e.dst == nid)
            key = (e.src, e.src_port)
            if key not in gathers:
                gid = f"{nid}.sp_all_gather"
                gathers[key] = gid
                new_nodes[gid] = ("AllGather", _parent_scope(d.nodes[nid].scope))
                before.setdefault(nid, []).append(gid)
        elif style == "rowwise":
            rid = f"{nid}.sp_reduce_scatter"
            new_nodes[rid] = ("ReduceScatter", d.nodes[nid].scope)
            after.setdefault(nid, []).append(rid)
    out = []
    for e in edges:
        if plan.styles.get(e.dst) == "colwise":
            out.append(type(e)(gathers[(e.src, e.src_port)], e.dst, 0, e.dst_port))
        elif plan.styles.get(e.src) == "rowwise":
            out.append(type(e)(f"{e.src}.sp_reduce_scatter", e.dst, 0, e.dst_port))
        else:
            out.append(e)
    for (src, port), gid in gathers.items():
        out.append(type(edges[0])(src, gid, port, 0))
    for nid, rids in after.items():
        out.append(type(edges[0])(nid, rids[0], 0, 0))
    old = d.nodes
    nodes = {}
    for nid, node in old.items():  # execution follows insertion order among ready ops
        for gid in before.get(nid, ()):
            nodes[gid] = Node(gid, new_nodes[gid][0], gid, {"size": T, "dim": 1}, scope=new_nodes[gid][1])
        nodes[nid] = node
        for rid in after.get(nid, ()):
            nodes[rid] = Node(rid, new_nodes[rid][0], rid, {"size": T, "dim": 1}, scope=new_nodes[rid][1])
    d.nodes = nodes
    d.edges = out
    plan.fwd_allreduce = set()  # the reduce-scatters replace the all-reduces
    plan.bwd_allreduce = set()  # the colwise inputs are the gathered DTensor: no from_local, no all-reduce


def prepare(design, an, settings):
    """The design one tensor-parallel rank runs (unchanged for ``tensor_parallel`` 1). The plan
    rides on the returned design (``design.tp_plan``) for the simulation's collectives."""
    T = getattr(settings, "tensor_parallel", 1)
    if T <= 1 or not an.ok:
        return design, an
    plan = make_plan(design, an, T)
    if not plan.styles:
        return design, an
    d = local_design(design, an, plan)
    if getattr(settings, "sequence_parallel", False):
        sequence_parallel(d, an, plan)
    an2 = analyze(d)
    d.tp_plan = plan
    return d, an2


def plan_of(design) -> TpPlan | None:
    return getattr(design, "tp_plan", None)

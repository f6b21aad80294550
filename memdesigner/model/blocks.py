"""Blocks: named subgraphs defined once and used by several linked instances (``Design.blocks``).

A definition is a graph of its own whose ``BlockInput`` / ``BlockOutput`` nodes, in node order,
are its ports. An instance is a node of type ``Block`` (props ``definition`` and ``repeat``).
The engine never sees blocks: ``expand`` turns a design into the flat network it stands for,
every repetition of every instance simulated exactly. Expanded nodes share their definition's
prop dicts, so the per-node caches of analysis and simulation (keyed on props and input specs)
make 32 identical layers cost about one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memdesigner.limits import limit, raise_hint
from memdesigner.model.design import Design, Edge, Node
from memdesigner.model.flat_analysis import Analysis, NodeInfo, _coerced, _freeze, analyze_flat
from memdesigner.model.registry import Issue, LayerError

BLOCK, BIN, BOUT = "Block", "BlockInput", "BlockOutput"


class BlockError(LayerError):
    """A structural problem with one instance (unknown or recursive definition, a repeat that
    cannot chain); ``node`` is the top-level instance it is reported on."""

    def __init__(self, node: str, field: str, message: str):
        super().__init__(field, message)
        self.node = node


@dataclass
class BlockDef:
    """A named definition: its own graph; its ports are the graph's BlockInput / BlockOutput
    nodes in node order. ``stack``: it came from a ModuleList / Sequential (expanded names keep
    the ``.k`` index even at repeat 1)."""

    name: str
    graph: Design
    stack: bool = False

    @property
    def inputs(self) -> list[str]:
        return [n.id for n in self.graph.nodes.values() if n.type == BIN]

    @property
    def outputs(self) -> list[str]:
        return [n.id for n in self.graph.nodes.values() if n.type == BOUT]


def has_blocks(design: Design) -> bool:
    return bool(getattr(design, "blocks", None)) or any(n.type == BLOCK for n in design.nodes.values())


def new_definition(design: Design, name: str, stack: bool = False) -> BlockDef:
    """A new, empty definition registered in ``design.blocks``; its graph shares the library so
    nested instances resolve when it is opened on its own."""
    g = Design(name=name, channels_last=design.channels_last)
    g.blocks = design.blocks
    bd = BlockDef(name, g, stack)
    design.blocks[name] = bd
    return bd


def first_free(taken, base: str) -> str:
    """``base``, or ``base_2``, ``base_3`` ... : the first name not in ``taken``."""
    if base not in taken:
        return base
    i = 2
    while f"{base}_{i}" in taken:
        i += 1
    return f"{base}_{i}"


def unique_name(design: Design, base: str) -> str:
    """A definition name the design does not use yet."""
    return first_free(design.blocks, base)


# -- expansion ----------------------------------------------------------------------------------

@dataclass
class InstanceMeta:
    """Where a top-level instance went in the flat design."""

    id: str
    name: str
    definition: str
    repeat: int
    nodes: list = field(default_factory=list)  # expanded node ids, all repetitions, in order
    rep_nodes: list = field(default_factory=list)  # per repetition: its expanded node ids
    inputs: list = field(default_factory=list)  # concrete (node, port) feeding each input port
    rep_outputs: list = field(default_factory=list)  # per repetition: concrete (node, port) per output
    error: BlockError | None = None


# -- the budget: what an expansion would cost, counted before anything is expanded ---------------

MAX_BLOCK_DEPTH = 200  # the most MEMDESIGNER_MAX_BLOCK_DEPTH may allow: expansion recurses about 2 frames a level


def _repeat(node: Node) -> int:
    """An instance's repeat as the expansion reads it (a bad value: 1, as _Expander._instance does)."""
    try:
        return int(node.props.get("repeat", 1))
    except (TypeError, ValueError):
        return 1


def _definition_sizes(lib: dict) -> dict:
    """Definition name -> (layers one instance of it expands to, how deep blocks nest inside it,
    counting itself), by multiplying repeat counts down the nesting: nothing is expanded, and the
    walk is iterative (a 1,000-deep nesting costs no recursion). A definition that contains itself
    counts its inner self as nothing: the expansion refuses it anyway."""
    sizes: dict = {}

    def children(name):
        return iter([n.props.get("definition", "") for n in lib[name].graph.nodes.values() if n.type == BLOCK])

    for root in lib:
        if root in sizes:
            continue
        stack, open_ = [(root, children(root))], {root}
        while stack:
            name, todo = stack[-1]
            child = next(todo, None)
            if child is not None:
                if child in lib and child not in sizes and child not in open_:
                    open_.add(child)
                    stack.append((child, children(child)))
                continue
            stack.pop()
            open_.discard(name)
            layers, depth = 0, 0
            for n in lib[name].graph.nodes.values():
                if n.type == BLOCK:
                    inner = sizes.get(n.props.get("definition", ""), (0, 0))
                    layers += max(_repeat(n), 0) * inner[0]
                    depth = max(depth, inner[1])
                elif n.type not in (BIN, BOUT):
                    layers += 1
            sizes[name] = (layers, depth + 1)
    return sizes


def _count(n: int) -> str:
    if n < 10**15:
        return f"{n:,}"
    return f"{float(n):.2e}" if n.bit_length() < 1000 else "more than 10^300"


def over_budget(design: Design) -> dict:
    """Top-level instance id -> BlockError for each instance whose expansion would pass
    MEMDESIGNER_MAX_LAYERS (with what the design holds before it) or nest blocks deeper than
    MEMDESIGNER_MAX_BLOCK_DEPTH; such an instance is refused, not expanded, so a 797-byte file of
    two nested x100,000 repeats costs a count instead of gigabytes."""
    lib = getattr(design, "blocks", {}) or {}
    sizes = _definition_sizes(lib)
    cap, max_depth = limit("LAYERS"), min(limit("BLOCK_DEPTH"), MAX_BLOCK_DEPTH)
    total = sum(1 for n in design.nodes.values() if n.type != BLOCK)
    out = {}
    for node in design.nodes.values():
        if node.type != BLOCK:
            continue
        layers, depth = sizes.get(node.props.get("definition", ""), (0, 0))
        n = max(_repeat(node), 0) * layers
        if depth > max_depth:
            out[node.id] = BlockError(node.id, "definition", f"blocks nest {depth} deep, over the limit of {max_depth} "
                                                             f"({raise_hint('BLOCK_DEPTH')})")
        elif total + n > cap:
            what = f"expands to {_count(n)} layers" + ("" if n > cap else f", {_count(total + n)} with the rest")
            out[node.id] = BlockError(node.id, "repeat", f"{what}, over the {cap:,}-layer limit "
                                                         f"({raise_hint('LAYERS')})")
        else:
            total += n
    return out


class _Expander:
    def __init__(self, design: Design):
        self.src = design
        self.lib = getattr(design, "blocks", {}) or {}
        self.out = Design(name=design.name, channels_last=design.channels_last)
        self.out.settings = design.settings
        self.out.description = getattr(design, "description", "")
        self.out.param_order = getattr(design, "param_order", [])
        self.out.blocks = {}
        self.alias: dict = {}  # ref -> ref
        self.concrete: dict = {}  # (ctx, inner id) -> expanded id
        self.edges: list = []  # (src ref, expanded dst id, dst port)
        self.meta: dict[str, InstanceMeta] = {}
        self.node_rep: dict[str, tuple] = {}  # expanded id -> (top-level instance id, repetition)
        self.frozen = 0  # how many frozen instances (Node.trainable False) enclose the context expanded now
        self.refused = over_budget(design)  # top-level instances past the layer or nesting budget

    def run(self) -> Design:
        self._context("", self.src, (), None, None, None)
        for src, dst, port in self.edges:
            c = self._resolve(src)
            if c is not None:
                self.out._edges.append(Edge(c[0], dst, c[1], port))
        for m in self.meta.values():
            m.inputs = [self._resolve(r) for r in m.inputs]
            m.rep_outputs = [[self._resolve(r) for r in rep] for rep in m.rep_outputs]
        self.out.instances = self.meta
        self.out.node_rep = self.node_rep
        return self.out

    def _resolve(self, ref):
        seen = 0
        while ref in self.alias:
            ref = self.alias[ref]
            seen += 1
            if seen > 1_000_000:
                return None
        nid = self.concrete.get((ref[0], ref[1]))
        return None if nid is None else (nid, ref[2])

    def _context(self, ctx: str, graph: Design, stack: tuple, inputs, names, top):
        """Expand one graph. ctx: the id prefix of this context; inputs: refs for its
        BlockInputs (None at the top level); names: (name prefix, scope prefix, call) or None;
        top: (instance id, repetition) of the top-level instance this context belongs to."""
        ins: dict[str, list] = {}
        for e in graph.edges:
            ins.setdefault(e.dst, []).append(e)
        k_in = 0
        outs = []
        for node in graph.nodes.values():
            ref_in = sorted(ins.get(node.id, ()), key=lambda e: e.dst_port)
            if node.type == BIN and inputs is not None:
                self.alias[(ctx, node.id, 0)] = inputs[k_in] if k_in < len(inputs) else ("?", "?", 0)
                k_in += 1
                continue
            if node.type == BOUT and inputs is not None:
                outs.append((ctx, ref_in[0].src, ref_in[0].src_port) if ref_in else ("?", "?", 0))
                continue
            if node.type == BLOCK:
                self._instance(ctx, node, ref_in, stack, names, top)
                continue
            nid = ctx + node.id
            name, scope = node.name, node.scope
            if names is not None:
                name = names[0] + node.name
                scope = _join_scope(names[1], names[2], node.scope)
            if nid in self.out.nodes:
                raise BlockError(top[0] if top else node.id, "name", f"expanded node id {nid!r} is not unique")
            tied = {p: _remap_ref(t, graph, ctx) for p, t in node.tied.items()} if node.tied else {}
            ku = ctx + node.keep_until if node.keep_until and node.keep_until in graph.nodes else node.keep_until
            n = Node(nid, node.type, name, node.props, node.pos, node.bits, scope=scope, keep_until=ku,
                     tied=tied, fused=(ctx + node.fused) if node.fused and ctx else node.fused, layout=node.layout,
                     output=node.output, trainable=node.trainable and not self.frozen)
            memo = _definition_memo(node)
            if memo is not None:
                n.rev = node.rev
                n.__dict__["_coerced"] = memo  # the definition's coerced props: analysis' cache hits
            self.out.nodes[nid] = n
            self.concrete[(ctx, node.id)] = nid
            if top is not None:
                self.node_rep[nid] = top
                m = self.meta[top[0]]
                m.nodes.append(nid)
                m.rep_nodes[top[1]].append(nid)
            for e in ref_in:
                self.edges.append(((ctx, e.src, e.src_port), nid, e.dst_port))
        return outs

    def _instance(self, ctx, node, ref_in, stack, names, top):
        dname = node.props.get("definition", "")
        where = top[0] if top else node.id
        try:
            repeat = int(node.props.get("repeat", 1))
        except (TypeError, ValueError):
            repeat = 1
        bd = self.lib.get(dname)
        if top is None:
            self.meta[node.id] = InstanceMeta(node.id, node.name, dname, repeat)
        try:
            if top is None and node.id in self.refused:
                raise self.refused[node.id]
            if bd is None:
                raise BlockError(where, "definition", f"no block definition named {dname!r}")
            if dname in stack:
                raise BlockError(where, "definition",
                                 f"block {dname!r} contains itself ({' > '.join((*stack, dname))})")
            if repeat < 1:
                raise BlockError(where, "repeat", "must be at least 1")
            n_in, n_out = len(bd.inputs), len(bd.outputs)
            if repeat > 1 and n_in != n_out:
                raise BlockError(where, "repeat", f"repeat {repeat} chains outputs into inputs, but {dname!r} "
                                                  f"has {n_out} output(s) and {n_in} input(s)")
            if len(ref_in) > n_in:
                raise BlockError(where, "inputs", f"{dname!r} takes {n_in} input(s), {len(ref_in)} are connected")
        except BlockError as err:
            if top is None:
                self.meta[node.id].error = err
                return
            raise
        ports = {e.dst_port: (ctx, e.src, e.src_port) for e in ref_in}
        refs = [ports.get(i, ("?", "?", 0)) for i in range(n_in)]
        indexed = repeat > 1 or bd.stack
        start = node.props.get("start", 0) or 0
        self.frozen += not node.trainable  # a frozen instance freezes every node inside it
        try:
            for k in range(repeat):
                call = f"{node.name}.{start + k}" if indexed else node.name
                sub = f"{ctx}{node.id}.{start + k}." if indexed else f"{ctx}{node.id}."
                nm = (names[0] if names else "") + call + "."
                if names is not None:
                    scope_pre = _join_scope(names[1], names[2], node.scope)
                else:
                    scope_pre = node.scope
                t = top
                if top is None:
                    t = (node.id, k)
                    self.meta[node.id].rep_nodes.append([])
                refs = self._context(sub, bd.graph, (*stack, dname), refs, (nm, scope_pre, call if names is None
                                                                             else names[0] + call), t)
                if top is None:
                    self.meta[node.id].rep_outputs.append(list(refs))
        finally:
            self.frozen -= not node.trainable
        for j, r in enumerate(refs):
            self.alias[(ctx, node.id, j)] = r
        if top is None:
            self.meta[node.id].inputs = [ports.get(i, ("?", "?", 0)) for i in range(n_in)]


def _definition_memo(node: Node):
    """The definition node's coerced props (analysis' per-node memo), computed once per edit of
    the definition rather than once per repetition."""
    memo = node.__dict__.get("_coerced")
    if memo is None or memo[0] != node.rev or memo[1] is not node.props:
        from memdesigner.model import registry

        try:
            _coerced(registry.get(node.type), node.props, node)
        except (LayerError, KeyError, TypeError, ValueError):
            return None
        memo = node.__dict__.get("_coerced")
    return memo if memo is not None and memo[1] is node.props else None


def _join_scope(prefix: str, call: str, inner: str) -> str:
    """The scope of a node inside an instance: the instance's scope, the instance's call, then
    the node's own module calls inside the definition, each named from the call down."""
    parts = [p for p in prefix.split("/") if p] + [call]
    parts += [f"{call}.{p}" for p in inner.split("/") if p]
    return "/".join(parts)


def _remap_ref(target: str, graph: Design, ctx: str) -> str:
    nid, _, param = target.rpartition(".")
    if nid in graph.nodes and graph.nodes[nid].type not in (BLOCK, BIN, BOUT):
        return f"{ctx}{nid}.{param}"
    return target


def expand(design: Design) -> Design:
    """The flat network a design stands for (a design without blocks is returned unchanged).
    Inner nodes are named ``instance.k.inner`` (``instance.inner`` at repeat 1 unless the
    definition is a stack), scoped under the instance's call. The result carries
    ``instances`` (top-level instance id -> InstanceMeta) and ``node_rep`` (expanded id ->
    (instance id, repetition)); structural errors are kept in the meta, not raised."""
    if not has_blocks(design):
        return design
    ex = _Expander(design)
    try:
        return ex.run()
    except BlockError as err:  # a nested problem: reported on its top-level instance
        return _expand_skipping(design, err)


def _expand_skipping(design: Design, err: BlockError) -> Design:
    """Expand with the instance that raised ``err`` left out (its meta holds the error)."""
    bad = {err.node: err}
    while True:
        ex = _Expander(design)
        saved = {nid: design.nodes[nid] for nid in bad}
        try:
            for nid in bad:  # a stand-in: an instance of no definition, reported as the real error
                n = saved[nid]
                design.nodes[nid] = Node(n.id, BLOCK, n.name, {"definition": "\0", "repeat": 1}, n.pos)
            flat = ex.run()
        except BlockError as e2:
            bad[e2.node] = e2
            continue
        finally:
            design.nodes.update(saved)
        for nid, e in bad.items():
            flat.instances[nid] = InstanceMeta(nid, saved[nid].name, saved[nid].props.get("definition", ""),
                                               int(saved[nid].props.get("repeat", 1)), error=e)
        return flat


# -- analysis and the engine's view -------------------------------------------------------------

def _chain_problem(m: InstanceMeta, infos: dict) -> Issue | None:
    """A repeat whose repetition k's outputs do not have the shapes its inputs had."""
    if m.repeat <= 1:
        return None

    def spec(v):
        if v is None:
            return None
        info = infos.get(v[0])
        if info is None or not info.ok or v[1] >= len(info.outputs):
            return None
        return info.outputs[v[1]]

    first = [spec(v) for v in m.inputs]
    if any(s is None for s in first):
        return None
    for k, outs in enumerate(m.rep_outputs[:-1]):
        got = [spec(v) for v in outs]
        if any(s is None for s in got):
            return None
        for i, (a, b) in enumerate(zip(first, got)):
            if a != b:
                return Issue(m.id, "repeat", f"repeat {m.repeat} does not chain: repetition {k + 1}'s output {i} "
                                             f"is {_shape(b)} but its input {i} is {_shape(a)}")
    return None


def _shape(spec) -> str:
    return "×".join(map(str, spec.shape)) + ("" if spec.kind == "float" else f" {spec.kind}")


def _inner_issue(m: InstanceMeta, infos: dict, flat: Design) -> Issue | None:
    for nid in m.nodes:
        info = infos[nid]
        if info.issue is not None:
            iss = info.issue
            return Issue(m.id, "definition", f"{flat.nodes[nid].name}: {iss.field}: {iss.message}",
                         pending=iss.pending)
    return None


_VIEWS: dict = {}  # content of a design with blocks -> (flat design, analysis)
_VIEWS_MAX = 4


def _content(g: Design) -> tuple:
    """Everything about a graph that its expansion and analysis read (not canvas positions)."""
    nodes = tuple((n.id, n.type, n.name, _freeze(n.props), n.bits, n.scope, n.keep_until, _freeze(n.tied),
                   n.fused, n.layout, n.output, n.trainable) for n in g.nodes.values())
    return g.name, g.channels_last, nodes, tuple(g.edges)


def _private_copy(design: Design) -> Design:
    """The design and its definitions detached, so a cached expansion shares no dict with a
    design that may be edited in place later."""
    d = design.detached_copy()
    d.blocks = {}
    for name, bd in (design.blocks or {}).items():
        g = bd.graph.detached_copy()
        g.blocks = d.blocks
        d.blocks[name] = BlockDef(name, g, bd.stack)
    return d


def engine_view(design: Design) -> tuple[Design, Analysis]:
    """The flat design and its analysis, with each instance's own problems (unknown or
    recursive definition, a repeat that does not chain) marking its nodes and everything
    downstream invalid, so the engine refuses what the canvas refuses.

    Remembered per content (the top-level graph and every definition): the window re-estimates
    a snapshot of the same blocks after every settings change or edit outside them, and a
    Llama-3-8B's 32 layers cost more to expand and analyse than the whole top level does to
    compare. The result is shared: callers do not modify it (fine-tuning works on a copy)."""
    if getattr(design, "instances", None) is not None:
        return _engine_view(design)
    try:
        key = (_content(design), tuple((n, bd.stack, _content(bd.graph)) for n, bd in (design.blocks or {}).items()),
               limit("LAYERS"), limit("BLOCK_DEPTH"))  # the budget decides what is expanded
        hit = _VIEWS.get(key)
    except TypeError:  # a prop value that cannot be hashed: no memo
        return _engine_view(design)
    if hit is None:
        hit = _engine_view(_private_copy(design))
        if len(_VIEWS) >= _VIEWS_MAX:
            _VIEWS.pop(next(iter(_VIEWS)))
    else:
        del _VIEWS[key]  # least recently used goes first
    _VIEWS[key] = hit
    return hit


def transient_view(design: Design) -> tuple[Design, Analysis]:
    """``engine_view`` of a one-off variant (make-it-fit's sequence-length trials), not remembered:
    it must not push the designs being edited and estimated out of the memo."""
    return _engine_view(expand(design))


def _engine_view(design: Design) -> tuple[Design, Analysis]:
    flat = design if getattr(design, "instances", None) is not None else expand(design)
    an = analyze_flat(flat)
    metas = getattr(flat, "instances", {}) or {}
    bad: dict[str, Issue] = {}
    for m in metas.values():
        if m.error is not None:
            bad[m.id] = Issue(m.id, m.error.field, m.error.message)
        else:
            iss = _chain_problem(m, an.nodes)
            if iss is not None:
                bad[m.id] = iss
    an.block_issues = bad
    if not bad:
        return flat, an
    issues = list(an.issues)
    dead = set()
    for iid, iss in bad.items():
        issues.append(iss)
        for nid in metas[iid].nodes:
            info = an.nodes[nid]
            if info.ok:
                an.nodes[nid] = NodeInfo(nid, blocked_by=iid)
            dead.add(nid)
    ins: dict[str, list] = {}
    for e in flat.edges:
        ins.setdefault(e.dst, []).append(e.src)
    for nid in an.order:
        if nid not in dead and an.nodes[nid].ok and any(s in dead for s in ins.get(nid, ())):
            src = next(s for s in ins[nid] if s in dead)
            an.nodes[nid] = NodeInfo(nid, blocked_by=flat.node_rep.get(src, (src,))[0])
            dead.add(nid)
    out = Analysis(an.order, an.nodes, issues)
    out.block_issues = bad
    return flat, out


def analyze_collapsed(design: Design) -> Analysis:
    """The analysis of a design with blocks as the canvas shows it: ordinary nodes as they are
    in the flat network, each instance as one node (its last repetition's outputs, all its
    parameters, its FLOPs, the first problem inside it)."""
    try:
        order = design.topo_order()
    except ValueError as exc:  # as analysis.analyze says it
        nid = str(exc).split(":")[0]
        iss = Issue(nid, "inputs", str(exc).split(": ", 1)[-1])
        return Analysis([], {n: NodeInfo(n, issue=iss if n == nid else None) for n in design.nodes}, [iss])
    flat, fan = engine_view(design)
    metas = flat.instances
    ins: dict[str, list] = {n: [] for n in design.nodes}
    for e in design.edges:
        ins[e.dst].append(e)
    infos: dict[str, NodeInfo] = {}
    issues: list[Issue] = []
    for nid in order:
        node = design.nodes[nid]
        upstream = next((e.src for e in ins[nid] if e.src in infos and not infos[e.src].ok), None)
        if node.type != BLOCK:
            info = fan.nodes.get(nid) or NodeInfo(nid)
            if info.blocked_by is not None or (info.issue is not None and upstream is not None):
                src = upstream or info.blocked_by
                info = NodeInfo(nid, props=info.props, blocked_by=_top_blocker(src, infos, flat))
            infos[nid] = info
            if info.issue is not None:
                issues.append(info.issue)
            continue
        m = metas.get(nid)
        info = NodeInfo(nid, props=dict(node.props))
        infos[nid] = info
        if m is None:
            info.issue = Issue(nid, "definition", "not expanded")
        elif nid in fan.block_issues:  # its own error (a repeat that does not chain, ...)
            info.issue = fan.block_issues[nid]
        elif upstream is not None:
            info.blocked_by = _top_blocker(upstream, infos, flat)
            continue
        else:
            missing = [i for i, v in enumerate(m.inputs) if v is None]
            if missing:
                n_in = len(m.inputs)
                info.issue = Issue(nid, "inputs", f"needs {n_in} connected input(s), has {n_in - len(missing)}",
                                   pending=len(missing) == n_in)
            else:
                info.issue = _chain_problem(m, fan.nodes) or _inner_issue(m, fan.nodes, flat)
            if info.issue is None:
                blocked = next((fan.nodes[n].blocked_by for n in m.nodes if fan.nodes[n].blocked_by), None)
                if blocked is not None:
                    info.blocked_by = _top_blocker(blocked, infos, flat)
                    continue
                outs = []
                for v in (m.rep_outputs[-1] if m.rep_outputs else []):
                    src = fan.nodes.get(v[0]) if v else None
                    outs.append(src.outputs[v[1]] if src is not None and src.ok else None)
                if any(o is None for o in outs):
                    info.issue = Issue(nid, "definition", "an output port of the definition is not connected")
                else:
                    info.outputs = outs
                    info.params = [p for n in m.nodes for p in fan.nodes[n].params]
                    info.flops = sum(fan.nodes[n].flops for n in m.nodes)
        if info.issue is not None:
            issues.append(info.issue)
    out = Analysis(order, infos, issues)
    out.flat_view = (flat, fan)  # what the engine runs: estimate(design, analysis=out) reuses it
    return out


def for_engine(design: Design, analysis=None):
    """(flat design, its analysis) for the engine; reuses the expansion an analysis of the same
    design already made (the window analyses, then estimates)."""
    view = getattr(analysis, "flat_view", None)
    return view if view is not None else engine_view(design)


def _top_blocker(src: str, infos: dict, flat: Design) -> str:
    """The top-level node to name as the blocker of a node fed by ``src`` (a flat id)."""
    top = getattr(flat, "node_rep", {}).get(src)
    if top is not None:
        return top[0]
    info = infos.get(src)
    if info is not None and info.blocked_by:
        return info.blocked_by
    return src


# -- per-instance totals for the window ---------------------------------------------------------

def instance_totals(flat: Design, rows: dict) -> dict:
    """Per top-level instance: its memory per repetition (the largest) and in total, from the
    simulation's per-node rows: parameter bytes (weights + buffers), new activation storages and
    the extra tensors kept for backward."""
    out = {}
    for m in (getattr(flat, "instances", None) or {}).values():
        per_rep = []
        for ids in m.rep_nodes:
            acc = {"params": 0, "param_bytes": 0, "activation_bytes": 0, "kept_bytes": 0}
            for nid in ids:
                r = rows.get(nid)
                if r is None:
                    continue
                acc["params"] += r["params"]
                acc["param_bytes"] += r["param_bytes"] + r["buffer_bytes"]
                acc["activation_bytes"] += r["activation_bytes"]
                acc["kept_bytes"] += r["kept_bytes"]
            per_rep.append(acc)
        total = {k: sum(a[k] for a in per_rep) for k in ("params", "param_bytes", "activation_bytes", "kept_bytes")}
        one = max(per_rep, key=lambda a: a["param_bytes"] + a["activation_bytes"] + a["kept_bytes"]) if per_rep \
            else dict.fromkeys(total, 0)
        out[m.id] = {"definition": m.definition, "repeat": m.repeat, "nodes": len(m.nodes),
                     "per_instance": one, "total": total,
                     "memory_per_instance_bytes": one["param_bytes"] + one["activation_bytes"] + one["kept_bytes"],
                     "memory_total_bytes": total["param_bytes"] + total["activation_bytes"] + total["kept_bytes"]}
    return out


__all__ = ["BlockDef", "BlockError", "expand", "engine_view", "analyze_collapsed",
           "instance_totals", "has_blocks", "new_definition", "unique_name"]

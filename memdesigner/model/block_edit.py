"""Editing with blocks: group a selection into a definition, ungroup an instance, give one
instance its own copy of the definition. Pure model operations; the window wraps each in one
undoable command (memdesigner/_qt/blocks/block_commands.py).
"""

from __future__ import annotations

import copy

from memdesigner.model.analysis import analyze
from memdesigner.model.block_fold import _free
from memdesigner.model.blocks import BIN, BLOCK, BOUT, BlockDef, expand, new_definition, unique_name
from memdesigner.model.design import Design, Edge, Node


def group_nodes(design: Design, ids, name: str = "block") -> str:
    """Move the nodes ``ids`` into a new definition and put one instance in their place (at the
    first one's place in the node order, so the execution order stays). Edges that cross the
    selection become ports: one input per outside value read inside, one output per inside value
    read outside, in the order the edges were drawn. Returns the instance's id."""
    sel = [nid for nid in design.nodes if nid in set(ids)]
    if not sel:
        raise ValueError("select the nodes to group first")
    chosen = set(sel)
    an = analyze(design)
    name = unique_name(design, name)
    bd = new_definition(design, name)
    g = bd.graph
    in_vals: list = []  # (src, port) from outside, in edge order
    out_vals: list = []  # (src, port) inside, read outside
    for e in design.edges:
        if e.dst in chosen and e.src not in chosen and (e.src, e.src_port) not in in_vals:
            in_vals.append((e.src, e.src_port))
        if e.src in chosen and e.dst not in chosen and (e.src, e.src_port) not in out_vals:
            out_vals.append((e.src, e.src_port))
    xs = [design.nodes[n].pos[0] for n in sel]
    ys = [design.nodes[n].pos[1] for n in sel]
    x0, y0 = min(xs), min(ys)
    index = design.node_index(sel[0])
    for nid in sel:
        node = design.nodes[nid]
        g.insert_node(Node(node.id, node.type, node.name, node.props, node.pos, node.bits, node.rev, node.scope,
                           node.keep_until, dict(node.tied), node.fused, node.layout, node.output, node.trainable))
    for i, v in enumerate(in_vals):
        info = an.nodes.get(v[0])
        spec = info.outputs[v[1]] if info is not None and info.ok and v[1] < len(info.outputs) else None
        props = {} if spec is None else {"shape": list(spec.shape),
                                         "dtype": "int64" if spec.kind == "int64" else "float"}
        g.add_node(BIN, props, id=_free(g, f"in{i}"), name=f"in{i}", pos=(x0 - 220, y0 + 120 * i))
    for i in range(len(out_vals)):
        g.add_node(BOUT, {}, id=_free(g, f"out{i}"), name=f"out{i}", pos=(max(xs) + 260, y0 + 120 * i))
    ports_in = {v: k for k, v in enumerate(in_vals)}
    ports_out = {v: k for k, v in enumerate(out_vals)}
    bin_ids, bout_ids = bd.inputs, bd.outputs
    outer: list[Edge] = []
    for e in design.edges:
        a, b = e.src in chosen, e.dst in chosen
        if a and b:
            g.add_edge(e.src, e.dst, e.src_port, e.dst_port, check_cycle=False)
        elif b:
            g.add_edge(bin_ids[ports_in[(e.src, e.src_port)]], e.dst, 0, e.dst_port, check_cycle=False)
        elif a:
            outer.append(Edge("\0", e.dst, ports_out[(e.src, e.src_port)], e.dst_port))
        else:
            outer.append(e)
    for v, j in ports_out.items():
        g.add_edge(v[0], bout_ids[j], v[1], 0, check_cycle=False)
    inst_id = _free(design, name)
    inst = Node(inst_id, BLOCK, name, {"definition": name, "repeat": 1}, (sum(xs) / len(xs), sum(ys) / len(ys)))
    items = [(k, v) for k, v in design.nodes.items() if k not in chosen]
    items.insert(sum(1 for k in list(design.nodes)[:index] if k not in chosen), (inst_id, inst))
    design.nodes.clear()
    design.nodes.update(items)
    edges = [Edge(inst_id, e.dst, e.src_port, e.dst_port) if e.src == "\0" else e for e in outer]
    edges += [Edge(v[0], inst_id, v[1], k) for v, k in ports_in.items()]
    design.edges = edges
    design._emit("reset", None)
    return inst_id


def ungroup(design: Design, inst_id: str) -> list[str]:
    """Put an instance's network (every repetition) back in its place; the definition stays in
    the library while other instances use it. Returns the new nodes' ids."""
    inst = design.nodes[inst_id]
    probe = Design(design.name, design.channels_last)
    probe.blocks = design.blocks
    ins = design.inputs_of(inst_id)
    feeders = {}
    for e in ins:
        feeders[e.dst_port] = (e.src, e.src_port)
    for (src, _p) in feeders.values():
        if src not in probe.nodes:
            probe.nodes[src] = Node(src, "Input", src)
    probe.nodes[inst.id] = inst
    for port, (src, sp) in feeders.items():
        probe._edges.append(Edge(src, inst.id, sp, port))
    bd = design.blocks[inst.props["definition"]]
    flat = expand(probe)
    meta = flat.instances[inst.id]
    if meta.error is not None:
        raise ValueError(f"{inst.name}: {meta.error.field}: {meta.error.message}")
    single = inst.props.get("repeat", 1) == 1 and not bd.stack
    rename = {}
    for nid in meta.nodes:
        inner = nid[len(inst.id) + 1:]
        rename[nid] = inner if single and inner not in design.nodes else _free(design, nid)
    # laid out where the instance was, each repetition to the right of the previous one
    xs = [flat.nodes[n].pos[0] for n in meta.nodes] or [0.0]
    ys = [flat.nodes[n].pos[1] for n in meta.nodes] or [0.0]
    width = max(xs) - min(xs) + 300
    rep_of = {nid: k for k, ids in enumerate(meta.rep_nodes) for nid in ids}
    new_nodes = []
    for nid in meta.nodes:
        n = flat.nodes[nid]
        pos = (inst.pos[0] + n.pos[0] - min(xs) + rep_of.get(nid, 0) * width, inst.pos[1] + n.pos[1] - min(ys))
        new_nodes.append(Node(rename[nid], n.type, n.name if not single else n.name[len(inst.name) + 1:],
                              dict(n.props), pos, n.bits, 0, n.scope,
                              rename.get(n.keep_until, n.keep_until),
                              {p: _rename_tied(t, rename) for p, t in n.tied.items()}, n.fused, n.layout, n.output,
                              n.trainable))
    # place the nodes at the instance's place in the order, laid out around it
    items = []
    for k, v in design.nodes.items():
        if k == inst_id:
            items.extend((n.id, n) for n in new_nodes)
        else:
            items.append((k, v))
    out_src = {j: v for j, v in enumerate(meta.rep_outputs[-1])} if meta.rep_outputs else {}
    edges = []
    for e in design.edges:
        if e.dst == inst_id:
            continue
        if e.src == inst_id:
            v = out_src.get(e.src_port)
            if v is not None:
                edges.append(Edge(rename.get(v[0], v[0]), e.dst, v[1], e.dst_port))
            continue
        edges.append(e)
    for e in flat.edges:
        if e.dst in rename:
            edges.append(Edge(rename.get(e.src, e.src), rename[e.dst], e.src_port, e.dst_port))
    design.nodes.clear()
    design.nodes.update(items)
    design.edges = edges
    if not any(n.type == BLOCK and n.props.get("definition") == bd.name for n in _all_nodes(design)):
        design.blocks.pop(bd.name, None)
    design._emit("reset", None)
    return [n.id for n in new_nodes]


def _rename_tied(t: str, rename: dict) -> str:
    nid, _, p = t.rpartition(".")
    return f"{rename[nid]}.{p}" if nid in rename else t


def _all_nodes(design: Design):
    yield from design.nodes.values()
    for bd in design.blocks.values():
        yield from bd.graph.nodes.values()


def make_unique(design: Design, inst_id: str, graph: Design | None = None) -> str:
    """Give one instance (in ``graph``: the design or a definition's graph) a copy of its
    definition, so that editing it no longer changes the others. Returns the copy's name."""
    graph = graph or design
    inst = graph.nodes[inst_id]
    src = design.blocks[inst.props["definition"]]
    name = unique_name(design, src.name)
    copy_def(design, src, name)
    graph.set_prop(inst_id, "definition", name)
    return name


def copy_def(design: Design, src: BlockDef, name: str) -> BlockDef:
    bd = new_definition(design, name, src.stack)
    for n in src.graph.nodes.values():
        bd.graph.nodes[n.id] = Node(n.id, n.type, n.name, copy.deepcopy(n.props), n.pos, n.bits, 0, n.scope,
                                    n.keep_until, dict(n.tied), n.fused, n.layout, n.output, n.trainable)
    bd.graph.edges = list(src.graph.edges)
    return bd


def rename_definition(design: Design, old: str, new: str) -> None:
    """Rename a definition and every instance's reference to it."""
    if old not in design.blocks:
        raise ValueError(f"no block definition named {old!r}")
    if new in design.blocks:
        raise ValueError(f"a block definition named {new!r} exists")
    if not new:
        raise ValueError("a block definition needs a name")
    bd = design.blocks.pop(old)
    bd.name = new
    bd.graph.name = new
    items = list(design.blocks.items())
    design.blocks.clear()
    design.blocks.update(items)
    design.blocks[new] = bd
    for g in (design, *[b.graph for b in design.blocks.values()]):
        for n in list(g.nodes.values()):
            if n.type == BLOCK and n.props.get("definition") == old:
                g.set_prop(n.id, "definition", new)


def users(design: Design, name: str) -> int:
    """How many instances use the definition ``name``."""
    return sum(1 for n in _all_nodes(design) if n.type == BLOCK and n.props.get("definition") == name)


__all__ = ["group_nodes", "ungroup", "make_unique", "copy_def", "rename_definition", "users", "BOUT"]

"""The layers activation checkpointing can wrap ("units"), as a person wraps them in
``torch.utils.checkpoint.checkpoint``: below the passes (the forward pass asks which nodes a
``checkpoint_units`` setting reruns) and below the planner (engine/checkpoint_plan.py), which
chooses among them with the whole estimate."""

from __future__ import annotations

from memdesigner.engine.finetune import layer_of
from memdesigner.model import registry
from memdesigner.model.analysis import analyze
from memdesigner.model.blocks import for_engine

SKIP_TYPES = ("Input", "Loss")  # nothing to recompute / backward starts there


FOLLOWERS = ("activation", "normalization", "pooling")  # families that join the layer they follow


def _prefix(name: str) -> str | None:
    """A block named by its nodes' common prefix: ``layer1_0`` of ``layer1_0_conv1``, ``block3`` of
    ``block3_expand_bn`` (flattened module paths, as Keras and torch-export names them)."""
    tokens = name.split("_")
    for i in range(len(tokens) - 2, 0, -1):
        if tokens[i].isdigit():
            return "_".join(tokens[:i + 1])
    if len(tokens) >= 3 and tokens[0][-1:].isdigit():
        return tokens[0]
    return None


def units(order: list, nodes: dict, in_edges: dict | None = None) -> dict[str, list[list[str]]]:
    """Layer name -> its runs of consecutive node ids, in execution order. A layer is a repeated
    layer (``model.layers.3``), else a block named by a common prefix, else one node with the
    activations, norms and pools that directly follow it (conv, bn, relu); what follows a repeated
    layer or a block outside it (Llama's final ``model.norm``) is a layer of its own. A shared layer called
    twice has two runs: each call is its own checkpoint."""
    out: dict[str, list[list[str]]] = {}
    prev = prev_nid = None
    structured = False  # prev is a repeated layer or a named block, not a lone node
    for nid in order:
        node = nodes[nid]
        if node.type in SKIP_TYPES:
            prev = prev_nid = None
            continue
        name = layer_of(node) or _prefix(node.name)
        if name is None:
            # a norm after a decoder layer's residual add (Llama's ``model.norm``) is a module of its
            # own, not part of the layer: only a lone layer takes the ops that follow it
            srcs = {e.src for e in in_edges.get(nid, ())} if in_edges is not None else set()
            follows = (prev is not None and not structured and srcs == {prev_nid}
                       and registry.get(node.type).family in FOLLOWERS)
            name = prev if follows else node.name
            structured = False
        else:
            structured = True
        if name != prev:
            out.setdefault(name, []).append([])
            prev = name
        out[name][-1].append(nid)
        prev_nid = nid
    return out


_UNITS_MEMO: list = []  # (order, nodes, units): the last few graphs a run asked about


def _units_memo(order: list, nodes: dict, in_edges: dict | None) -> dict:
    """``units`` of the graph a simulation runs (its structure's order and the design's nodes, the
    same objects for every run over one analysis: a checkpoint plan's trials), computed once."""
    for o, n, k, found in _UNITS_MEMO:
        if o is order and n is nodes and k == len(order):
            return found
    found = units(order, nodes, in_edges)
    _UNITS_MEMO.insert(0, (order, nodes, len(order), found))
    del _UNITS_MEMO[8:]
    return found


def unit_segments(order: list, nodes: dict, names, in_edges: dict | None = None) -> list[list[str]]:
    """The engine's checkpoint segments for ``Settings.checkpoint_units``: every run of a named layer."""
    found = _units_memo(order, nodes, in_edges)
    unknown = [n for n in names if n not in found]
    if unknown:
        shown = ", ".join(list(found)[:6]) + (", ..." if len(found) > 6 else "")
        raise ValueError(f"checkpoint_units: {unknown[0]!r} is no layer of the design (layers: {shown})")
    pos = {nid: i for i, nid in enumerate(order)}
    segs = [run for n in dict.fromkeys(names) for run in found[n]]
    return sorted(segs, key=lambda run: pos[run[0]])


def check_units(s) -> None:
    """Validate and normalise Settings.checkpoint_units (a tuple of layer names)."""
    v = s.checkpoint_units
    if v is None:
        v = ()
    if isinstance(v, str):
        v = v.split(",")
    out = tuple(str(x).strip() for x in v)
    if any(not x for x in out):
        raise ValueError(f"checkpoint_units: an empty name in {','.join(out)!r}")
    object.__setattr__(s, "checkpoint_units", out)
    if out and (s.checkpointing or s.checkpoint_layers):
        raise ValueError("checkpoint_units: choose one of checkpointing, checkpoint_layers, checkpoint_units")


def check_design_units(design, names) -> None:
    """Raise ValueError (one line naming it) for a layer name the design does not have."""
    d, an = for_engine(design, None) if design.blocks else (design, analyze(design))
    in_edges: dict = {}
    for e in d.edges:
        in_edges.setdefault(e.dst, []).append(e)
    unit_segments([n for n in an.order if n in d.nodes], d.nodes, names, in_edges)

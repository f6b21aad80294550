"""An immutable copy of a design, cheap enough to take on the UI thread, for a serializer that runs
on another thread (the autosave's full write on the worker).

Edits change a node in place (``Design.set_prop`` writes into its props dict), so a worker that
serialised the live design could write half an edit. ``freeze`` copies each node's attribute dict
and its props (10,000 nodes: ~10 ms, where ``design_to_dict`` takes ~45 ms and the JSON text as
long again); ``thaw`` makes a Design of it, the worker's own, that no edit reaches."""

from __future__ import annotations

from dataclasses import dataclass

from memdesigner.model.design import Design, Node


@dataclass(frozen=True)
class Frozen:
    name: str
    channels_last: bool
    description: str
    settings: dict
    param_order: list
    nodes: list  # the nodes' attribute dicts, in order (props and tied copied)
    edges: list
    library_versions: dict


def freeze(d: Design) -> Frozen:
    """What ``design_to_dict`` reads of ``d``, copied. Block definitions are not covered (their
    graphs are edited apart from the design): the caller writes a design with blocks itself."""
    nodes = []
    add = nodes.append
    for n in d.nodes.values():
        a = n.__dict__.copy()
        a["props"] = a["props"].copy()
        if a["tied"]:
            a["tied"] = a["tied"].copy()
        add(a)
    return Frozen(d.name, d.channels_last, getattr(d, "description", ""), dict(d.settings),
                  list(d.param_order or ()), nodes, list(d.edges),
                  dict(getattr(d, "library_versions", None) or {}))


def thaw(f: Frozen) -> Design:
    """The frozen design as a Design of its own (the nodes' dicts are its own copies again, so the
    same Frozen can be thawed twice)."""
    d = Design(f.name, f.channels_last)
    if f.description:
        d.description = f.description
    d.settings = dict(f.settings)
    d.param_order = list(f.param_order)
    d.library_versions = dict(f.library_versions)
    new = object.__new__
    nodes = {}
    for a in f.nodes:
        n = new(Node)
        n.__dict__ = {**a, "props": dict(a["props"]), "tied": dict(a["tied"])}
        nodes[a["id"]] = n
    d.nodes = nodes
    d.edges = list(f.edges)
    return d

"""Each op's NodeInfo and node as lists in the run's order, made once per analysis and design
(in C), for the steps after an edit that compare them with the previous estimate's: the op
numbers of the rule cache (engine/compiled_rule.py op_ids) and the report's layer rows
(engine/layer_rows.py)."""

from __future__ import annotations

from operator import attrgetter

from memdesigner.model.analysis import READ_ONLY_NODES

_SHOWN = attrgetter("name", "type", "layout")  # what a layer row reads of its node
TYPE = attrgetter("type")  # what an op number reads of its node


def ops_in_order(design, an, order: list) -> tuple:
    """(infos, nodes, read_only) for ``order``: the NodeInfos, the node objects, and whether the
    nodes are a snapshot's copies, which nobody edits (model/snapshots.py): compared by identity
    then; a live design's nodes may be edited in place and are compared by the fields read."""
    memo = an.__dict__.get("_ops_in_order")
    if memo is not None and memo[0] is design and memo[1] is order:
        return memo[2]
    got = (list(map(an.nodes.__getitem__, order)), list(map(design.nodes.__getitem__, order)),
           bool(design.__dict__.get(READ_ONLY_NODES)))
    an.__dict__["_ops_in_order"] = (design, order, got)
    return got


def node_column(nodes: list, read_only: bool, fields=_SHOWN) -> list:
    """What to compare of each node: the node itself (a snapshot's), else its ``fields``."""
    return nodes if read_only else list(map(fields, nodes))


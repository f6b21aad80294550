"""Snapshots of a design taken one after another (the window's worker takes one per edit), each
reusing the previous snapshot's node copies for the nodes that did not change.

A copy of every node cost ~17 ms at 10,000 nodes, and its garbage the collections after it,
while an edit changes one node. Whether a node changed is decided by content: the live node's
fields (``__dict__``, rev included) against a record of them taken with its copy, compared in C
for all nodes at once. So an edit through Design (which bumps rev), one made in place behind its
back (``node.props["k"] = v``, a nested list changed) and a node put back by undo are all seen;
only a value replaced in place (not through Design) by an equal one of another type (1 -> 1.0
or True) is not, as the analysis does not see it either (it compares props with == too).
The copies own their props, tied parameters and nested prop values (lists, dicts): nothing a
later edit of the live design changes is shared with a snapshot the worker still reads. A reused
copy is shared by consecutive snapshots: they are read, never edited (the engine's transforms
edit copies of their own, Design.detached_copy).
"""

from __future__ import annotations

import copy
from itertools import compress, count
from operator import attrgetter, eq, not_

from memdesigner.model.analysis import READ_ONLY_NODES
from memdesigner.model.design import _N_FIELDS, _NODE_FIELDS, Design, Node

_ATOMIC = frozenset({int, float, str, bool, type(None), bytes, complex})
_node_new = object.__new__
_dict_of = attrgetter("__dict__")


def _own(v):
    """``v`` with its mutable parts copied (the immutable ones shared)."""
    t = type(v)
    if t in _ATOMIC:
        return v
    if t is list:
        return [x if type(x) in _ATOMIC else _own(x) for x in v]
    if t is tuple:
        return v if all(type(x) in _ATOMIC for x in v) else tuple(map(_own, v))
    if t is dict:
        return {k: x if type(x) in _ATOMIC else _own(x) for k, x in v.items()}
    return copy.deepcopy(v)


def _copy(n: Node) -> tuple:
    """(the record of ``n``'s fields, its copy): the copy as Design.detached_copy makes it (rev 0,
    analysis' memo left behind), with props values owned too."""
    rec = n.__dict__.copy()
    if len(rec) - ("_coerced" in rec) != _N_FIELDS:
        rec.update({k: getattr(n, k) for k in _NODE_FIELDS if k not in rec})
    props = rec["props"]
    rec["props"] = {k: v if type(v) in _ATOMIC else _own(v) for k, v in props.items()}
    rec["tied"] = dict(rec["tied"])
    d = {k: rec[k] for k in _NODE_FIELDS}
    d["rev"] = 0
    c = _node_new(Node)
    c.__dict__ = d
    return rec, c


class Snapshots:
    """``take(design)``: a detached copy of ``design`` equal to ``design.detached_copy()``, made
    from the node copies of the previous take for the nodes whose fields are as they were then.
    Each take replaces what is kept in one assignment, so a take on another thread (a cancelled
    worker job still running) leaves it consistent. Block definitions are not copied (as
    detached_copy: the window's snapshot() copies them)."""

    def __init__(self):
        # the last take's node ids, and for each its record and its copy (lists in node order)
        self._kept: tuple = ([], [], [])
        self.reused = 0  # nodes the last take did not copy (for tests and benchmarks)

    def take(self, design: Design) -> Design:
        pids, precs, psnaps = self._kept
        nodes = design.nodes
        ids = list(nodes)
        live = list(nodes.values())
        if ids == pids:  # the same nodes (an edit of some): compared in place, in C
            recs, snaps = precs, psnaps
        else:  # nodes came or went: the records of the ones kept, by id
            at = dict(zip(pids, range(len(pids))))
            idx = list(map(at.get, ids))
            recs = [None if i is None else precs[i] for i in idx]
            snaps = [None if i is None else psnaps[i] for i in idx]
        # (a record holds the node's id: if an edit on the UI thread came between the two lists
        # above, a record meets another node's fields and that node is copied, never mismatched)
        changed = list(compress(count(), map(not_, map(eq, map(_dict_of, live), recs))))
        if changed:
            if recs is precs:
                recs, snaps = list(recs), list(snaps)
            for i in changed:
                recs[i], snaps[i] = _copy(live[i])
        self._kept = (ids, recs, snaps)
        self.reused = len(ids) - len(changed)
        d = Design(design.name, design.channels_last)
        d.settings = copy.deepcopy(design.settings)
        d.param_order = list(design.param_order)
        d.nodes = dict(zip(ids, snaps))
        d.edges = list(design.edges)
        # its nodes are copies nobody edits (later takes share them): an analysis of the next
        # snapshot compares only the nodes that are not the objects it read (model/analysis.py)
        d.__dict__[READ_ONLY_NODES] = True
        return d

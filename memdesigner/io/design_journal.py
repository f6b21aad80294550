"""The autosave's journal: a write-ahead log of a design's changes since its last full autosave.

A full autosave of a big design takes milliseconds to tens of milliseconds and runs when the
event loop gets to it, which a loaded machine delays by hundreds of milliseconds; a kill in that
window lost edits older than the autosave delay. A journal step is one short line (the changed
nodes and edges in the design file's own dicts), appended with one write() as the edit ends, so
a kill -9 at any later moment finds it on disk (the page cache survives the process). Recovery
loads the full autosave and replays the steps in order; a line the kill cut short is the step
that was being written, and is dropped whole (the design as it was before that edit).

``record`` turns one Design notification into journal ops (None: this change cannot be
journalled, write a full autosave); ``meta_op`` is the design's name and flags, which change
without a notification; ``replay`` applies the steps to the full autosave's design."""

from __future__ import annotations

import json

from memdesigner.io.design_file import (
    FORMAT,
    VERSION,
    DesignFileError,
    design_from_dict,
    node_to_dict,
    parse_design_text,
)
from memdesigner.model.design import Design, Edge


def _edge(e: Edge) -> list:
    return [e.src, e.dst, e.src_port, e.dst_port]


def _pos(n) -> list:
    return [n.id, round(float(n.pos[0]), 1), round(float(n.pos[1]), 1)]


def record(design: Design, event: str, payload, removed: set | None = None) -> list[dict] | None:
    """The journal ops for one notification of ``design`` (after the change). ``removed``: the
    ids a ``dels`` op of this journal took out (the caller keeps it per journal); the undo of
    such a delete names them instead of writing each node again (10,000 nodes: ~400 ms)."""
    if event == "node_added":
        last = next(reversed(design.nodes), None) == payload.id  # the common case, without a scan
        at = len(design.nodes) - 1 if last else design.node_index(payload.id)
        return [{"op": "add", "node": node_to_dict(payload), "at": at}]
    if event == "node_changed":
        return [{"op": "set", "node": node_to_dict(payload)}]
    if event == "node_moved":
        return [{"op": "pos", "pos": [_pos(payload)]}]
    if event == "node_removed":
        return [{"op": "del", "id": payload.id}]
    if event == "edge_added":
        edges = design.edges
        at = len(edges) - 1 if edges and edges[-1] == payload else edges.index(payload)
        return [{"op": "edge", "e": _edge(payload), "at": at}]
    if event == "edge_removed":
        return [{"op": "unedge", "e": _edge(payload)}]
    if event == "nodes_moved":
        return [{"op": "pos", "pos": [_pos(n) for n in payload]}]
    if event == "nodes_removed":
        nodes, edges = payload
        if removed is not None:
            removed.update(n.id for n in nodes)
        return [{"op": "dels", "ids": [n.id for n in nodes], "edges": [_edge(e) for e in edges]}]
    if event == "nodes_added":
        nodes, edges = payload
        where = {nid: i for i, nid in enumerate(design.nodes)}
        ewhere = {e: i for i, e in enumerate(design.edges)}
        back = removed is not None and all(n.id in removed for n in nodes)  # the undo of a dels above
        return [{"op": "adds", "nodes": sorted([where[n.id], n.id if back else node_to_dict(n)]
                                               for n in nodes if n.id in where),
                 "edges": sorted([ewhere[e], _edge(e)] for e in edges if e in ewhere)}]
    if event == "reset":
        return [{"op": "reset"}]
    return None  # anything new: only a full autosave holds it


def meta_op(name: str, channels_last: bool, description: str) -> dict:
    """The design's name and flags (set without a notification: the document compares them as
    each edit ends)."""
    return {"op": "meta", "name": name, "channels_last": bool(channels_last), "description": description}


def step_line(ops: list[dict]) -> bytes:
    """One edit's ops as one journal line."""
    return (json.dumps(ops, separators=(",", ":")) + "\n").encode()


def read_steps(data: bytes) -> list[list[dict]]:
    """The complete steps of a journal file; a last line without its newline (cut by a kill) and
    anything after a line that does not parse are dropped."""
    steps = []
    for line in data.split(b"\n")[:-1]:  # the part after the last newline is incomplete
        try:
            ops = parse_design_text(line, "journal")
        except DesignFileError:
            break
        if not isinstance(ops, list):
            break
        steps.append(ops)
    return steps


def _node(nd: dict):
    """A node read with the design file's rules (a bad one raises DesignFileError)."""
    d = design_from_dict({"format": FORMAT, "version": VERSION, "nodes": [nd], "edges": []}, "journal")
    return d.nodes[nd["id"]]


def _apply(design: Design, op: dict, gone: dict) -> None:
    """``gone``: the nodes the replay's ``dels`` ops took out, by id (for an ``adds`` naming them)."""
    kind = op["op"]
    if kind == "add":
        design.insert_node(_node(op["node"]), op["at"])
    elif kind == "set":
        n = _node(op["node"])
        if n.id not in design.nodes:
            raise KeyError(n.id)
        design.nodes[n.id] = n  # in place: the node order stays
    elif kind == "del":
        design.remove_node(op["id"])
    elif kind == "edge":
        design.add_edge(*op["e"], index=op["at"], check_cycle=False)
    elif kind == "unedge":
        design.remove_edge(Edge(*op["e"]))
    elif kind == "pos":
        for nid, x, y in op["pos"]:
            design.nodes[nid].pos = (float(x), float(y))
    elif kind == "dels":
        nodes, _ = design.remove_nodes(op["ids"], [Edge(*e) for e in op["edges"]])
        gone.update((n.id, n) for _, n in nodes)
    elif kind == "adds":
        design.restore_nodes([(i, gone.pop(nd) if isinstance(nd, str) else _node(nd)) for i, nd in op["nodes"]],
                             [(i, Edge(*e)) for i, e in op["edges"]])
    elif kind == "settings":
        design.settings = dict(op["settings"])
    elif kind == "meta":
        name, desc = op["name"], op["description"]
        if not isinstance(name, str) or not isinstance(desc, str):
            raise TypeError("meta")
        design.name, design.channels_last = name, bool(op["channels_last"])
        if desc or getattr(design, "description", ""):
            design.description = desc
    elif kind == "reset":
        design.clear()
    else:
        raise KeyError(kind)


def apply_steps(design: Design, steps: list[list[dict]]) -> None:
    """Apply one journal's steps to ``design`` in place (the autosave's compaction, on the worker:
    its own copy of the design on disk brought up to date)."""
    gone: dict = {}
    for ops in steps:
        for op in ops:
            _apply(design, op, gone)


def replay(base: dict, steps: list[list[dict]], source: str = "autosave") -> Design:
    """The design of the full autosave ``base`` with the journal's steps applied in order. A step
    that does not apply (never expected: a journal only follows its own autosave) ends the replay
    at the step before it."""
    design, gone = design_from_dict(base, source), {}
    for k, ops in enumerate(steps):
        try:
            for op in ops:
                _apply(design, op, gone)
        except (DesignFileError, KeyError, ValueError, TypeError, IndexError):
            design, gone = design_from_dict(base, source), {}
            for done in steps[:k]:
                for op in done:
                    _apply(design, op, gone)
            break
    return design

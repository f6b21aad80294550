"""Blocks on the clipboard: copied instances carry the definitions they use (nested ones too).
Pasting into the same document reuses them (the pasted instance is linked to the others);
pasting into another document adds a copy (renamed if that document has a different definition
of the same name), as one undo step inside the paste."""

from __future__ import annotations

import os

from memdesigner._qt.blocks import block_commands
from memdesigner.io.design_file import FORMAT, VERSION, design_from_dict, design_to_dict
from memdesigner.model.blocks import BLOCK, BlockDef, unique_name
from memdesigner.model.design import Design


def _token(design: Design) -> str:
    return f"{os.getpid()}:{id(design.blocks)}"


def used_definitions(design: Design, ids) -> list[str]:
    """The definitions the nodes ``ids`` use, nested ones first."""
    out: list[str] = []

    def visit(name, stack=()):
        bd = design.blocks.get(name)
        if bd is None or name in out or name in stack:
            return
        for n in bd.graph.nodes.values():
            if n.type == BLOCK:
                visit(n.props.get("definition"), (*stack, name))
        out.append(name)

    for nid in ids:
        n = design.nodes.get(nid)
        if n is not None and n.type == BLOCK:
            visit(n.props.get("definition"))
    return out


def _graph_dict(bd: BlockDef) -> dict:
    g = Design(bd.name, bd.graph.channels_last)
    g.nodes, g.edges = bd.graph.nodes, bd.graph.edges
    d = design_to_dict(g)
    return {"nodes": d["nodes"], "edges": d["edges"]}


def add_to_clip(design: Design, ids, data: dict) -> None:
    names = used_definitions(design, ids)
    if names:
        data["blocks"] = [{"name": n, "stack": design.blocks[n].stack, **_graph_dict(design.blocks[n])}
                          for n in names]
        data["library"] = _token(design)


def paste_definitions(design: Design, stack, data: dict) -> dict:
    """Make the clipboard's definitions available in ``design``'s library; returns the renames
    (clipboard name -> name in this document)."""
    defs = data.get("blocks") or []
    if not defs:
        return {}
    same_doc = data.get("library") == _token(design)
    rename: dict[str, str] = {}
    todo = []
    for bd in defs:
        name = bd["name"]
        have = design.blocks.get(name)
        if have is not None and (same_doc or _graph_dict(have) == {"nodes": bd["nodes"], "edges": bd["edges"]}):
            rename[name] = name  # the same definition: the pasted instance is linked to the others
            continue
        todo.append(bd)
    if not todo:
        return rename

    def run():
        for bd in todo:
            new = unique_name(design, bd["name"])
            rename[bd["name"]] = new
            nodes = [dict(nd, props=dict(nd.get("props", {}), definition=rename.get(
                nd.get("props", {}).get("definition"), nd.get("props", {}).get("definition"))))
                if nd["type"] == BLOCK else nd for nd in bd["nodes"]]
            g = design_from_dict({"format": FORMAT, "version": VERSION, "name": new, "nodes": nodes,
                                  "edges": bd["edges"]}, "clipboard")
            g.blocks = design.blocks
            design.blocks[new] = BlockDef(new, g, bool(bd.get("stack", False)))
        return rename

    block_commands.push(stack, "Paste block definitions", design, run)
    return rename

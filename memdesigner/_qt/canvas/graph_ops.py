"""Multi-node edits (delete a selection, copy, paste, duplicate), each one undo step (a macro)."""

from __future__ import annotations

import json

from PySide6.QtWidgets import QApplication

from memdesigner._qt.blocks import block_clip
from memdesigner._qt.document.commands import AddNodesCmd, RemoveNodesCmd
from memdesigner.model import registry
from memdesigner.model.design import Design
from memdesigner.model.registry import LayerError


def delete(design: Design, stack, node_ids, edges=()) -> None:
    """One undo command, one pass over the design (a 10,000-layer select-all + Delete included)."""
    node_ids = [n for n in node_ids if n in design.nodes]
    ids = set(node_ids)
    if edges:  # (a set of every edge only when some are selected: 12,000 hashes otherwise)
        have = set(design.edges)
        edges = [e for e in edges if e in have and e.src not in ids and e.dst not in ids]
    if not node_ids and not edges:
        return
    n = len(node_ids) + len(edges)
    stack.push(RemoveNodesCmd(design, node_ids, edges, f"Delete {n} item{'s' if n != 1 else ''}"))


def copy_data(design: Design, node_ids) -> dict:
    """The selection in the design file's own format (io/design_file.py: the one serializer of
    save, autosave and the clipboard), with the block definitions its instances use."""
    from memdesigner.io.design_file import design_to_dict

    ids = [n for n in node_ids if n in design.nodes]
    keep = set(ids)
    part = Design(design.name, design.channels_last)
    part.nodes = {i: design.nodes[i] for i in ids}
    part.edges = [e for e in design.edges if e.src in keep and e.dst in keep]
    d = design_to_dict(part)
    data = {"nodes": d["nodes"], "edges": d["edges"]}
    block_clip.add_to_clip(design, ids, data)  # the block definitions the copied instances use
    return data


_CLIP_PREFIX = "memdesigner-nodes:"


def to_clipboard(data: dict) -> None:
    """Plain text with a marker, not a QMimeData: handing PySide's QMimeData to the clipboard
    crashes the interpreter at exit (seen with PySide6 6.11 on the offscreen platform)."""
    QApplication.clipboard().setText(_CLIP_PREFIX + json.dumps(data))


def from_clipboard() -> dict | None:
    from memdesigner.io.design_file import FORMAT, VERSION, DesignFileError, parse_design_text, schema_error

    text = QApplication.clipboard().text()
    if not text.startswith(_CLIP_PREFIX):
        return None
    try:  # the design file's own parser: NaN, absurd nesting and huge integers are refused alike
        data = parse_design_text(text[len(_CLIP_PREFIX):], "clipboard")
    except DesignFileError:
        return None
    if not isinstance(data, dict):
        return None
    # and the file's schema: a paste reads each field as a load does
    graph = {"format": FORMAT, "version": VERSION, "nodes": data.get("nodes"), "edges": data.get("edges", [])}
    return None if schema_error(graph) else data


PASTE_STEP = 40.0


def free_offset(design: Design, positions, step: float = PASTE_STEP) -> tuple[float, float]:
    """The first diagonal offset (step, 2*step, ...) at which no pasted layer lands on an existing
    one, so pasting twice does not stack the second copy exactly on the first."""
    taken = {(round(x), round(y)) for x, y in (n.pos for n in design.nodes.values())}
    k = 1
    while k < 1000 and any((round(x + k * step), round(y + k * step)) in taken for x, y in positions):
        k += 1
    return (k * step, k * step)


def paste(design: Design, stack, data: dict, offset=None) -> list[str]:
    """Add copies with fresh ids and their internal edges; returns the new ids. Every field the
    serializer writes comes along (pasted_fields). Without an offset, the copies go to the first
    free diagonal step from the originals."""
    if not data or not data.get("nodes"):
        return []
    if offset is None:
        offset = free_offset(design, [tuple(nd["pos"]) for nd in data["nodes"]])
    # fresh ids first (new_id's counter only grows: each is distinct): a keep_until or a tie may
    # name a node pasted after it
    mapping = {nd["id"]: design.new_id(registry.get(nd["type"]).name) for nd in data["nodes"]}
    fused = fresh_fused_keys(design, data["nodes"])
    stack.beginMacro(f"Paste {len(data['nodes'])} layer(s)")
    try:
        defs = block_clip.paste_definitions(design, stack, data)
        # the copies are made on a scratch design (no listeners) and added in one step: one
        # notification, one bulk build of their items (a command per layer and per edge re-routed
        # every edge of a layer as each input arrived: 40-80 ms for 100 layers at 1,000)
        part = Design(design.name, design.channels_last)
        part.blocks = design.blocks
        taken = {n.name for n in design.nodes.values()}
        for nd in data["nodes"]:
            props = dict(nd.get("props", {}))
            if nd["type"] == "Block" and props.get("definition") in defs:
                props["definition"] = defs[props["definition"]]
            try:
                props = design_layer_coerce(nd["type"], props)
            except (LayerError, KeyError):
                pass  # keep the raw values: the analysis will flag them on the node
            name = nd.get("name")
            if name and name in taken:
                name = None  # a fresh id-based name avoids two layers with one name
            node = part.add_node(nd["type"], props, id=mapping[nd["id"]], name=name,
                                 pos=(nd["pos"][0] + offset[0], nd["pos"][1] + offset[1]), bits=nd.get("bits"),
                                 **pasted_fields(design, nd, mapping, fused))
            taken.add(node.name)
        for ed in data.get("edges", []):  # internal edges: checked against the copies alone
            src, dst = mapping.get(ed["from"]), mapping.get(ed["to"])
            if src and dst and part.check_edge(src, dst, ed.get("from_port", 0), ed.get("to_port", 0)) is None:
                part.add_edge(src, dst, ed.get("from_port", 0), ed.get("to_port", 0))
        part.blocks = {}
        stack.push(AddNodesCmd(design, list(part.nodes.values()), list(part.edges)))
    finally:
        stack.endMacro()
    return list(mapping.values())


def pasted_fields(design: Design, nd: dict, mapping: dict, fused: dict) -> dict:
    """The node's saved fields (io/design_file.node_fields) with references remapped: a
    ``keep_until`` or ``tied`` target inside the pasted set points at its copy; one outside it is
    kept if that node is in this design (the copy shares the original's embedding, or stays alive
    until the original's reader ran) and dropped otherwise (pasted into another document, or the
    target was deleted). A fused group gets a fresh key when the design already has that group,
    so the copy does not fuse with the original."""
    from memdesigner.io.design_file import node_fields

    f = node_fields(nd)
    ku = f["keep_until"]
    if ku and not ku.startswith("*"):  # "*gc" and the like name no node
        f["keep_until"] = mapping.get(ku) or (ku if ku in design.nodes else "")
    tied = {}
    for p, target in dict(f["tied"] or {}).items():
        nid, _, param = str(target).rpartition(".")
        if nid in mapping:
            tied[p] = f"{mapping[nid]}.{param}"
        elif nid in design.nodes:
            tied[p] = target
    f["tied"] = tied
    f["fused"] = fused.get(f["fused"], f["fused"])
    return f


def fresh_fused_keys(design: Design, nodes) -> dict[str, str]:
    """Pasted fused-group key -> a key no node of ``design`` uses yet (for keys it already uses)."""
    have = {n.fused for n in design.nodes.values() if n.fused}
    out = {}
    for key in dict.fromkeys(nd.get("fused") for nd in nodes if nd.get("fused")):
        if key in have:
            k = 2
            while f"{key}#{k}" in have:
                k += 1
            out[key] = f"{key}#{k}"
            have.add(out[key])
    return out


def design_layer_coerce(type_name: str, props: dict) -> dict:
    return registry.get(type_name).coerce_props(props)

"""How a block instance reads on the canvas (collapsed: ×N, its output shape, its memory per
repetition and in total), and the estimate seen from inside an opened definition. Numbers come
from the report (``Report.blocks`` and the expanded layer rows), never recomputed here."""

from __future__ import annotations

import dataclasses

from memdesigner.model.analysis import analyze
from memdesigner.model.blocks import BLOCK
from memdesigner.model.design import Design
from memdesigner.units import format_bytes, format_count


def _shape_text(shape) -> str:
    return "×".join(map(str, shape))


def totals_from_rows(rows, prefix: str) -> dict:
    """Per repetition (the largest) and in total, for an instance inside an opened definition:
    the report's expanded rows under ``prefix`` ("layers.0.mlp.")."""
    per: dict = {}
    for r in rows:
        if not r.id.startswith(prefix):
            continue
        rest = r.id[len(prefix):]
        head, _, tail = rest.partition(".")
        k = head if head.isdigit() and tail else ""
        acc = per.setdefault(k, {"params": 0, "param_bytes": 0, "activation_bytes": 0, "kept_bytes": 0})
        acc["params"] += r.params
        acc["param_bytes"] += r.param_bytes
        acc["activation_bytes"] += r.activation_bytes
        acc["kept_bytes"] += r.kept_bytes
    if not per:
        return {}
    mem = {k: v["param_bytes"] + v["activation_bytes"] + v["kept_bytes"] for k, v in per.items()}
    one = max(per, key=lambda k: mem[k])
    return {"per_instance": per[one], "memory_per_instance_bytes": mem[one],
            "total": {f: sum(v[f] for v in per.values()) for f in per[one]},
            "memory_total_bytes": sum(mem.values())}


def block_texts(node, info, totals: dict | None, batch: int):
    """(header, shape, params line, memory badge, tooltip) for a Block node."""
    repeat = int(node.props.get("repeat", 1) or 1)
    header = f"{node.props.get('definition', '')} ×{repeat}"
    shape = ""
    if info is not None and info.ok and info.outputs:
        shape = ", ".join(_shape_text([batch, *o.shape]) for o in info.outputs)
    if not totals:
        return header, shape, "", "", ""
    one, total = totals["per_instance"], totals["total"]
    each = totals["memory_per_instance_bytes"]
    shape = f"{shape} · {format_bytes(each)} each" if shape else f"{format_bytes(each)} each"
    params = f"{format_count(total['params'])} params"
    badge = format_bytes(totals["memory_total_bytes"])
    tip = (f"{repeat} repetition(s) of {node.props.get('definition', '')}\n"
           f"each: weights {format_bytes(one['param_bytes'])} · activations {format_bytes(one['activation_bytes'])}"
           f" · kept for backward {format_bytes(one['kept_bytes'])}\n"
           f"total: weights {format_bytes(total['param_bytes'])} · activations "
           f"{format_bytes(total['activation_bytes'])} · kept for backward {format_bytes(total['kept_bytes'])}")
    return header, shape, params, badge, tip


@dataclasses.dataclass
class ShownReport:
    """The parts of a report the canvas reads, for an opened definition: its nodes' rows are the
    expanded rows of the instance it was opened from (the first repetition)."""

    settings: dict
    layers: list
    blocks: dict
    all_rows: list


def shown_result(graph: Design, prefix: str, an, rep):
    """(analysis, report) as the canvas showing ``graph`` needs them; prefix: the expanded-id
    prefix of the opened instance's first repetition ("" at the top level)."""
    if not prefix:
        return an, rep
    shown_an = analyze(graph)
    if rep is None:
        return shown_an, None
    rows = []
    for r in rep.layers:
        if r.id.startswith(prefix):
            inner = r.id[len(prefix):]
            if inner in graph.nodes:
                rows.append(dataclasses.replace(r, id=inner))
    blocks = {}
    for n in graph.nodes.values():
        if n.type == BLOCK:
            t = totals_from_rows(rep.layers, f"{prefix}{n.id}.")
            if t:
                blocks[n.id] = t
    return shown_an, ShownReport(rep.settings, rows, blocks, rep.layers)


def instance_prefix(graph: Design, inst_id: str, design_blocks: dict) -> str:
    """The expanded-id prefix of an instance's first repetition."""
    node = graph.nodes[inst_id]
    bd = design_blocks.get(node.props.get("definition"))
    repeat = int(node.props.get("repeat", 1) or 1)
    if repeat > 1 or (bd is not None and bd.stack):
        return f"{inst_id}.{int(node.props.get('start', 0) or 0)}."
    return f"{inst_id}."


def block_key(design: Design, nid: str, report):
    """What a Block node's texts depend on beyond its analysis (None for other nodes)."""
    node = design.nodes.get(nid)
    if node is None or node.type != BLOCK:
        return None
    blocks = getattr(report, "blocks", None) or {}
    return (node.props.get("definition"), node.props.get("repeat"), repr(blocks.get(nid)))


def block_item_texts(design: Design, nid: str, item, info, report, batch: int):
    """Fill a Block item's header and return (shape, params, memory badge, tooltip)."""
    node = design.nodes[nid]
    totals = (getattr(report, "blocks", None) or {}).get(nid)
    header, shape, params, badge, tip = block_texts(node, info, totals, batch)
    if item.type_name != header:
        item.type_name = header
        item.update()
    bd = design.blocks.get(node.props.get("definition"))
    n_in = len(bd.inputs) if bd is not None else None
    if n_in is not None and item.max_inputs != n_in:  # the definition's ports, not a variadic one
        item.min_inputs = item.max_inputs = n_in
        item._rebuild_ports()
    return shape, params, badge, tip

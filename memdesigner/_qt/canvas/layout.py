"""Automatic layout for designs without useful positions (imports, generated or hand-written
files), two styles: "bands" — layers in columns by longest path from the inputs, ordered to follow
their predecessors, long chains wrapped into bands so a deep network still fits a wide window —
and "top_down" — one row per depth, the network running down the page as Netron draws it.
Pure Python (no Qt): the window computes it on a worker thread."""

from __future__ import annotations

import math

from memdesigner.model.design import Design

DX, DY = 330.0, 130.0
TD_DX, TD_DY = 250.0, 150.0  # top-down: a node is 200 wide and about 90 tall
STYLES = ("bands", "top_down")


def needs_layout(design: Design) -> bool:
    """True when positions are missing or nodes sit on top of each other."""
    if len(design.nodes) < 2:
        return False
    seen = set()
    for n in design.nodes.values():
        key = (round(n.pos[0] / 60), round(n.pos[1] / 40))
        if key in seen:
            return True
        seen.add(key)
    return False


def positions(design: Design, style: str = "bands") -> dict:
    """Node id -> (x, y) in the chosen style."""
    return top_down_positions(design) if style == "top_down" else layered_positions(design)


def _ranks(design: Design):
    """(order, preds, depth, layers): depth = longest path from an input; each layer's nodes
    ordered by the mean place of their predecessors (fewer crossings), inputs in file order."""
    try:
        order = design.topo_order()
    except ValueError:
        order = list(design.nodes)
    at = {n: i for i, n in enumerate(order)}
    preds: dict[str, list] = {n: [] for n in design.nodes}
    for e in design.edges:
        if e.dst in preds and e.src in design.nodes:
            preds[e.dst].append(e.src)
    col: dict[str, int] = {}
    for n in order:
        col[n] = 1 + max((col[p] for p in preds[n] if p in col), default=-1)
    columns: dict[int, list] = {}
    for n in order:
        columns.setdefault(col[n], []).append(n)
    row: dict[str, float] = {}
    for c in sorted(columns):
        nodes = columns[c]
        nodes.sort(key=lambda n: (sum(row[p] for p in preds[n] if p in row) / max(1, len(preds[n])))
                   if preds[n] else at[n])
        k = len(nodes)
        for i, n in enumerate(nodes):
            row[n] = i - (k - 1) / 2
    return order, col, columns, row


def top_down_positions(design: Design) -> dict:
    """Successors below their predecessors: one row per depth, centred on x = 0."""
    order, col, _, row = _ranks(design)
    return {n: (row[n] * TD_DX, col[n] * TD_DY) for n in order}


def layered_positions(design: Design, wrap: bool = True) -> dict:
    order, col, columns, row = _ranks(design)
    n_cols = len(columns)
    height = max((len(v) for v in columns.values()), default=1)
    bands = 1
    if wrap and n_cols > 6:
        bands = max(1, round(math.sqrt(n_cols * DX / (1.8 * (height + 0.6) * DY))))
    per_band = math.ceil(n_cols / bands)
    band_h = (height + 0.8) * DY
    pos = {}
    for n in order:
        c = col[n]
        b, cc = divmod(c, per_band)
        pos[n] = (cc * DX, b * band_h + row[n] * DY)
    return pos

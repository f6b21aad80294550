"""Automatic layout for designs without useful positions (imports, generated or hand-written
files): layers in columns by longest path from the inputs, ordered to follow their predecessors,
and long chains wrapped into bands so a deep network still fits a wide window."""

from __future__ import annotations

import math

from memdesigner.model.design import Design

DX, DY = 330.0, 130.0


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


def layered_positions(design: Design, wrap: bool = True) -> dict:
    try:
        order = design.topo_order()
    except ValueError:
        order = list(design.nodes)
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
                   if preds[n] else order.index(n))
        k = len(nodes)
        for i, n in enumerate(nodes):
            row[n] = i - (k - 1) / 2
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

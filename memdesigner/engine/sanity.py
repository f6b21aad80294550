"""Sizes no real machine has: a peak of 1 EiB or more means a typo in some size (out_features
10**300, batch 10**200), so the estimate says so loudly, naming the node that is biggest."""

from __future__ import annotations

from memdesigner.units import EiB, format_bytes

ABSURD_BYTES = EiB


def absurd_size_warning(peak: int, rows: dict, names: dict) -> str | None:
    """One line when the peak reaches 1 EiB: which node holds the most bytes (weights or output).
    rows: node id -> the simulation's row (param_bytes, activation_bytes); names: id -> display name."""
    if peak < ABSURD_BYTES:
        return None
    nid = max(rows, key=lambda n: max(rows[n].get("param_bytes", 0), rows[n].get("activation_bytes", 0)),
              default=None)
    who = ""
    if nid is not None:
        r = rows[nid]
        who = (f": check the sizes of node {names.get(nid, nid)} (weights {format_bytes(r.get('param_bytes', 0))}, "
               f"output {format_bytes(r.get('activation_bytes', 0))})")
    return f"peak {format_bytes(peak, 2)} exceeds 1 EiB, more than any machine has{who}"

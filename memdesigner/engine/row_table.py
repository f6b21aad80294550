"""The per-layer rows of one simulated step, kept compact while the step runs.

Each op of the run's order gets two entries, in order: its parameter row (params, bytes of
weights and buffers, made by engine/param_state.py and shared by every run with the same
parameters: read, never written) and what its forward made (the compiled rule, whose
``new_bytes`` and ``kept`` are the activation and kept bytes, or that pair as a tuple where
the op's forward differs from its rule: fused, hidden or late outputs). A 10,000-op step
used to copy and update one dict per op (3 MB that most estimates never read); the dicts
are now built when someone reads ``Simulation.rows``, and the report's layer rows read the
entries directly."""

from __future__ import annotations


class RowTable:
    """Per op of ``order``: ``base[i]`` (its parameter row) and ``ops[i]`` (its forward's
    CompiledRule or (activation bytes, kept bytes)); ``recompute``: node -> the bytes
    activation checkpointing makes again in backward."""

    __slots__ = ("order", "base", "ops", "recompute")

    def __init__(self, order: list):
        self.order = order
        self.base: list[dict] | tuple = []  # (a tuple when kept for the next run: engine/param_state.py)
        self.ops: list = []
        self.recompute: dict[str, int] = {}

    def entries(self):
        """(node, parameter row, activation bytes, kept bytes) per op that ran, in order."""
        for nid, base, o in zip(self.order, self.base, self.ops):
            if o.__class__ is tuple:
                yield nid, base, o[0], o[1]
            else:
                yield nid, base, o.new_bytes, o.kept

    def as_dict(self) -> dict[str, dict]:
        """node -> its row as one dict (the parameter row's keys, its activation and kept bytes,
        and ``recompute`` under checkpointing)."""
        out = {}
        recompute = self.recompute
        for nid, base, act, kept in self.entries():
            row = base.copy()
            row["activation_bytes"] = act
            row["kept_bytes"] = kept
            if nid in recompute:
                row["recompute"] = recompute[nid]
            out[nid] = row
        return out

"""A small helper the config builders share: adds nodes named by their module paths, wires
their inputs, and folds repeated layers into a block when blocks exist."""

from __future__ import annotations

from memdesigner.model import registry
from memdesigner.model.design import Design


class HfConfigError(ValueError):
    """A config value the builders cannot use; the message names the field."""


class Builder:
    def __init__(self, name: str, seq_len: int):
        self.design = Design(name)
        self.seq_len = seq_len

    @staticmethod
    def has(type_name: str) -> bool:
        return registry.has(type_name)

    def add(self, name: str, type_name: str, props: dict, inputs: list, *, scope: str = "", n_out: int = 1,
            tied: dict | None = None, keep_until: str = "") -> str:
        """Add node ``name`` (also its id) fed by ``inputs`` (node ids or (id, port) pairs)."""
        d = self.design
        d.add_node(type_name, props, id=name, name=name, scope=scope, tied=tied, keep_until=keep_until)
        for port, src in enumerate(inputs):
            sid, sport = src if isinstance(src, tuple) else (src, 0)
            d.add_edge(sid, name, sport, port, check_cycle=False)
        return name

    def finish(self) -> Design:
        return self.design

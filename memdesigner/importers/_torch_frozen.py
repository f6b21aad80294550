"""Parameters the module itself froze (``p.requires_grad = False``): a transfer-learning backbone,
Hugging Face's sinusoidal position tables (``nn.Embedding(..., _freeze=True)`` in Marian, Pegasus,
Speech2Text). Their node becomes untrainable (Node.trainable), so the design keeps neither a
gradient nor optimizer state for them, as autograd and the optimizer do not."""

from __future__ import annotations


def mark_frozen(design, module, gm, param_owner: dict, warnings: list) -> list[str]:
    """Set ``trainable = False`` on every node whose parameters (``param_owner``: id(Parameter) ->
    "node_id.param", the importer's record of who holds which tensor) all have requires_grad=False.
    A node with both kinds stays trainable, with a warning. Returns the frozen node ids."""
    tensors = {id(p): p for m in (module, gm) if m is not None
               for _, p in m.named_parameters(remove_duplicate=False)}
    flags: dict[str, list[bool]] = {}
    for tid, owner in param_owner.items():
        t = tensors.get(tid)
        nid = owner.rsplit(".", 1)[0]
        if t is not None and nid in design.nodes:
            flags.setdefault(nid, []).append(bool(t.requires_grad))
    frozen = []
    for nid, fl in flags.items():
        if not any(fl):
            design.set_trainable(nid, False)  # bumps rev: an analysis cached during the import is stale
            frozen.append(nid)
        elif not all(fl):
            warnings.append(f"{nid}: some of its parameters have requires_grad=False; the design trains all of them")
    return frozen

"""The module's parameter order, for the engine's per-parameter optimizer loop
(engine/param_order.py): ``model.parameters()`` lists the module tree depth first in
registration order, which may differ from the order the forward uses the modules in."""

from __future__ import annotations


def param_order(module, param_owner: dict, nodes: dict) -> list[str]:
    """"node name.param" of every parameter the design counts, in ``module.named_parameters()``
    order (a shared tensor once, at its first registration). param_owner: id(tensor) ->
    "node_id.param" of the design node that counts it."""
    out = []
    for _, t in module.named_parameters():
        owner = param_owner.get(id(t))
        if owner is None:
            continue
        cut = next((i for i, c in enumerate(owner) if c == "." and owner[:i] in nodes), -1)
        if cut > 0:  # node ids may hold dots, parameter names do ("out_proj.weight")
            out.append(f"{nodes[owner[:cut]].name}.{owner[cut + 1:]}")
    return out

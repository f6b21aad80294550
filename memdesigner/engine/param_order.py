"""The order a per-parameter optimizer loop visits the trainable tensors in.

``torch.optim.Adam(model.parameters())`` on the CPU (and MPS) runs ``_single_tensor_adam``: one
parameter after another, in the param group's order, which is ``model.parameters()``'s order:
the module tree depth first, in registration (``__init__``) order, each module's own
parameters before its children's, a shared tensor at its first registration
(``nn.Module.named_parameters``, ``remove_duplicate=True``). Each parameter makes
``exp_avg_sq.sqrt()`` and the division that becomes ``denom``; the previous parameter's
``denom`` is freed only when the name is rebound, so the step's peak is the largest
``2 * |p_i| + |p_(i-1)|`` and depends on which parameters are neighbours in that order.

Registration order is not execution order (``self.tgt_emb`` defined before ``self.encoder``
but used after it). The PyTorch importer records it as ``Design.param_order`` ("node name.param"
keys, names survive block folding); a design without it (drawn by hand) is registered in
execution order, as ``memdesigner export torch`` writes it. ZeroRedundancyOptimizer's local
optimizer holds its shard sorted by size (``owned``, engine/distributed.py), kept as it is.
"""

from __future__ import annotations


def loop_order(design, trainable: list, shapes: list, pnames: list, owned=None) -> list[tuple]:
    """(node id, bytes, numel, shape) of the tensors this rank's for-loop optimizer visits, in
    its order. trainable/shapes/pnames are parallel lists in execution order."""
    if owned is not None:
        idx = list(owned)
    else:
        idx = list(range(len(trainable)))
        keys = getattr(design, "param_order", None)
        if keys:
            rank: dict[str, int] = {}
            for i, k in enumerate(keys):
                rank.setdefault(k, i)
            n = len(keys)
            nodes = design.nodes
            idx.sort(key=lambda i: rank.get(f"{nodes[trainable[i][0]].name}.{pnames[i]}", n + i))
    return [(*trainable[i], shapes[i]) for i in idx]

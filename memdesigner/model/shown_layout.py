"""Shapes in the order the model's own framework shows them.

The engine's rules are channels-first, as PyTorch's; a design imported from Keras keeps its
tensors channels-first inside (``Design.channels_last`` says it came from a channels-last model).
What the user reads (the layer table, the CLI, ``--json``, the canvas) is Keras's order: a Conv2D
output (16, 1489, 255) inside is shown (1489, 255, 16), as ``model.summary()`` prints it.
"""

from __future__ import annotations


def moved(design, nid: str, rank: int) -> bool:
    """Whether node ``nid``'s output (``rank`` dimensions per sample) is shown channels last."""
    node = design.nodes.get(nid)
    how = getattr(node, "layout", "") if node is not None else ""
    if how == "moved":
        return rank >= 2
    if how == "as_is":
        return False
    return bool(getattr(design, "channels_last", False)) and rank >= 3


def shown_shape(design, nid: str, shape) -> tuple:
    """A per-sample shape (no batch) of ``nid``'s output in the framework's order."""
    shape = tuple(shape)
    if moved(design, nid, len(shape)):
        return shape[1:] + shape[:1]
    return shape


__all__ = ["moved", "shown_shape"]

"""Module outputs the design has no port for but that Python still holds.

``a, _ = self.attn(x, x, x)`` (as PyTorch's own docs write it) binds nn.MultiheadAttention's
head-averaged weights, a (B, L, S) tensor, to ``_``: eager PyTorch keeps it until the name is
rebound or ``forward`` returns, though nothing reads it. The MultiHeadAttention layer counts those
weights only while it runs, so such an element becomes a node of its own beside the call's first
output (an edge from it, for the order and the picture: it reads nothing): a new tensor of the
traced shape that saves nothing and gets no gradient, whose lifetime the Python binding sets
(_torch_locals._python_locals). One no name binds is dropped again (drop_unbound)."""

from __future__ import annotations

from memdesigner.model.design import HELD


def held_element(st, fxn, first, index: int, tmeta, batch: int, single):
    """A node for element ``index`` of a module call's tuple result (``fxn`` is the getitem), or
    None when it is no floating-point tensor with a batch dimension."""
    if tmeta is None:
        return None
    shape, dtype = tmeta
    if len(shape) < 2 or shape[0] != batch or not dtype.is_floating_point:
        return None
    call = fxn.args[0]
    what = f"{call.target} output {index}"
    props = {"op": what + HELD, "out_shape": tuple(shape[1:]), "dtype": "float",
             "saves_input": False, "traced": True}
    v = single(st, fxn, "Generic", props, [first] if first is not None else [], name=f"{call.target}.output{index}")
    st.held[v.nid] = index
    return v


def drop_unbound(st) -> None:
    """A held element that no Python name keeps and nothing reads (an unpacking the source lines
    did not show) is removed: it would otherwise look like a model output."""
    design = st.design
    read = {e.src for e in design.edges}
    for nid in list(st.held):
        node = design.nodes.get(nid)
        if node is not None and not node.keep_until and nid not in read:
            design.remove_node(nid)
            del st.held[nid]

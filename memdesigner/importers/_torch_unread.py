"""Parameters the recorded forward never read (Longformer's global-attention projections when no
token is global, a pooler a task head skips, the vision tower of a multimodal model run on text
alone). PyTorch still holds their weights; they get no
gradient, so the optimizer keeps no state for them either. The dispatch trace knows for sure
which tensors the forward read (every one it read is a get_attr node or inside a leaf module),
so the rest become one frozen Generic node that carries their weights alone; an fx or export
graph names every parameter it reads as a get_attr node or inside a leaf module just as well."""

from __future__ import annotations


def add_unread_params(st, gm) -> None:
    read = {str(n.target) for n in gm.graph.nodes if n.op == "get_attr"}
    leaves = [str(n.target) + "." for n in gm.graph.nodes if n.op == "call_module"]
    unread = [(name, p) for name, p in st.module.named_parameters()
              if name not in st.used_params and name not in read and not name.startswith(tuple(leaves))]
    if not unread:
        return
    numel = sum(p.numel() for _, p in unread)
    nid = "unread_parameters"
    st.design.add_node("Generic", {"op": "unread parameters", "out_shape": (1,), "traced": True, "batch_free": True,
                                   "out_elems": 0, "saves_input": False, "params": int(numel)},
                       id=nid, name=nid, trainable=False)
    st.used_params.update(name for name, _ in unread)
    names = ", ".join(name for name, _ in unread[:6]) + ("..." if len(unread) > 6 else "")
    st.warnings.append(f"{nid}: {numel:,} parameters the forward never read ({names}): their weights count, "
                       "without gradients or optimizer state")

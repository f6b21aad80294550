"""Parameters the recorded forward never read (Longformer's global-attention projections when no
token is global, a pooler a task head skips, the vision tower of a multimodal model run on text
alone). PyTorch still holds their weights; they get no
gradient, so the optimizer keeps no state for them either. The dispatch trace knows for sure
which tensors the forward read (every one it read is a get_attr node or inside a leaf module),
so the rest become one frozen Generic node that carries their weights alone; an fx or export
graph names every parameter it reads as a get_attr node or inside a leaf module just as well."""

from __future__ import annotations


def add_unread_params(st, gm) -> None:
    # (an exported program's module has a get_attr for every parameter, read or not: only those used count)
    read = {str(n.target) for n in gm.graph.nodes if n.op == "get_attr" and n.users}
    leaves = [str(n.target) + "." for n in gm.graph.nodes if n.op == "call_module"]
    names: dict = {}  # a tied parameter (nanoGPT's wte/lm_head) is read when any of its names is
    for name, p in st.module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), (p, []))[1].append(name)
    unread = [(ns[0], p) for p, ns in names.values()
              if not any(n in st.used_params or n in read or n.startswith(tuple(leaves)) for n in ns)]
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

"""A fused nn.TransformerEncoderLayer group (Node.fused: eval + no_grad runs the whole layer as
aten._transformer_encoder_layer_fwd) exported as that module again, not as its eleven layers:
written op by op, the exported network would run the layers one by one in inference and use
other memory than the design says.

The importer (_torch_map_modules._map_transformer_encoder) lays a layer out as
    norm_first:     LayerNorm, MHA, Dropout, Add, LayerNorm, Linear, act, Dropout, Linear, Dropout, Add
    norm_first off: MHA, Dropout, Add, LayerNorm, Linear, act, Dropout, Linear, Dropout, Add, LayerNorm
and a group that is not exactly that (an edited design) is exported layer by layer.
"""

from __future__ import annotations

from dataclasses import dataclass

_FIRST = ("LayerNorm", "MultiHeadAttention", "Dropout", "Add", "LayerNorm", "Linear", "act", "Dropout", "Linear",
          "Dropout", "Add")
_POST = ("MultiHeadAttention", "Dropout", "Add", "LayerNorm", "Linear", "act", "Dropout", "Linear", "Dropout", "Add",
         "LayerNorm")


@dataclass
class Group:
    members: list  # node ids in order
    ctor: str  # nn.TransformerEncoderLayer(...) source
    src: tuple  # (node id, port) feeding the layer


def find(design, order, ins, lit) -> dict:
    """{first member id: Group} for each fused group that matches a TransformerEncoderLayer."""
    nodes = design.nodes
    groups: dict = {}
    for nid in order:
        if nodes[nid].fused:
            groups.setdefault(nodes[nid].fused, []).append(nid)
    out = {}
    for members in groups.values():
        g = _match(design, members, ins, lit)
        if g is not None:
            out[members[0]] = g
    return out


def _match(design, members, ins, lit):
    nodes = design.nodes
    types = tuple("act" if nodes[m].type in ("GELU", "ReLU") else nodes[m].type for m in members)
    if types not in (_FIRST, _POST):
        return None
    norm_first = types == _FIRST
    inside = set(members)
    # the chain: each member reads the previous one; the two adds also read the residual
    for k, m in enumerate(members[1:], 1):
        srcs = [e.src for e in ins[m]]
        if not srcs or srcs[-1 if nodes[m].type == "Add" else 0] != members[k - 1]:
            return None
    ext = {(e.src, e.src_port) for m in members for e in ins[m] if e.src not in inside}
    if len(ext) != 1:
        return None
    last = members[-1]
    for e in design.edges:  # only the layer's output leaves it
        if e.src in inside and e.src != last and e.dst not in inside:
            return None
    if any(nodes[m].output for m in members[:-1]):
        return None
    by_type: dict = {}
    for m in members:
        by_type.setdefault(types[members.index(m)], []).append(nodes[m].props)
    mha = by_type["MultiHeadAttention"][0]
    norms, lins, drops = by_type["LayerNorm"], by_type["Linear"], by_type["Dropout"]
    ps = {float(d["p"]) for d in drops} | {float(mha["dropout"])}
    eps = {float(n["eps"]) for n in norms}
    bias = {bool(mha["bias"])} | {bool(li["bias"]) for li in lins}
    act = nodes[members[types.index("act")]]
    if len(ps) != 1 or len(eps) != 1 or len(bias) != 1 or mha.get("need_weights") \
            or any(d.get("inplace") for d in drops) or any(not n.get("elementwise_affine", True) for n in norms) \
            or any(tuple(n.get("normalized_shape") or ()) for n in norms) \
            or (act.type == "GELU" and act.props.get("approximate", "none") != "none") \
            or (act.type == "ReLU" and act.props.get("inplace")):
        return None
    return Group(list(members), f"nhead={lit(int(mha['num_heads']))}, dim_feedforward={lit(int(lins[0]['out_features']))}, "
                                f"dropout={lit(ps.pop())}, activation={lit(act.type.lower())}, "
                                f"layer_norm_eps={lit(eps.pop())}, batch_first=True, norm_first={norm_first}, "
                                f"bias={bias.pop()}", next(iter(ext)))

"""Mapping traced module calls (nn.Conv2d, nn.LSTM, nn.MultiheadAttention, nn.TransformerEncoder,
registrations that map a module whole, ...) onto registry layers."""

from __future__ import annotations

from memdesigner.importers import _torch_loss
from memdesigner.importers._torch_map_ops import _map_flatten, _map_upsample, map_registered
from memdesigner.importers._torch_nodes import _add, _arg, _flat_vals, _generic, _single, _v
from memdesigner.importers._torch_trace import _tmeta, _whole_modules
from memdesigner.importers._torch_values import Multi, Other, Val, _State
from memdesigner.importers._torch_weight_norm import module_props
from memdesigner.model import registry
from memdesigner.model.torchmap import TorchCall


def _with_weight_norm(lt, mod):
    """The type's module rule, plus the module's weight_norm (a parametrization or the older
    pre-hook: importers/_torch_weight_norm.py) where the type models it (Linear, convolutions)."""
    rule = lt.from_torch_module
    if not any(p.name == "weight_norm" for p in lt.props):
        return rule

    def with_norm(call):
        props = rule(call)
        return None if props is None else {**props, **module_props(mod)}
    return with_norm


def _map_module(st: _State, fxn, mod):
    torch = st.torch
    nn = torch.nn
    cls = type(mod).__name__
    x = _v(st, fxn.args[0]) if fxn.args else _v(st, next(iter(fxn.kwargs.values()), None))
    path = str(fxn.target)
    if not isinstance(x, Val):  # fed by a parameter (latents.expand(...)): its own parameters still count
        return _module_generic(st, fxn, mod, cls, path)

    def own():
        for pn, _ in mod.named_parameters():
            st.used_params.add(f"{path}.{pn}")

    if isinstance(mod, nn.Identity):
        return x
    whole = _whole_modules().get(cls)
    if whole is not None:
        props = whole.from_torch(mod)
        if props is not None:
            own()
            return _single(st, fxn, whole.name, props, [x])
    lt = registry.torch_module_index().get(cls)
    if lt is not None:  # a type whose own file maps the module (Linear, Conv2d, norms, activations, ...)
        call = TorchCall(cls, fxn.op, (x,) + tuple(fxn.args[1:]), dict(fxn.kwargs), module=mod,
                         ddim=lambda d: x.ddim(d, len(x.dmap)), where=path, warnings=st.warnings)
        out = map_registered(st, fxn, lt, call, x, _with_weight_norm(lt, mod), claim=own)
        if out is not None:
            return out
    if type(mod) is nn.Flatten:
        return _map_flatten(st, fxn, x, mod.start_dim, mod.end_dim, len(x.dmap))
    if type(mod) is nn.Upsample:
        return _map_upsample(st, fxn, x, mod.scale_factor, mod.mode)
    if type(mod) is nn.GRUCell:
        ins = [x]
        h0 = _v(st, fxn.args[1]) if len(fxn.args) > 1 else _v(st, fxn.kwargs.get("hx"))
        if isinstance(h0, Val):
            ins.append(h0)
        own()
        return _single(st, fxn, "GRUCell", {"hidden_size": mod.hidden_size, "bias": mod.bias}, ins, x.dmap)
    if type(mod) in (nn.LSTM, nn.GRU):
        if not mod.batch_first:
            st.warnings.append(f"{path}: batch_first=False; imported as batch first (same memory, "
                               "the sequence must be dim 1 of the design's input)")
        if getattr(mod, "proj_size", 0):
            return _generic(st, fxn, cls, [x], "proj_size")
        if len(fxn.args) > 1 and fxn.args[1] is not None:
            st.warnings.append(f"{path}: the initial state argument is ignored")
        own()
        nid, specs = _add(st, fxn, cls, {"hidden_size": mod.hidden_size, "num_layers": mod.num_layers,
                                         "bias": mod.bias, "bidirectional": mod.bidirectional,
                                         "dropout": float(mod.dropout), "return_sequences": True}, [x])
        v = Val(nid, 0, specs[0], tuple(range(len(specs[0].shape) + 1)))
        # h_n is (layers * directions, B, H): the design keeps the batch first, real dim 1 -> 0
        h_n = Val(nid, 1, specs[1], (1, 0, 2))
        return Multi([v, Multi([h_n, Other()]) if cls == "LSTM" else h_n])
    if type(mod) in (nn.TransformerEncoder, nn.TransformerEncoderLayer):
        out = _map_transformer_encoder(st, fxn, mod, path, x)
        if out is not None:
            own()
            return out
    if type(mod) is nn.MultiheadAttention:
        return _map_mha(st, fxn, mod, path, own)
    if cls in _torch_loss.KINDS and type(mod).__module__.startswith("torch.nn."):
        y = _v(st, fxn.args[1]) if len(fxn.args) > 1 else _v(st, fxn.kwargs.get("target"))
        v = _torch_loss.map_loss(st, fxn, cls, x, y, _torch_loss.options_of_module(mod), _single)
        if v is not None:
            return v
    return _module_generic(st, fxn, mod, cls, path)


def _module_generic(st, fxn, mod, cls, path):
    """An unmapped module still brings its parameters (as one block on the Generic node)."""
    n_params = sum(p.numel() for p in mod.parameters())  # frozen ones too (_torch_frozen marks the node)
    if path in st.generic_owner:  # the same module called again: its parameters are counted once
        n_params = 0
    why = f"its {n_params:,} parameters are counted as one block" if n_params else ""
    out = _generic(st, fxn, cls, _flat_vals(st, (fxn.args, fxn.kwargs)), why, params=n_params)
    if n_params and not isinstance(out, Other):
        st.generic_owner[path] = out.nid
        for pn, p in mod.named_parameters():
            st.used_params.add(f"{path}.{pn}")
            st.param_owner.setdefault(id(p), f"{out.nid}.weight")
    return out


def _map_mha(st, fxn, mod, path, own):
    q = _v(st, _arg(fxn, 0, "query"))
    k = _v(st, _arg(fxn, 1, "key"))
    v = _v(st, _arg(fxn, 2, "value"))
    same = q is k is v or (isinstance(q, Val) and isinstance(k, Val) and isinstance(v, Val)
                           and (q.nid, q.port) == (k.nid, k.port) == (v.nid, v.port))
    # batch_first=False (the default) takes the real (L, B, E): the design's (B, L, E) transposed
    seq = (1, 0, 2)
    if (not same or _arg(fxn, 4, "need_weights", True) is None
            or (not mod.batch_first and not (isinstance(q, Val) and q.dmap == seq))):
        out = _module_generic(st, fxn, mod, "MultiheadAttention", path)
        return out
    if mod.bias_k is not None or not mod._qkv_same_embed_dim:
        return _module_generic(st, fxn, mod, "MultiheadAttention", path)
    kpm = _v(st, _arg(fxn, 3, "key_padding_mask"))
    # a (B, S) key_padding_mask is the layer's second input
    kpm = kpm if isinstance(kpm, Val) and kpm.dmap == (0, 1) and kpm.spec.shape == q.spec.shape[:1] else None
    if (_arg(fxn, 3, "key_padding_mask") is not None and kpm is None) or _arg(fxn, 5, "attn_mask") is not None:
        st.warnings.append(f"{path}: attention masks are not modelled")
    own()
    need = bool(_arg(fxn, 4, "need_weights", True))
    am = _arg(fxn, 5, "attn_mask")
    am_meta = _tmeta(am) if hasattr(am, "meta") else None
    # need_weights=False takes scaled_dot_product_attention (no L x L matrix kept)
    out = _single(st, fxn, "MultiHeadAttention", {"num_heads": mod.num_heads, "dropout": float(mod.dropout),
                                                  "bias": mod.in_proj_bias is not None,
                                                  "kernel": "math" if need else "fused",
                                                  "need_weights": need, "batch_first": bool(mod.batch_first),
                                                  "float_mask": bool(am_meta and am_meta[1].is_floating_point),
                                                  "bool_mask": bool(am_meta and am_meta[1] == st.torch.bool
                                                                    and len(am_meta[0]) == 2)},
                  [q] + ([kpm] if kpm else []), q.dmap)
    return Multi([out, Other()])


def _map_transformer_encoder(st, fxn, mod, path, x):
    """nn.TransformerEncoder / EncoderLayer (either batch_first) as the layers their forward runs:
    self-attention through scaled_dot_product_attention (need_weights=False), dropouts, residual
    adds, layer norms (before or after, per norm_first) and the feed-forward block."""
    nn = st.torch.nn
    F = st.torch.nn.functional
    if isinstance(mod, nn.TransformerEncoder):
        layers, final = list(mod.layers), mod.norm
    else:
        layers, final = [mod], None
    # batch_first=False (the default) runs the same ops on the real (L, B, E)
    firsts = {bool(lay.self_attn.batch_first) for lay in layers}
    if len(firsts) != 1 or x.dmap != ((0, 1, 2) if firsts == {True} else (1, 0, 2)):
        return None
    if _arg(fxn, 1, "mask") is not None or _arg(fxn, 2, "src_key_padding_mask") is not None:
        st.warnings.append(f"{path}: attention masks are not modelled")

    def add(t, props, ins, name):
        return _single(st, fxn, t, props, ins, x.dmap, name=name)

    for i, lay in enumerate(layers):
        pre = f"{path}.layers.{i}" if isinstance(mod, nn.TransformerEncoder) else path
        act = lay.activation
        act_t = "GELU" if (act is F.gelu or isinstance(act, nn.GELU)) else "ReLU"
        sa = lay.self_attn
        mha = {"num_heads": sa.num_heads, "dropout": float(sa.dropout), "bias": sa.in_proj_bias is not None,
               "kernel": "fused", "need_weights": False, "batch_first": bool(sa.batch_first)}

        def hold(arg, until):
            # _sa_block(x) / _ff_block(x) are method calls: their argument lives until they return
            node = st.design.nodes[arg.nid]
            if not node.keep_until:
                node.keep_until = until.nid
            return until

        def sa_block(h, pre=pre, lay=lay, mha=mha):
            a = add("MultiHeadAttention", mha, [h], f"{pre}.self_attn")
            return hold(h, add("Dropout", {"p": float(lay.dropout1.p)}, [a], f"{pre}.dropout1"))

        def ff_block(h, pre=pre, lay=lay, act_t=act_t):
            f = add("Linear", {"out_features": lay.linear1.out_features, "bias": lay.linear1.bias is not None},
                    [h], f"{pre}.linear1")
            f = add(act_t, {}, [f], f"{pre}.activation")
            f = add("Dropout", {"p": float(lay.dropout.p)}, [f], f"{pre}.dropout")
            f = add("Linear", {"out_features": lay.linear2.out_features, "bias": lay.linear2.bias is not None},
                    [f], f"{pre}.linear2")
            return hold(h, add("Dropout", {"p": float(lay.dropout2.p)}, [f], f"{pre}.dropout2"))

        def norm(h, which, pre=pre, lay=lay):
            ln = getattr(lay, which)
            return add("LayerNorm", {"eps": float(ln.eps), "elementwise_affine": ln.elementwise_affine},
                       [h], f"{pre}.{which}")

        before = set(st.design.nodes)
        if lay.norm_first:
            x = add("Add", {}, [x, sa_block(norm(x, "norm1"))], f"{pre}.add")
            x1 = x
            x = add("Add", {}, [x, ff_block(norm(x, "norm2"))], f"{pre}.add_1")
            st.design.nodes[x1.nid].keep_until = x.nid  # the layer's local x, rebound by the last add
        else:
            x = norm(add("Add", {}, [x, sa_block(x)], f"{pre}.add"), "norm1")
            x = norm(add("Add", {}, [x, ff_block(x)], f"{pre}.add_1"), "norm2")
        # eval + no_grad runs the whole layer as aten._transformer_encoder_layer_fwd when PyTorch's
        # fast-path conditions hold (an odd head count, an unusual activation or unequal eps do not)
        fast = (sa.batch_first and sa.in_proj_bias is not None and sa._qkv_same_embed_dim and sa.num_heads % 2 == 0
                and (act is F.relu or act is F.gelu or isinstance(act, (nn.ReLU, nn.GELU)))
                and lay.norm1.eps == lay.norm2.eps)
        for nid in set(st.design.nodes) - before:
            node = st.design.nodes[nid]
            if pre != path:  # each layer is a module call of its own: it holds its input until it returns
                node.scope = f"{node.scope}/{pre}" if node.scope else pre
            if fast:
                node.fused = pre
    if final is not None:
        x = add("LayerNorm", {"eps": float(final.eps), "elementwise_affine": final.elementwise_affine}, [x],
                f"{path}.norm")
    return x

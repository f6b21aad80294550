"""Mapping traced functions and tensor methods (torch.relu, x.view, a + b, x[i], F.linear, ...)
onto registry layers; module calls go to _torch_map_modules."""

from __future__ import annotations

import operator

from memdesigner.importers import _torch_loss
from memdesigner.importers._torch_casts import cast_back, literal_upcast, loss_upcast, return_uncast
from memdesigner.importers._torch_held import held_element
from memdesigner.importers._torch_nodes import (
    _add,
    _arg,
    _augmented,
    _call_chain,
    _claim,
    _drop_dim,
    _flat_vals,
    _generic,
    _op_name,
    _pair,
    _pname,
    _real_rank,
    _same,
    _single,
    _tensor_of,
    _v,
)
from memdesigner.importers._torch_trace import _tmeta
from memdesigner.importers._torch_values import META_BATCH, Multi, Other, ParamVal, Val, _State
from memdesigner.importers._torch_weight_norm import claim_g, param_linear, props_of, weight_normed
from memdesigner.model import registry
from memdesigner.model.registry import LayerError
from memdesigner.model.torchmap import PASS, TorchCall

_PASSTHROUGH_METHODS = {"detach"}  # treated as a view, with a warning (see _map)


def map_call(st: _State, gm, fxn):
    """A call_function / call_method node (a call_module goes to _torch_map_modules, which uses
    the functions here for the modules it maps through them: torch_map.map_node dispatches)."""
    name = _op_name(fxn)
    args = [_v(st, a) for a in fxn.args]
    x = args[0] if args else None

    # non-tensor plumbing -------------------------------------------------------------------
    if fxn.op == "call_function" and fxn.target is getattr:
        return Other()
    if name in ("size", "dim", "numel") or (fxn.op == "call_function" and _tmeta(fxn) is None
                                            and fxn.target is not operator.getitem
                                            and not any(isinstance(a, (Val, Multi, ParamVal))
                                                        for a in _flat_vals(st, (fxn.args, fxn.kwargs)))):
        return Other()
    if fxn.target is operator.getitem:
        return _map_getitem(st, fxn, x, fxn.args[1])

    # parameters reached by get_attr ---------------------------------------------------------
    if isinstance(x, ParamVal) and name in ("expand", "expand_as", "repeat", "to", "type_as"):
        return ParamVal(x.name, x.shape, True)
    flat = _flat_vals(st, (fxn.args, fxn.kwargs))
    normed = weight_normed(st, fxn, name, args)
    if normed is not None:
        return normed
    if isinstance(x, ParamVal) and not any(isinstance(v, Val) for v in flat) and _tmeta(fxn) is not None \
            and name not in ("embedding", "cat", "concat", "concatenate"):
        # computed from a parameter alone (weight.float(), 1 + weight, weight.t()): still that
        # parameter for the ops that read it (its small copy is not counted)
        return ParamVal(x.name, _tmeta(fxn)[0], True)
    tms = fxn.meta.get("tensor_meta")
    if isinstance(x, ParamVal) and not any(isinstance(v, Val) for v in flat) and isinstance(tms, (tuple, list)) \
            and tms and all(hasattr(m, "shape") for m in tms):
        # a parameter split in parts (nn.MultiheadAttention's in_proj_weight into q and kv rows in
        # cross-attention, traced as aten ops): each part is still that parameter
        return Multi([ParamVal(x.name, tuple(int(d) for d in m.shape), True) for m in tms])

    # element-wise merges --------------------------------------------------------------------
    if name in ("add", "iadd", "add_", "__add__", "__iadd__", "__radd__"):
        return _map_add(st, fxn, args, inplace=name in ("iadd", "add_", "__iadd__") or _augmented(fxn, "+="))
    if name in ("mul", "mul_", "__mul__", "__rmul__", "multiply"):
        return _map_mul(st, fxn, args, div=False)
    if name in ("truediv", "div", "div_", "__truediv__"):
        return _map_mul(st, fxn, args, div=True)
    if name in ("matmul", "bmm", "__matmul__"):
        return _map_matmul(st, fxn, args)
    if name == "cat" or name == "concat" or name == "concatenate":
        return _map_cat(st, fxn)
    if name == "embedding":  # F.embedding(ids, weight) or aten.embedding(weight, ids)
        ids = next((a for a in args[:2] if isinstance(a, Val)), None)
        w = next((a for a in args[:2] if isinstance(a, ParamVal)), None)
        if ids is not None and w is not None and len(w.shape) == 2 and ids.spec.kind == "int64":
            st.used_params.add(w.name)
            nid, specs = _add(st, fxn, "Embedding", {"num_embeddings": w.shape[0], "embedding_dim": w.shape[1]},
                              [ids])
            _claim(st, nid, "weight", w.name)
            return Val(nid, 0, specs[0], ids.dmap + (len(ids.dmap),))

    if name == "addmm" and len(args) > 2 and isinstance(args[2], ParamVal) and len(args[2].shape) == 2 \
            and isinstance(x, ParamVal) and isinstance(args[1], Val) and _arg(fxn, 3, "beta", 1) == 1 \
            and _arg(fxn, 4, "alpha", 1) == 1:
        # HF GPT-2's Conv1D: torch.addmm(bias, x, weight), weight (in, out): a Linear
        return param_linear(st, fxn, args[1], args[2], x, args[2].shape[1])
    if not isinstance(x, Val):
        return _generic(st, fxn, name, _flat_vals(st, (fxn.args, fxn.kwargs)))
    rank = _real_rank(fxn.args[0]) or (len(x.dmap))

    # types whose own file maps the call (activations, softmax, dropout, ...) --------------------
    lt = registry.torch_call_index().get(name)
    if lt is not None:
        call = TorchCall(name, fxn.op, tuple(fxn.args), dict(fxn.kwargs), ddim=lambda d: x.ddim(d, rank),
                         where=fxn.name, warnings=st.warnings)
        out = map_registered(st, fxn, lt, call, x, lt.from_torch_call)
        if out is not None:
            return out
    if name in _torch_loss.KINDS:  # a loss computed in the model: the Loss rule
        y = args[1] if len(args) > 1 else _v(st, fxn.kwargs.get("target"))
        v = _torch_loss.map_loss(st, fxn, name, x, y, _torch_loss.options_of_call(fxn, name), _single)
        if v is not None:
            return v

    # views and layout -----------------------------------------------------------------------
    if name in _PASSTHROUGH_METHODS:
        # what stops gradients at a detach is not modelled: say so, the layers before it count as training
        st.warnings.append(f"{fxn.name}: .{name}() is imported as a view; the gradient it stops is not modelled, "
                           "so the layers before it are estimated as training (an over-estimate)")
        return x
    if name in ("contiguous",):
        return _single(st, fxn, "Contiguous", {}, [x], x.dmap)
    if name in ("clone",):
        return _single(st, fxn, "Contiguous", {"always_copy": True}, [x], x.dmap)
    if name in ("to", "type", "float", "type_as", "half", "bfloat16", "double"):
        tm = _tmeta(fxn)
        if x.spec.kind == "float" and loss_upcast(st.torch, fxn, name):  # logits.float() in a HF loss
            return_uncast(st.torch, fxn)
            return _single(st, fxn, "ToDtype", {"to": "float32"}, [x], x.dmap)
        chain = _call_chain(fxn)
        if x.spec.kind == "float" and literal_upcast(st.torch, fxn, name):  # RMSNorm's x.to(torch.float32)
            st.upcasts[chain] = x
            return _single(st, fxn, "ToDtype", {"to": "float32"}, [x], x.dmap)
        ref = st.upcasts.get(chain)
        if x.spec.kind == "float" and ref is not None and cast_back(st.torch, fxn, name):  # ... .to(input_dtype)
            return _single(st, fxn, "ToDtype", {"to": "like"}, [x, ref], x.dmap)
        if tm is not None and tm[1] == _tmeta(fxn.args[0])[1]:
            return x
        return _generic(st, fxn, name, [x], "dtype conversion", saves_input=False)
    if name in ("view", "reshape", "view_as", "reshape_as", "unflatten", "unsqueeze", "squeeze"):
        return _map_reshape(st, fxn, x)
    if name in ("flatten",):
        s = int(_arg(fxn, 1, "start_dim", 0))
        e = int(_arg(fxn, 2, "end_dim", -1))
        return _map_flatten(st, fxn, x, s, e, rank)
    if name in ("transpose", "swapaxes", "swapdims"):
        a, b = int(_arg(fxn, 1, "dim0")), int(_arg(fxn, 2, "dim1"))
        perm = list(range(rank))
        a, b = a % rank, b % rank
        perm[a], perm[b] = perm[b], perm[a]
        return _map_permute(st, fxn, x, perm)
    if name == "t":
        return _map_permute(st, fxn, x, [1, 0] if rank == 2 else [0])
    if name == "permute":
        dims = fxn.args[1:] if len(fxn.args) > 2 else _arg(fxn, 1, "dims")
        if isinstance(dims, int):
            dims = [dims]
        return _map_permute(st, fxn, x, [int(d) % rank for d in dims])
    if name in ("chunk", "split", "unbind", "tensor_split"):
        return _map_split(st, fxn, x, name, rank)
    if name in ("mean",):
        d = _arg(fxn, 1, "dim", None)
        keep = bool(_arg(fxn, 2, "keepdim", False))
        if isinstance(d, (list, tuple)) and len(d) == 1:
            d = d[0]
        if isinstance(d, int):
            return _single(st, fxn, "Mean", {"dim": x.ddim(d, rank), "keepdim": keep}, [x],
                           _drop_dim(x.dmap, d % rank) if not keep else x.dmap)
        if isinstance(d, (list, tuple)) and len(d) == 2 and sorted(int(i) % rank for i in d) == [rank - 2, rank - 1] \
                and x.identity and rank == 4:
            # mean over H, W: global average pooling
            v = _single(st, fxn, "AdaptiveAvgPool2d", {"output_size": 1}, [x])
            return v if keep else _reshape_to(st, fxn, v, _tmeta(fxn)[0][1:])
        return _generic(st, fxn, name, [x], "mean over several dims or all", saves_input=False)
    if name in ("max", "min"):
        d = _arg(fxn, 1, "dim", None)
        if isinstance(d, int):
            keep = bool(_arg(fxn, 2, "keepdim", False))
            nid, specs = _add(st, fxn, "Max", {"dim": x.ddim(d, rank), "keepdim": keep}, [x])
            dm = _drop_dim(x.dmap, d % rank) if not keep else x.dmap
            return Multi([Val(nid, 0, specs[0], dm), Val(nid, 1, specs[1], dm)])
    if name in ("interpolate", "upsample"):
        return _map_upsample(st, fxn, x, _arg(fxn, 2, "scale_factor"), _arg(fxn, 3, "mode", "nearest"))
    if name == "scaled_dot_product_attention":
        q, k, v = args[0], args[1], args[2]
        p = _arg(fxn, 4, "dropout_p", 0.0)
        mask = _v(st, _arg(fxn, 3, "attn_mask"))
        # a mask the layer takes: batch first, (heads or 1, queries or 1, keys) per sample
        mask_ok = mask is None or (isinstance(mask, Val) and mask.identity and len(mask.spec.shape) == 3)
        if not all(isinstance(t, Val) and t.identity for t in (q, k, v)) or not mask_ok \
                or not isinstance(p, (int, float)):
            return _generic(st, fxn, name, [t for t in (q, k, v, mask) if isinstance(t, Val)], "mask, layout or dropout")
        # dropout_p as traced in train mode (fx bakes ``p if self.training else 0.0``): it picks
        # the CPU's math path in training, so the layer must know it
        return _single(st, fxn, "ScaledDotProductAttention",
                       {"kernel": "fused", "causal": bool(_arg(fxn, 5, "is_causal", False)), "dropout": float(p)},
                       [q, k, v] + ([mask] if mask is not None else []))
    if name == "linear" and len(args) > 1 and isinstance(args[1], ParamVal) and len(args[1].shape) == 2:
        w = args[1]
        b = args[2] if len(args) > 2 else _v(st, fxn.kwargs.get("bias"))
        return param_linear(st, fxn, x, w, b if isinstance(b, ParamVal) else None, w.shape[0])
    if name in ("conv2d", "conv1d", "conv3d") and len(args) > 1 and isinstance(args[1], ParamVal) and isinstance(x, Val):
        w = args[1]
        b = args[2] if len(args) > 2 else _v(st, fxn.kwargs.get("bias"))
        pad = _arg(fxn, 4, "padding", 0)
        props = {"out_channels": w.shape[0], "kernel": _pair(tuple(w.shape[2:])), "stride": _pair(_arg(fxn, 3, "stride", 1)),
                 "padding": pad.upper() if isinstance(pad, str) else _pair(pad),
                 "dilation": _pair(_arg(fxn, 5, "dilation", 1)), "groups": int(_arg(fxn, 6, "groups", 1)),
                 "bias": isinstance(b, ParamVal)}
        props.update(props_of(w))
        out = _single(st, fxn, {"conv1d": "Conv1d", "conv2d": "Conv2d", "conv3d": "Conv3d"}[name], props, [x])
        _claim(st, out.nid, "weight", w.name)
        if isinstance(b, ParamVal):
            _claim(st, out.nid, "bias", b.name)
        claim_g(st, out.nid, w)
        return out
    if name in ("layer_norm",) and isinstance(_v(st, _arg(fxn, 2, "weight")), ParamVal):
        w, b = _v(st, _arg(fxn, 2, "weight")), _v(st, _arg(fxn, 3, "bias"))
        if isinstance(b, ParamVal):
            ns = tuple(_arg(fxn, 1, "normalized_shape"))
            out = _same(st, fxn, "LayerNorm", {"normalized_shape": ns if len(ns) > 1 else (),
                                               "eps": float(_arg(fxn, 4, "eps", 1e-5))}, x)
            _claim(st, out.nid, "weight", w.name)
            _claim(st, out.nid, "bias", b.name)
            return out
    if name in ("identity",):
        return x
    return _generic(st, fxn, name, _flat_vals(st, (fxn.args, fxn.kwargs)))


def map_registered(st, fxn, lt, call: TorchCall, x: Val, rule, claim=None):
    """A call mapped by its layer type's own rule (model/torchmap.py): the node, the input itself
    (PASS), a Generic node with the rule's reason (LayerError) or, when the rule says it is not
    its type (None), None for the caller to go on. ``claim`` (a module's parameters) runs before
    the node is added."""
    try:
        props = rule(call)
    except LayerError as err:
        return _generic(st, fxn, call.op, [x], err.message)
    if props is None:
        return None
    if props is PASS:
        return x
    if claim is not None:
        claim()
    return _single(st, fxn, lt.name, props, [x], x.dmap if lt.keeps_layout else None)


def _map_getitem(st, fxn, x, idx):
    if isinstance(x, Multi):
        if isinstance(idx, int) and -len(x.items) <= idx < len(x.items):
            item = x.items[idx]
            if isinstance(item, Other) and fxn.args[0].op == "call_module":  # a, _ = self.attn(x, x, x)
                first = x.items[0] if isinstance(x.items[0], Val) else None
                held = held_element(st, fxn, first, idx % len(x.items), _tmeta(fxn), META_BATCH, _single)
                if held is not None:
                    x.items[idx] = item = held
            return item
        return Other()
    if isinstance(x, ParamVal) and _tmeta(fxn) is not None:
        # a slice of a parameter (a positional table cut to the sequence: pos[:, :x.shape[1]]) is
        # still that parameter for the op that reads it; torch.fx used to drop it (25,866 -> 21,770)
        return ParamVal(x.name, _tmeta(fxn)[0], True)
    if isinstance(x, (Other, ParamVal)) or x is None:
        return Other()
    if not isinstance(x, Val):
        return Other()
    rank = _real_rank(fxn.args[0]) or len(x.dmap)
    if not isinstance(idx, tuple):
        idx = (idx,)
    # expand an Ellipsis
    if any(i is Ellipsis for i in idx):
        k = idx.index(Ellipsis)
        fill = rank - (len(idx) - 1)
        idx = idx[:k] + (slice(None),) * fill + idx[k + 1:]
    ints = [(d, i) for d, i in enumerate(idx) if isinstance(i, int)]
    full = all(isinstance(i, slice) and i == slice(None) for d, i in enumerate(idx) if not isinstance(i, int))
    if len(ints) == 1 and full and not any(i is None for i in idx):
        d, i = ints[0]
        if x.dmap[d] == 0:
            return _generic(st, fxn, "getitem", [x], "indexes the batch dimension", saves_input=False)
        return _single(st, fxn, "Select", {"dim": x.dmap[d], "index": i}, [x], _drop_dim(x.dmap, d))
    # one basic slice along a non-batch dimension (x[:, :3], x[..., 1:]) is a view
    sl = [(d, i) for d, i in enumerate(idx) if isinstance(i, slice) and i != slice(None)]
    if not ints and len(sl) == 1 and not any(i is None for i in idx):
        d, i = sl[0]
        if x.dmap[d] != 0 and i.step in (None, 1) and all(isinstance(v, (int, type(None))) for v in (i.start, i.stop)):
            return _single(st, fxn, "Slice", {"dim": x.dmap[d], "start": i.start or 0, "end": i.stop}, [x], x.dmap)
    return _generic(st, fxn, "getitem", [x], f"index {idx!r}", saves_input=False)


def _map_add(st, fxn, args, inplace):
    a, b = args[0], args[1] if len(args) > 1 else _v(st, fxn.kwargs.get("other"))
    if isinstance(a, ParamVal) and isinstance(b, Val):
        a, b = b, a
    if isinstance(a, Val) and isinstance(b, ParamVal):
        if (tuple(b.shape) == (1,) + a.spec.shape or tuple(b.shape) == a.spec.shape) and not b.expanded \
                and getattr(_tensor_of(st, b.name), "requires_grad", False):
            out = _single(st, fxn, "PositionEmbedding", {}, [a], a.dmap, name=_pname(fxn, b.name))
            _claim(st, out.nid, "pos_embed", b.name)
            return out
        return _generic(st, fxn, "add", [a], f"adds parameter {b.name} of shape {b.shape}")
    if isinstance(a, Val) and isinstance(b, Val):
        if a.dmap != b.dmap and len(a.dmap) == len(b.dmap):
            return _generic(st, fxn, "add", [a, b], "operands laid out differently")
        return _single(st, fxn, "Add", {"inplace": bool(inplace)}, [a, b], a.dmap if len(a.dmap) >= len(b.dmap)
                       else b.dmap)
    t = a if isinstance(a, Val) else b
    if isinstance(t, Val):
        return _generic(st, fxn, "add_scalar", [t], saves_input=False)
    return Other()


def _map_mul(st, fxn, args, div):
    a = args[0]
    b = args[1] if len(args) > 1 else _v(st, fxn.kwargs.get("other"))
    if not div and isinstance(b, Val) and isinstance(a, (int, float)):
        a, b = b, a
    if isinstance(a, Val) and isinstance(b, (int, float)) and not isinstance(b, bool):
        f = 1.0 / b if div else float(b)
        return _same(st, fxn, "Scale", {"factor": f}, a)
    if isinstance(a, Val) and isinstance(b, Val):
        if div:
            return _generic(st, fxn, "div", [a, b])
        return _single(st, fxn, "Multiply", {}, [a, b], a.dmap if len(a.dmap) >= len(b.dmap) else b.dmap)
    ins = [v for v in (a, b) if isinstance(v, Val)]
    if ins:
        return _generic(st, fxn, "div" if div else "mul", ins)
    return Other()


def _map_matmul(st, fxn, args):
    a, b = args[0], args[1]
    if not (isinstance(a, Val) and isinstance(b, Val)):
        return _generic(st, fxn, "matmul", [v for v in (a, b) if isinstance(v, Val)])
    ra, rb = len(a.dmap), len(b.dmap)
    if ra != rb or ra < 3:
        return _generic(st, fxn, "matmul", [a, b], "operands of different rank")
    # the real matrix dims must be the design's last two dims, in order
    for v, _r in ((a, ra), (b, rb)):
        if v.dmap[-2:] != (v.drank - 2, v.drank - 1):
            return _generic(st, fxn, "matmul", [a, b], "matrix dims are not the last two")
    return _single(st, fxn, "MatMul", {}, [a, b], a.dmap)


def _map_cat(st, fxn):
    tensors = _arg(fxn, 0, "tensors")
    d = int(_arg(fxn, 1, "dim", 0))
    vals = [_v(st, t) for t in tensors]
    params = [v for v in vals if isinstance(v, ParamVal)]
    tens = [v for v in vals if isinstance(v, Val)]
    if params and len(tens) == 1 and len(params) == 1 and isinstance(vals[0], ParamVal):
        p, x = params[0], tens[0]
        rank = len(x.dmap)
        if rank == 3 and d % rank == 1 and x.identity and len(p.shape) == 3 and p.shape[0] == 1:
            out = _single(st, fxn, "ClassToken", {"tokens": int(p.shape[1])}, [x], name=p.name)
            _claim(st, out.nid, "cls_token", p.name)
            return out
    if params or len(tens) != len(vals):
        return _generic(st, fxn, "cat", tens, "concatenates parameters or constants")
    if len(tens) == 1:  # torch.cat of one tensor still allocates a copy
        return _single(st, fxn, "Contiguous", {"always_copy": True}, tens, tens[0].dmap)
    if any(t.dmap != tens[0].dmap for t in tens):
        return _generic(st, fxn, "cat", tens, "operands laid out differently")
    rank = len(tens[0].dmap)
    return _single(st, fxn, "Concat", {"dim": tens[0].ddim(d, rank)}, tens, tens[0].dmap)


def _reshape_to(st, fxn, x, per_sample, name=None):
    return _single(st, fxn, "Reshape", {"shape": tuple(per_sample) or (1,)}, [x], name=name)


def _reshape_like(st, fxn, x):
    """contiguous(): a copy only when the input is not contiguous; modelled as a same-shape Reshape
    in the design's layout (a view when contiguous, a copy otherwise)."""
    return _single(st, fxn, "Reshape", {"shape": x.spec.shape}, [x], x.dmap)


def _map_reshape(st, fxn, x):
    tm = _tmeta(fxn)
    if tm is None:
        return _generic(st, fxn, "reshape", [x])
    shape = tm[0]
    if x.dmap[0] != 0 or not shape or shape[0] != META_BATCH:
        return _generic(st, fxn, "reshape", [x], "merges or moves the batch dimension", saves_input=False)
    if not x.identity:
        # the real tensor's layout differs from the design's: the real reshape copies exactly
        # when the design's would not be contiguous in the real order; keep the design's reshape
        pass
    per = shape[1:]
    if not per:
        return _generic(st, fxn, "reshape", [x], "to a scalar per sample", saves_input=False)
    return _reshape_to(st, fxn, x, per)


def _map_flatten(st, fxn, x, s, e, rank):
    s %= rank
    e %= rank
    if s == 0:
        return _generic(st, fxn, "flatten", [x], "flattens the batch dimension", saves_input=False)
    if s >= e:
        return x
    if e == rank - 1 and x.identity:
        return _single(st, fxn, "Flatten", {"start_dim": s}, [x])
    return _map_reshape(st, fxn, x)


def _map_permute(st, fxn, x, perm):
    """A real permute in the design's terms: the batch stays first; singleton dims the real tensor
    squeezed stay right after it. Identity in the design: no node, only the mapping changes."""
    rank = len(perm)
    if sorted(perm) != list(range(rank)) or len(x.dmap) != rank:
        return _generic(st, fxn, "permute", [x], "bad permutation")
    real_src_design = [x.dmap[p] for p in perm]  # design dims in the real output order
    squeezed = [d for d in range(x.drank) if d not in x.dmap]
    order = [0] + squeezed + [d for d in real_src_design if d != 0]
    new_dmap = tuple(order.index(d) for d in real_src_design)
    if order == list(range(x.drank)):
        return Val(x.nid, x.port, x.spec, new_dmap)
    swaps = [i for i in range(len(order)) if order[i] != i]
    if len(swaps) == 2 and len(order) > 2:
        return _single(st, fxn, "Transpose", {"dim0": swaps[0], "dim1": swaps[1]}, [x], new_dmap)
    return _single(st, fxn, "Permute", {"dims": tuple(order)}, [x], new_dmap)


def _map_split(st, fxn, x, name, rank):
    tm_in = _tmeta(fxn.args[0])
    if name == "unbind":
        d = int(_arg(fxn, 1, "dim", 0)) % rank
        n = tm_in[0][d]
        squeeze = True
    else:
        d = int(_arg(fxn, 2, "dim", 0)) % rank
        size = tm_in[0][d]
        a1 = _arg(fxn, 1, "chunks" if name == "chunk" else "split_size_or_sections")
        if name == "chunk":
            n = int(a1)
            if size % n:
                return Multi([_generic(st, fxn, name, [x], "uneven chunks")])
        elif isinstance(a1, int):
            if size % a1:
                return Multi([_generic(st, fxn, name, [x], "uneven split")])
            n = size // a1
        else:
            sizes = list(a1)
            if len(set(sizes)) != 1:
                st.warnings.append(f"{fxn.name}: split into unequal sizes {sizes}; imported as a Generic node")
                return Multi([_generic(st, fxn, name, [x], "unequal sizes")])
            n = len(sizes)
        squeeze = False
    dd = x.dmap[d]
    if dd == 0:
        return Multi([_generic(st, fxn, name, [x], "splits the batch dimension")])
    nid, specs = _add(st, fxn, "Split", {"chunks": n, "dim": dd}, [x])
    if squeeze:
        dmap = tuple(m for i, m in enumerate(x.dmap) if i != d)  # the design keeps a singleton dim
    else:
        dmap = x.dmap
    return Multi([Val(nid, j, specs[j], dmap) for j in range(n)])


def _map_upsample(st, fxn, x, scale, mode):
    if mode not in ("nearest", "bilinear"):
        return _generic(st, fxn, "upsample", [x], f"mode {mode!r}")
    tm = _tmeta(fxn)
    if scale is None and tm is not None:
        scale = tm[0][-1] / max(x.spec.shape[-1], 1)
    if isinstance(scale, (tuple, list)):
        if len(set(scale)) != 1:
            return _generic(st, fxn, "upsample", [x], "different scale per dim")
        scale = scale[0]
    return _single(st, fxn, "Upsample", {"scale_factor": float(scale), "mode": mode}, [x])

"""Adding design nodes for traced ops (ids, edges, shape rules, shared parameters, Generic nodes for
ops without a rule) and reading an fx node's arguments."""

from __future__ import annotations

import os
import re

from memdesigner.importers._torch_trace import _tmeta
from memdesigner.importers._torch_values import META_BATCH, Other, ParamVal, Val, _sanitize, _State
from memdesigner.importers._torch_values import get_attr as _get_attr
from memdesigner.model import registry
from memdesigner.model.registry import LayerError, ShapeCtx


def _owner(n) -> str:
    stack = n.meta.get("nn_module_stack")
    if stack:
        path = list(stack.values())[-1]
        if isinstance(path, tuple):
            path = path[0]
        return str(path)
    return ""


def _call_chain(n) -> str:
    """The module calls an op ran in, outermost first, '/'-joined (containers such as
    ModuleList are never called and do not appear)."""
    return "/".join(str(k) for k in (n.meta.get("nn_module_stack") or {}))


def _new_id(st: _State, base: str) -> str:
    base = _sanitize(base)
    cand, k = base, 1
    while cand in st.used_ids or cand in st.design.nodes:
        k += 1
        cand = f"{base}_{k}"
    st.used_ids.add(cand)
    return cand


def _add(st: _State, fxn, type_name: str, props: dict, inputs: list, name: str | None = None) -> list:
    """Add a design node fed by ``inputs`` (Vals), check its shape rule and return its output
    specs. Raises LayerError if the rule rejects it."""
    lt = registry.get(type_name)
    values = lt.coerce_props(props)
    specs = lt.shape(ShapeCtx(values, [v.spec for v in inputs], name or "")) if lt.shape else []
    if name is None:
        if fxn.op == "call_module":
            name = str(fxn.target)
        else:
            own = _owner(fxn)
            base = re.sub(r"_\d+$", "", fxn.name)
            name = f"{own}.{base}" if own else base
    nid = _new_id(st, name)
    st.design.add_node(lt.name, props, id=nid, name=name, scope=_call_chain(fxn))
    for port, v in enumerate(inputs):
        st.design.add_edge(v.nid, nid, v.port, port)
    st.depth[nid] = 1 + max((st.depth.get(v.nid, 0) for v in inputs), default=-1)
    if fxn.op == "call_module":
        _tie_shared_params(st, nid, lt, values, inputs, str(fxn.target))
    return nid, specs


def _tie_shared_params(st: _State, nid: str, lt, values: dict, inputs: list, target: str) -> None:
    """A parameter object used by two modules (``lm_head.weight = wte.weight``) is one tensor:
    the second node names the first as the owner of that parameter (Node.tied)."""
    try:
        mod = st.module.get_submodule(target)
    except AttributeError:
        return
    try:
        specs = lt.params(ShapeCtx(values, [v.spec for v in inputs], ""))
    except (LayerError, ValueError, TypeError, IndexError):
        return
    for p in specs:
        obj = mod
        for part in p.name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is None or not isinstance(obj, st.torch.nn.Parameter):
            continue
        owner = st.param_owner.get(id(obj))
        if owner is None:
            st.param_owner[id(obj)] = f"{nid}.{p.name}"
        else:
            st.design.nodes[nid].tied[p.name] = owner


def _single(st, fxn, type_name, props, inputs, dmap=None, name=None) -> Val:
    nid, specs = _add(st, fxn, type_name, props, inputs, name)
    spec = specs[0]
    if dmap is None:
        dmap = tuple(range(len(spec.shape) + 1))
    return Val(nid, 0, spec, dmap)


def _generic(st: _State, fxn, op: str, inputs: list, why: str = "", saves_input: bool = True, params: int = 0):
    """A node for an op with no rule: its traced output shape and dtype count."""
    torch = st.torch
    tm = _tmeta(fxn)
    if tm is None:
        return Other()
    shape, dtype = tm
    per = shape[1:] if shape else ()
    empty = 0 in per  # an empty tensor (Phi-3's q[..., rotary_dim:] when all of q rotates): no bytes
    if not per or empty:
        per = (1,)
    kind = "int64" if dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8) else \
        ("bool" if dtype == torch.bool else "float")
    msg = f"{fxn.name}: {op} has no memdesigner rule; imported as a Generic node (output {tuple(shape)})"
    if why:
        msg += f" ({why})"
    st.warnings.append(msg)
    ins = [v for v in inputs if isinstance(v, Val)]
    dmap = None
    if shape and shape[0] != META_BATCH and shape[0] % META_BATCH == 0 and shape[0] > META_BATCH:
        # the batch merged with the next dims (x.view(-1, C)): the design keeps a per-sample
        # leading dim so that the element count stays right
        per = (shape[0] // META_BATCH,) + tuple(shape[1:])
        dmap = (0,) + tuple(range(2, len(shape) + 1))
    # parameters passed to the op (a torch.fx.wrap function, torch.addmm(bias, x, weight)): the
    # node owns them, each counted once however many ops read it
    claims = []
    seen = set()  # (a module's own parameters are not among its arguments: _module_generic counts them)
    for pv in _flat_vals(st, (fxn.args, fxn.kwargs)):
        if not isinstance(pv, ParamVal) or pv.name in seen:
            continue
        seen.add(pv.name)
        t = _tensor_of(st, pv.name)
        if t is None or not isinstance(t, torch.nn.Parameter):  # (a frozen one still weighs: _torch_frozen)
            continue
        st.used_params.add(pv.name)
        if id(t) not in st.param_owner:
            params += t.numel()
            claims.append(t)
    props = {"op": op, "out_shape": per, "dtype": kind, "saves_input": saves_input}
    if empty:
        props.update(batch_free=True, out_elems=0)
    if params:
        props["params"] = int(params)
    out = _single(st, fxn, "Generic", props, ins, dmap)
    for t in claims:
        st.param_owner[id(t)] = f"{out.nid}.weight"
    # the call itself, as data: the exporter writes it back instead of a placeholder
    from memdesigner.importers._torch_call import call_props

    call = call_props(st, fxn, out.nid, ins, Val)
    if call:
        st.design.nodes[out.nid].props["call"] = call
    st.generic_fx[fxn] = (out.nid, _input_nodes(st, fxn, ins))
    return out


def _input_nodes(st, fxn, ins) -> list:
    """The fx node that produced each design input of a node, in order."""
    out = []
    for v in ins:
        a = next((a for a in fxn.all_input_nodes if st.vals.get(a) is v), None)
        if a is None:
            a = next((a for a in fxn.all_input_nodes if isinstance(st.vals.get(a), Val)
                      and (st.vals[a].nid, st.vals[a].port) == (v.nid, v.port)), None)
        out.append(a)
    return out


def _tensor_of(st, name):
    try:
        return _get_attr(st.gm, name)
    except AttributeError:
        return None


def _claim(st, nid: str, pname: str, name: str) -> None:
    """Node ``nid``'s parameter ``pname`` is the module's tensor ``name``: the first node to use a
    tensor owns it; later ones name that owner (Node.tied), so it is counted once."""
    st.used_params.add(name)
    t = _tensor_of(st, name)
    if t is None:
        return
    owner = st.param_owner.get(id(t))
    if owner is None:
        st.param_owner[id(t)] = f"{nid}.{pname}"
    elif not owner.startswith(f"{nid}."):
        st.design.nodes[nid].tied[pname] = owner


def _flat_vals(st, obj):
    out = []
    if isinstance(obj, (list, tuple)):
        for o in obj:
            out += _flat_vals(st, o)
    elif isinstance(obj, dict):
        for o in obj.values():
            out += _flat_vals(st, o)
    elif hasattr(obj, "op") and hasattr(obj, "graph"):
        out.append(st.vals.get(obj))
    return out


def _v(st, a):
    """The value of an fx argument (a node's value, or a Python constant)."""
    if hasattr(a, "op") and hasattr(a, "graph"):
        return st.vals.get(a, Other())
    if isinstance(a, (list, tuple)):
        return type(a)(_v(st, x) for x in a)
    return a


def _op_name(fxn) -> str:
    t = fxn.target
    if fxn.op == "call_module":
        return str(t)
    if isinstance(t, str):
        return t
    schema = getattr(t, "_schema", None)
    if schema is not None:  # an aten OpOverload (torch.export fallback): aten::relu_ -> relu_
        return schema.name.split("::")[-1]
    return getattr(t, "__name__", str(t))


def _arg(fxn, i, name, default=None):
    if len(fxn.args) > i:
        return fxn.args[i]
    return fxn.kwargs.get(name, default)


def _pair(v):
    if isinstance(v, (tuple, list)):
        v = tuple(int(x) for x in v)
        return v[0] if len(set(v)) == 1 else v
    return int(v)


def _real_rank(fxn_arg) -> int | None:
    tm = _tmeta(fxn_arg) if hasattr(fxn_arg, "meta") else None
    return len(tm[0]) if tm else None


def _augmented(fxn, op: str) -> bool:
    """Whether the user source line that made this node is an augmented assignment (``a += b``):
    torch.fx records ``a += b`` as operator.add, but eager PyTorch runs it in place."""
    import torch

    trace = fxn.meta.get("stack_trace") or ""
    torch_dir = os.path.dirname(torch.__file__)
    code = None
    lines = str(trace).splitlines()
    for i, ln in enumerate(lines):
        m = re.match(r'\s*File "([^"]+)"', ln)
        if m and i + 1 < len(lines) and not m.group(1).startswith(torch_dir):
            code = lines[i + 1].strip()
    if not code:
        return False
    return re.match(r"^[A-Za-z_][\w.]*(\[[^\]]*\])?\s*" + re.escape(op), code) is not None


def _same(st, fxn, t, props, x):
    return _single(st, fxn, t, props, [x], x.dmap)


def _drop_dim(dmap, real_d):
    """dmap after the real dim ``real_d`` is removed and the design dim removed as well."""
    gone = dmap[real_d]
    return tuple(d - (1 if d > gone else 0) for i, d in enumerate(dmap) if i != real_d)


def _pname(fxn, pname):
    return pname

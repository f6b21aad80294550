"""The call behind a Generic node, kept as data so that the exporter can write it back.

An fx call_function / call_method / call_module the importer has no layer for becomes a Generic
node; this module writes the call itself into the node's ``call`` prop (JSON text; its schema is
declared with the Generic registration in memdesigner/model/layers/tensor_ops.py): the target's import path, and templates of its
arguments in which every element is a design input of the node, the model's input, a constant,
a tensor the node owns (a parameter or buffer of a given shape), or a nested call computing a
non-tensor value or a view of a parameter (``self.pos[:, :x.size(1)]``). The exporter then writes
the op instead of a zeros placeholder, so export -> import gives the same node back.

A call that cannot be written this way (a function of the user's own module, a tensor computed by
a mapped layer that is not an input of the node, an unusual module constructor) gets no ``call``.
"""

from __future__ import annotations

import json
import math
import operator

from memdesigner.importers._torch_values import get_attr

MAX_DEPTH = 6
# operator functions fx records for Python syntax (x * y, x[i]): written back as that syntax
OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor",
             "lshift", "rshift", "eq", "ne", "lt", "le", "gt", "ge", "neg", "pos", "invert", "getitem")


class _NoCall(Exception):
    """The call has a part that cannot be written as data."""


def _function_path(torch, fn) -> str:
    """Public import path of a function the generated code can name (``torch.einsum``,
    ``torch.nn.functional.max_pool1d``, ``torch.ops.aten.ne.Scalar``, ``operator.mul``)."""
    if isinstance(fn, torch._ops.OpOverload):
        schema = fn._schema
        ns, name = schema.name.split("::")
        return f"torch.ops.{ns}.{name}.{schema.overload_name or 'default'}"
    name = getattr(fn, "__name__", "")
    if not name.isidentifier():
        raise _NoCall(f"function {fn!r}")
    if getattr(operator, name, None) is fn and name in OPERATORS:
        return f"operator.{name}"
    if fn is getattr:
        return "builtins.getattr"
    for prefix, mod in (("torch", torch), ("torch.nn.functional", torch.nn.functional),
                        ("torch.special", torch.special), ("torch.linalg", torch.linalg), ("torch.fft", torch.fft)):
        if getattr(mod, name, None) is fn:
            return f"{prefix}.{name}"
    raise _NoCall(f"function {getattr(fn, '__module__', '?')}.{name} is not part of torch")


def _module_init(torch, mod) -> dict:
    """Constructor arguments of a plain torch.nn module, recovered from its attributes and checked
    by building it again on the meta device (same repr, parameter and buffer shapes)."""
    import inspect

    cls = type(mod)
    if not cls.__module__.startswith("torch.nn.modules.") or getattr(torch.nn, cls.__name__, None) is not cls:
        raise _NoCall(f"module class {cls.__module__}.{cls.__name__}")
    kwargs = {}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name in ("self", "device", "dtype") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if not hasattr(mod, name):
            if p.default is p.empty:
                raise _NoCall(f"{cls.__name__}: constructor argument {name} is not an attribute")
            continue
        v = getattr(mod, name)
        if isinstance(p.default, bool) and (v is None or isinstance(v, torch.Tensor)):
            v = v is not None  # bias=True keeps a Parameter named bias, bias=False None
        kwargs[name] = _const(torch, v)
    with torch.device("meta"):
        again = cls(**{k: _python(v) for k, v in kwargs.items()})
    same = (again.extra_repr() == mod.extra_repr()
            and [(n, tuple(t.shape), t.requires_grad) for n, t in again.named_parameters()]
            == [(n, tuple(t.shape), t.requires_grad) for n, t in mod.named_parameters()]
            and [(n, tuple(t.shape)) for n, t in again.named_buffers()] == [(n, tuple(t.shape))
                                                                            for n, t in mod.named_buffers()])
    if not same:
        raise _NoCall(f"{cls.__name__}: its constructor arguments could not be recovered")
    return kwargs


def _python(v):
    """A constant template back to the Python value (module constructor arguments)."""
    if isinstance(v, dict) and "tuple" in v:
        return tuple(_python(x) for x in v["tuple"])
    if isinstance(v, list):
        return [_python(x) for x in v]
    if isinstance(v, dict):
        raise _NoCall("a constructor argument that is not a plain constant")
    return v


def _const(torch, v):
    """A Python constant as a template element."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": repr(v)}
    if isinstance(v, (tuple, torch.Size)):
        return {"tuple": [_const(torch, x) for x in v]}
    if isinstance(v, list):
        return [_const(torch, x) for x in v]
    if isinstance(v, slice):
        return {"slice": [_const(torch, v.start), _const(torch, v.stop), _const(torch, v.step)]}
    if v is Ellipsis:
        return {"ellipsis": True}
    if isinstance(v, torch.device):
        return {"device": True}
    name = str(v)
    if name.startswith("torch.") and name[6:].isidentifier() and getattr(torch, name[6:], None) is v:
        return {"torch": name}  # a dtype, layout or memory format
    raise _NoCall(f"constant {type(v).__name__}")


class CallEncoder:
    """Encodes one fx node's call for the Generic node ``nid`` fed by design inputs ``inputs``."""

    def __init__(self, st, nid: str, inputs: list, vals_type):
        self.st = st
        self.torch = st.torch
        self.nid = nid
        self.inputs = inputs
        self.Val = vals_type
        self.tensors: list = []  # owned tensors, in order
        self.tensor_index: dict = {}  # id(tensor) -> index in self.tensors
        self.claimed: dict = {}  # id(tensor) -> (nid, index) for tensors this call takes

    def encode(self, fxn) -> dict:
        call = self._call(fxn, 0)
        if fxn.op == "call_module":
            mod = self.st.gm.get_submodule(str(fxn.target))
            call["init"] = _module_init(self.torch, mod)
        if self.tensors:
            call["tensors"] = self.tensors
        return call

    def _call(self, fxn, depth) -> dict:
        if depth > MAX_DEPTH:
            raise _NoCall("calls nested too deep")
        if fxn.op == "call_function":
            kind, target = "function", _function_path(self.torch, fxn.target)
        elif fxn.op == "call_method":
            kind, target = "method", str(fxn.target)
            if not target.isidentifier():
                raise _NoCall(f"method {target!r}")
        elif fxn.op == "call_module" and depth == 0:
            mod = self.st.gm.get_submodule(str(fxn.target))
            kind, target = "module", f"torch.nn.{type(mod).__name__}"
        else:
            raise _NoCall(f"{fxn.op} {fxn.target}")
        return {"kind": kind, "target": target, "args": [self._arg(a, depth) for a in fxn.args],
                "kwargs": {str(k): self._arg(v, depth) for k, v in fxn.kwargs.items()}}

    def _arg(self, a, depth):
        torch = self.torch
        if hasattr(a, "op") and hasattr(a, "graph"):
            return self._node(a, depth)
        if isinstance(a, (list, tuple)) and not isinstance(a, torch.Size):
            items = [self._arg(x, depth) for x in a]
            return items if isinstance(a, list) else {"tuple": items}
        if isinstance(a, dict):
            raise _NoCall("a dict argument")
        if isinstance(a, slice):
            return {"slice": [self._arg(x, depth) for x in (a.start, a.stop, a.step)]}
        return _const(torch, a)

    def _node(self, a, depth):
        v = self.st.vals.get(a)
        if isinstance(v, self.Val):
            return self._input(a, v)
        if a.op == "get_attr":
            return self._tensor(a)
        if a.op in ("call_function", "call_method"):
            return {"call": self._call(a, depth + 1)}
        raise _NoCall(f"{a.op} {a.target}")

    def _input(self, a, v):
        k = next((k for k, w in enumerate(self.inputs) if (w.nid, w.port) == (v.nid, v.port)), None)
        if k is None:
            node = self.st.design.nodes.get(v.nid)
            if node is not None and node.type == "Input" and v.identity:
                return {"input": 0}
            raise _NoCall(f"reads {v.nid}, which is not an input of the node")
        out = {"in": k}
        if not v.identity:
            out["dmap"] = list(v.dmap)
        tm = a.meta.get("tensor_meta")
        real = tuple(int(d) for d in tm.shape) if tm is not None and hasattr(tm, "shape") else None
        from memdesigner.importers._torch_values import META_BATCH

        if real is None:
            raise _NoCall(f"{v.nid}: no traced shape")
        if real != real_shape(v.spec.shape, v.dmap, META_BATCH):
            # the batch merged with other dims (x.view(-1, C)) or a batch-free tensor the design
            # keeps per sample: the same elements, reshaped to the real tensor (-1: the batch part)
            if math.prod(v.spec.shape) * META_BATCH != math.prod(real) or not real or not v.identity:
                raise _NoCall(f"{v.nid} is laid out differently in the design")
            out = {"in": k, "reshape": [-1 if i == 0 and d % META_BATCH == 0 else d for i, d in enumerate(real)]}
        return out

    def _tensor(self, a):

        t = get_attr(self.st.gm, a.target)
        if not isinstance(t, self.torch.Tensor):
            raise _NoCall(f"attribute {a.target} is not a tensor")
        if id(t) in self.tensor_index:
            return {"tensor": self.tensor_index[id(t)]}
        trainable = bool(t.requires_grad)
        shared = self.st.call_tensors.get(id(t))
        if shared is not None and shared[0] != self.nid:
            return {"shared": shared[0], "tensor": shared[1]}
        owner = self.st.param_owner.get(id(t))
        if trainable and owner is not None and not owner.startswith(f"{self.nid}."):
            raise _NoCall(f"parameter {a.target} belongs to {owner.split('.')[0]}")
        j = len(self.tensors)
        self.tensors.append({"shape": [int(d) for d in t.shape], "dtype": str(t.dtype),
                             "param": isinstance(t, self.torch.nn.Parameter), "grad": trainable})
        self.tensor_index[id(t)] = j
        self.claimed[id(t)] = (self.nid, j)
        return {"tensor": j}


def real_shape(per_sample, dmap, batch):
    """The real tensor's shape of a design value (batch first; dmap[i] = design dim of real dim i):
    design dims missing from dmap are singletons the real tensor squeezed."""
    full = (batch,) + tuple(per_sample)
    if any(full[d] != 1 for d in range(len(full)) if d not in dmap):
        return None
    return tuple(full[d] for d in dmap)


def call_props(st, fxn, nid: str, inputs: list, vals_type) -> str:
    """The ``call`` prop (JSON text) of Generic node ``nid`` made from ``fxn``, or "" when the call
    cannot be written as data. Tensors the call takes are remembered in st.call_tensors, so a later
    call reading the same tensor names its owner instead of a copy."""
    enc = CallEncoder(st, nid, inputs, vals_type)
    try:
        call = enc.encode(fxn)
    except (_NoCall, TypeError, ValueError, AttributeError, RuntimeError):
        return ""
    st.call_tensors.update(enc.claimed)
    return json.dumps(call, separators=(",", ":"))

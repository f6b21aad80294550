"""A Generic node's recorded PyTorch call (its ``call`` prop, schema declared with the Generic
registration) written back as code: ``torch.einsum('bhid,bhjd->bhij', q, k)``, ``self.gamma * x``,
``self.norm(self.latents.expand(x.size(0), -1, -1))``.

The prop comes from a design file, so nothing in it reaches the generated code unchecked: targets
must be torch / torch.nn.functional / aten functions, Python operators or plain torch.nn classes
(nothing that loads, saves or compiles), methods plain identifiers, and every constant goes through
the exporter's literal writer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
              "matmul": "@", "and_": "&", "or_": "|", "xor": "^", "lshift": "<<", "rshift": ">>", "eq": "==",
              "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_UNARY = {"neg": "-", "pos": "+", "invert": "~"}
_FUNCTION = re.compile(r"^(torch|torch\.nn\.functional|torch\.special|torch\.linalg|torch\.fft)\.([a-z][A-Za-z0-9_]*)$"
                       r"|^torch\.ops\.aten\.([a-z][A-Za-z0-9_]*)\.([A-Za-z0-9_]+)$")
_NOT_OPS = {"load", "save", "from_file", "compile", "hub", "jit", "export", "fx", "onnx", "utils", "distributed",
            "package", "backends", "cuda", "library", "ops", "classes", "manual_seed", "seed", "initial_seed",
            "use_deterministic_algorithms", "set_printoptions", "set_rng_state", "get_rng_state", "cond",
            "set_float32_matmul_precision", "set_flush_denormal"}
_METHOD_DENY = {"apply_", "map_", "map2_", "register_hook", "register_post_accumulate_grad_hook", "backward",
                "tolist", "numpy", "share_memory_", "pin_memory", "storage", "untyped_storage", "data_ptr"}
_ATTRS = {"device", "dtype", "shape", "T", "mT", "H", "mH", "ndim", "data", "real", "imag"}
_TORCH_CONST = re.compile(r"^torch\.[a-z][a-z0-9_]*$")
_MODULE = re.compile(r"^torch\.nn\.([A-Z][A-Za-z0-9]*)$")


class CallError(ValueError):
    """The recorded call cannot be written as code (malformed, or a target that is not allowed)."""


@dataclass
class Rendered:
    expr: str
    init: list = field(default_factory=list)
    reads_input: bool = False  # the expression reads the model's input (not an input of the node)


class _Renderer:
    def __init__(self, call, attr, refs, ranks, model_input, tensor_attr, lit):
        self.call = call
        self.attr = attr
        self.refs = refs
        self.ranks = ranks
        self.model_input = model_input
        self.tensor_attr = tensor_attr  # (owner node id or None, j) -> attribute name
        self.lit = lit
        self.out = Rendered("")

    def run(self) -> Rendered:
        c = self.call
        if not isinstance(c, dict):
            raise CallError("not a JSON object")
        if c.get("kind") == "module":
            m = _MODULE.match(str(c.get("target", "")))
            if not m:
                raise CallError(f"module class {str(c.get('target'))[:60]!r} is not a torch.nn class")
            init = c.get("init") or {}
            if not isinstance(init, dict) or not all(isinstance(k, str) and k.isidentifier() for k in init):
                raise CallError("bad constructor arguments")
            ctor = ", ".join(f"{k}={self._const(v)}" for k, v in init.items())
            self.out.init.append(f"self.{self.attr} = nn.{m.group(1)}({ctor})")
            self.out.expr = f"self.{self.attr}({self._arglist(c)})"
        else:
            self.out.expr = self._call(c, 0)
        return self.out

    def _arglist(self, c) -> str:
        args, kwargs = c.get("args", []), c.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise CallError("args must be a list and kwargs an object")
        if not all(isinstance(k, str) and k.isidentifier() for k in kwargs):
            raise CallError("a keyword that is not a Python name")
        return ", ".join([self._el(a) for a in args] + [f"{k}={self._el(v)}" for k, v in kwargs.items()])

    def _call(self, c, depth) -> str:
        if not isinstance(c, dict) or depth > 8:
            raise CallError("a malformed nested call")
        kind, target = c.get("kind"), str(c.get("target", ""))
        args = c.get("args", [])
        if not isinstance(args, list):
            raise CallError("args must be a list")
        if kind == "method":
            if not target.isidentifier() or target.startswith("_") or target in _METHOD_DENY or not args:
                raise CallError(f"method {target[:40]!r} is not allowed")
            rest = dict(c, args=args[1:])
            return f"{self._el(args[0], depth)}.{target}({self._arglist(rest)})"
        if kind != "function":
            raise CallError(f"kind {str(kind)[:20]!r}")
        if target.startswith("operator."):
            name = target[len("operator."):]
            if name in _OPERATORS and len(args) == 2 and not c.get("kwargs"):
                return f"({self._el(args[0], depth)} {_OPERATORS[name]} {self._el(args[1], depth)})"
            if name in _UNARY and len(args) == 1 and not c.get("kwargs"):
                return f"({_UNARY[name]}{self._el(args[0], depth)})"
            if name == "getitem" and len(args) == 2 and not c.get("kwargs"):
                return f"{self._el(args[0], depth)}[{self._index(args[1], depth)}]"
            raise CallError(f"operator {name[:20]!r}")
        if target == "builtins.getattr":
            if len(args) != 2 or args[1] not in _ATTRS:
                raise CallError("getattr of an attribute that is not allowed")
            return f"{self._el(args[0], depth)}.{args[1]}"
        m = _FUNCTION.match(target)
        if not m or (m.group(2) or m.group(3)) in _NOT_OPS or (m.group(2) or "").startswith("set_"):
            raise CallError(f"function {target[:60]!r} is not allowed")
        return f"{target}({self._arglist_at(c, depth)})"

    def _arglist_at(self, c, depth) -> str:
        args, kwargs = c.get("args", []), c.get("kwargs", {})
        if not isinstance(kwargs, dict) or not all(isinstance(k, str) and k.isidentifier() for k in kwargs):
            raise CallError("bad kwargs")
        return ", ".join([self._el(a, depth) for a in args] + [f"{k}={self._el(v, depth)}" for k, v in kwargs.items()])

    def _index(self, idx, depth) -> str:
        """A subscript written as Python writes it (x[:, :3], x[..., 0])."""
        items = idx["tuple"] if isinstance(idx, dict) and "tuple" in idx and isinstance(idx["tuple"], list) else None
        if items is None:
            return self._slice(idx, depth) if isinstance(idx, dict) and "slice" in idx else self._el(idx, depth)
        parts = [self._slice(i, depth) if isinstance(i, dict) and "slice" in i else self._el(i, depth) for i in items]
        return ", ".join(parts) + ("," if len(parts) == 1 else "") if parts else "()"

    def _slice(self, s, depth) -> str:
        v = s["slice"]
        if not isinstance(v, list) or len(v) != 3:
            raise CallError("a malformed slice")
        a, b, st = ("" if x is None else self._el(x, depth) for x in v)
        return f"{a}:{b}" + (f":{st}" if st else "")

    def _const(self, v) -> str:
        """A constructor argument: constants only."""
        if isinstance(v, dict) and set(v) == {"tuple"} and isinstance(v["tuple"], list):
            return self.lit(tuple(_plain(x) for x in v["tuple"]))
        if isinstance(v, (dict, list)):
            raise CallError("a constructor argument that is not a constant")
        return self.lit(v)

    def _el(self, e, depth=0) -> str:
        if e is None or isinstance(e, (bool, int, float, str)):
            return self.lit(e)
        if isinstance(e, list):
            return "[" + ", ".join(self._el(x, depth) for x in e) + "]"
        if not isinstance(e, dict):
            raise CallError("a malformed element")
        if "in" in e:
            return self._input(e)
        if "input" in e:
            self.out.reads_input = True
            return self.model_input
        if "tensor" in e:
            j = e["tensor"]
            if isinstance(j, bool) or not isinstance(j, int) or j < 0:
                raise CallError("a bad tensor index")
            owner = e.get("shared")
            if owner is not None and not isinstance(owner, str):
                raise CallError("a bad shared tensor owner")
            return f"self.{self.tensor_attr(owner, j)}"
        if "call" in e:
            return self._call(e["call"], depth + 1)
        if "tuple" in e and isinstance(e["tuple"], list):
            items = [self._el(x, depth) for x in e["tuple"]]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if "slice" in e:
            return f"slice({', '.join(self._el(x, depth) for x in _three(e['slice']))})"
        if e.get("ellipsis") is True:
            return "..."
        if "torch" in e:
            if not isinstance(e["torch"], str) or not _TORCH_CONST.match(e["torch"]):
                raise CallError("a bad torch constant")
            return e["torch"]
        if "float" in e:
            if e["float"] not in ("inf", "-inf", "nan"):
                raise CallError("a bad float")
            return f"float({e['float']!r})"
        if e.get("device") is True:
            if self.refs:
                return f"{self.refs[0]}.device"
            self.out.reads_input = True
            return f"{self.model_input}.device"
        raise CallError("an unknown element")

    def _input(self, e) -> str:
        k = e["in"]
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(self.refs):
            raise CallError(f"input {k!r} does not exist")
        expr = self.refs[k]
        if "reshape" in e:
            dims = e["reshape"]
            if not isinstance(dims, list) or not dims or not all(isinstance(d, int) and not isinstance(d, bool)
                                                                   and d >= -1 for d in dims):
                raise CallError("a bad reshape")
            return f"{expr}.reshape({', '.join(map(str, dims))})"
        dmap = e.get("dmap")
        if dmap is None:
            return expr
        r = self.ranks[k]
        if not isinstance(dmap, list) or not all(isinstance(d, int) and 0 <= d < r for d in dmap) \
                or len(set(dmap)) != len(dmap):
            raise CallError("a bad dmap")
        missing = [d for d in range(r) if d not in dmap]
        if missing:
            expr = f"{expr}.squeeze({self.lit(tuple(missing))})"
        kept = [d for d in range(r) if d in dmap]
        perm = [kept.index(d) for d in dmap]
        if perm != list(range(len(perm))):
            expr = f"{expr}.permute({', '.join(map(str, perm))})"
        return expr


def _three(v):
    if not isinstance(v, list) or len(v) != 3:
        raise CallError("a malformed slice")
    return v


def _plain(v):
    if isinstance(v, dict) and set(v) == {"tuple"} and isinstance(v["tuple"], list):
        return tuple(_plain(x) for x in v["tuple"])
    if isinstance(v, (dict, list)):
        raise CallError("a constructor argument that is not a constant")
    return v


def parse(text: str) -> dict:
    try:
        c = json.loads(text)
    except (TypeError, ValueError) as err:
        raise CallError(f"not JSON ({err})") from None
    if not isinstance(c, dict):
        raise CallError("not a JSON object")
    return c


def tensor_init(spec, name: str, lit) -> str:
    """The __init__ line creating an owned tensor: an nn.Parameter or a buffer of its shape/dtype."""
    if not isinstance(spec, dict):
        raise CallError("a malformed tensor")
    shape, dtype = spec.get("shape"), spec.get("dtype", "torch.float32")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in shape):
        raise CallError("a bad tensor shape")
    if not isinstance(dtype, str) or not _TORCH_CONST.match(dtype):
        raise CallError("a bad tensor dtype")
    floating = dtype in ("torch.float32", "torch.float16", "torch.bfloat16", "torch.float64", "torch.float")
    make = f"torch.{'ones' if floating else 'zeros'}({lit(tuple(shape))}, dtype={dtype})"
    if spec.get("param"):
        grad = bool(spec.get("grad", True)) and floating
        return f"self.{name} = nn.Parameter({make}" + (")" if grad else ", requires_grad=False)")
    holder, _, leaf = name.rpartition(".")
    return f"self.{holder}.register_buffer({leaf!r}, {make})" if holder else f"self.register_buffer({name!r}, {make})"


def render(call: dict, attr: str, refs: list, ranks: list, model_input: str, tensor_attr, lit) -> Rendered:
    """``call`` (parsed) as an expression plus the __init__ lines it needs. ``tensor_attr(owner, j)``
    names (and creates on first use) tensor j of node ``owner`` (None: this node)."""
    try:
        return _Renderer(call, attr, refs, ranks, model_input, tensor_attr, lit).run()
    except (KeyError, TypeError, AttributeError) as err:
        raise CallError(f"malformed ({type(err).__name__})") from None

"""The one registry of layer types.

Each layer type declares, in one place, its editable properties, its input arity, its shape rule,
its parameters, its FLOPs and its memory rule (what PyTorch allocates, keeps for backward and
allocates again in backward). The palette, the inspector, the design file format, the importers
and the engine all read this registry, so adding a layer type touches one module under
``memdesigner/model/layers/``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

FAMILIES = (
    "inputs",
    "convolution",
    "dense",
    "pooling",
    "normalization",
    "activation",
    "merge",
    "tensor",
    "recurrent",
    "attention",
    "output",
    "generic",
)


class LayerError(ValueError):
    """A bad configuration of one node; ``field`` names the property (or 'inputs')."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


MAX_INT = 2**62  # no tensor dimension, stride or count comes near; keeps every product a finite float
# what no tensor's element count nor a count setting may reach (2^3321 < 10^1000): absurd sizes are
# estimated with a warning, but every byte total made from them must stay an int Python prints (4,300 digits)
MAX_NUMBER_BITS = 3321


def _strict_int(name: str, value) -> int:
    """An integer from an int, an integral float or a decimal string; booleans, fractions,
    NaN/infinity and absurd magnitudes are refused."""
    if isinstance(value, bool):
        raise TypeError
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise TypeError
    elif isinstance(value, str):
        value = value.strip()
    elif not isinstance(value, int):
        raise TypeError
    v = int(value)
    if abs(v) > MAX_INT:
        raise LayerError(name, f"{v:.3g} is too large" if v.bit_length() < 1000 else "the number is too large")
    return v


@dataclass(frozen=True)
class Prop:
    """An editable property: its kind drives the inspector widget and the file schema.

    kinds: int, float, bool, choice, str, shape (tuple of positive ints), ints (tuple of ints,
    e.g. a permutation), pad (int or SAME/VALID), pair (int or two ints).
    """

    name: str
    kind: str
    default: Any
    min: float | None = None
    max: float | None = None
    choices: tuple = ()
    doc: str = ""
    optional: bool = False  # None allowed (e.g. Linear.out_features is never optional)

    def coerce(self, value: Any) -> Any:
        """Turn a value from a file or an editor into the canonical type, or raise LayerError."""
        if value is None:
            if self.optional:
                return None
            raise LayerError(self.name, "a value is required")
        k = self.kind
        try:
            if k == "int":
                v = _strict_int(self.name, value)
                self._check_range(v)
                return v
            if k == "float":
                if isinstance(value, bool):
                    raise TypeError
                v = float(value)
                if not math.isfinite(v):
                    raise LayerError(self.name, f"{value!r} is not a finite number")
                self._check_range(v)
                return v
            if k == "bool":
                if not isinstance(value, bool):
                    raise TypeError
                return value
            if k == "choice":
                if value not in self.choices:
                    raise LayerError(self.name, f"{value!r} is not one of {', '.join(map(str, self.choices))}")
                return value
            if k == "str":
                return str(value)
            if k in ("shape", "ints"):
                if isinstance(value, str):
                    value = [p for p in value.replace("x", ",").replace("×", ",").split(",") if p.strip()]
                if isinstance(value, int):
                    value = [value]
                if not isinstance(value, (list, tuple)):
                    raise TypeError
                v = tuple(_strict_int(self.name, x) for x in value)
                if k == "shape":
                    if not v:
                        raise LayerError(self.name, "a shape needs at least one dimension")
                    for d in v:
                        if d <= 0:
                            raise LayerError(self.name, f"dimension {d} must be positive")
                return v
            if k == "pad":
                if isinstance(value, str):
                    up = value.strip().upper()
                    if up in ("SAME", "VALID"):
                        return up
                    value = int(value) if up.lstrip("-").isdigit() else value
                    if isinstance(value, str):
                        raise LayerError(self.name, f"{value!r} is not a number, SAME or VALID")
                return self._pair(value, allow_zero=True)
            if k == "pair":
                return self._pair(value, allow_zero=False)
        except LayerError:
            raise
        except (TypeError, ValueError, OverflowError):
            shown = repr(value)
            shown = shown if len(shown) <= 40 else shown[:36] + " ..."
            raise LayerError(self.name, f"{shown} is not a valid {k}") from None
        raise LayerError(self.name, f"unknown property kind {k}")

    def _pair(self, value, allow_zero: bool):
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, (int, float)):
            vals = (_strict_int(self.name, value),)
        elif isinstance(value, (list, tuple)) and value:
            vals = tuple(_strict_int(self.name, x) for x in value)
        else:
            raise TypeError
        lo = 0 if allow_zero else 1
        for x in vals:
            if x < lo:
                raise LayerError(self.name, f"{x} must be {'>= 0' if allow_zero else 'positive'}")
        if len(vals) == 1:
            return vals[0]
        return vals

    def _check_range(self, v):
        if self.min is not None and v < self.min:
            raise LayerError(self.name, f"{v} is below the minimum {self.min:g}")
        if self.max is not None and v > self.max:
            raise LayerError(self.name, f"{v} is above the maximum {self.max:g}")


@dataclass(frozen=True)
class ParamSpec:
    """A parameter or buffer tensor of a layer (shape without batch)."""

    name: str
    shape: tuple
    kind: str = "weight"  # weight | bias | buffer
    dtype: str | None = None  # None: the model's compute dtype; buffers may say int64
    frozen: bool = False  # a parameter with requires_grad=False (a frozen layer, a LoRA base)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def trainable(self) -> bool:
        """A parameter (not a buffer), frozen or not: it counts in the parameter total."""
        return self.kind != "buffer"

    @property
    def requires_grad(self) -> bool:
        """Autograd makes its gradient and the optimizer keeps state for it."""
        return self.kind != "buffer" and not self.frozen


@dataclass(frozen=True)
class TensorSpec:
    """A per-sample tensor: shape without the batch dimension; kind float|int64|bool."""

    shape: tuple
    kind: str = "float"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class ShapeCtx:
    """What a shape / parameter / FLOP rule sees."""

    props: dict
    inputs: list  # list[TensorSpec]
    name: str = ""

    def __getitem__(self, key):
        return self.props[key]

    @property
    def x(self) -> TensorSpec:
        return self.inputs[0]


@dataclass(frozen=True)
class LayerType:
    name: str
    family: str
    doc: str
    props: tuple = ()
    min_inputs: int = 1
    max_inputs: int | None = 1  # None: any number
    shape: Callable[[ShapeCtx], list] | None = None  # -> list[TensorSpec]; raises LayerError
    params: Callable[[ShapeCtx], list] = lambda c: []  # -> list[ParamSpec]
    flops: Callable[[ShapeCtx, list], int] = lambda c, outs: 0  # per sample, forward
    memory: Callable | None = None  # (MemCtx) -> OpMem, see model/oprules.py
    n_outputs: int = 1
    input_names: tuple = ()  # port labels, e.g. ("query", "key", "value")
    # torch module class names and function / method / aten names that map onto this type; a type
    # with from_torch_module / from_torch_call is imported by those rules (model/torchmap.py),
    # for the others the names are the importer's hints (its own logic maps them)
    torch_ops: tuple = ()
    from_torch_module: Callable | None = None  # (torchmap.TorchCall of an nn.Module) -> props | None
    from_torch_call: Callable | None = None  # (torchmap.TorchCall of a function / method / aten op) -> props | None
    # the imported node keeps its input's real layout (element-wise and last-dim ops), so the PyTorch
    # importer's dim map passes through; otherwise the output is laid out as the design has it
    keeps_layout: bool = False
    keras_activations: tuple = ()  # Keras activation names (Dense(activation=...), Activation(...))
    from_keras: Callable | None = None  # (torchmap.KerasCall) -> props; None: the type's defaults
    # (name in torch_ops, ((prop, value), ...)): the props a torch op implies (F.mse_loss: kind mse)
    torch_props: tuple = ()
    # ONNX op types (or importer-fused patterns, e.g. "MatMul+Add") this type imports, and the rule
    # (OnnxCtx) -> props dict, or None when the node is not this type (Conv is Conv1d or Conv2d);
    # raising LayerError imports the node as Generic with the reason. See model/onnxmap.py.
    onnx_ops: tuple = ()
    from_onnx: Callable | None = None
    aliases: tuple = ()  # other names a user or a Keras file may use
    search_words: tuple = ()  # what people type to find it in the palette ("fc", "bn"); need not be unique
    keeps_for_backward: str = ""  # one line for the inspector / docs: what autograd saves
    # PyTorch export: (exportspec.ExportCtx) -> exportspec.TorchExport, for types the exporter's own
    # table does not write; or, for a type that has no export, the reason (shown by the exporter)
    to_torch: Callable | None = None
    no_torch_export: str = ""
    # nn.Module classes named in torch_ops that the PyTorch importer keeps whole: (module) -> props
    from_torch: Callable | None = None
    no_import: str = ""  # why no importer maps onto this type (torch_ops / onnx_ops / aliases empty)
    # offered in the palette; False for types the program places itself (block ports and instances,
    # which Group into block makes; LoRA casts and QLoRA weights, which the estimate inserts)
    in_palette: bool = True

    def prop(self, name: str) -> Prop:
        for p in self.props:
            if p.name == name:
                return p
        raise KeyError(name)

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.props}

    def coerce_props(self, values: dict) -> dict:
        """Fill defaults, coerce every value; LayerError names the first bad field."""
        known = {p.name for p in self.props}
        for k in values:
            if k not in known:
                raise LayerError(k, f"{self.name} has no property {k!r}")
        out = {}
        for p in self.props:
            out[p.name] = p.coerce(values.get(p.name, p.default))
        return out


_REGISTRY: dict[str, LayerType] = {}
_ALIASES: dict[str, str] = {}


def register(lt: LayerType) -> LayerType:
    if lt.name in _REGISTRY:
        raise ValueError(f"layer type {lt.name} registered twice")
    if lt.family not in FAMILIES:
        raise ValueError(f"unknown family {lt.family}")
    _REGISTRY[lt.name] = lt
    for a in lt.aliases:
        _ALIASES[a.lower()] = lt.name
    return lt


def get(name: str) -> LayerType:
    if name in _REGISTRY:
        return _REGISTRY[name]
    alias = _ALIASES.get(name.lower())
    if alias:
        return _REGISTRY[alias]
    raise KeyError(name)


def canonical(name: str) -> str | None:
    """The registered type name itself, or None. Aliases are search words and importer names:
    one may mean different props (``DepthwiseConv2d`` is Conv2d with groups = channels), so a
    design file must name the type itself."""
    return name if name in _REGISTRY else None


def has(name: str) -> bool:
    try:
        get(name)
        return True
    except KeyError:
        return False


def all_types() -> Sequence[LayerType]:
    return list(_REGISTRY.values())


def onnx_index() -> dict[str, list[LayerType]]:
    """ONNX op type -> the layer types that declare it, in registration order."""
    out: dict[str, list[LayerType]] = {}
    for lt in all_types():
        for op in lt.onnx_ops:
            out.setdefault(op, []).append(lt)
    return out


_INDEXES: dict[tuple, dict] = {}  # (index, types registered): an importer asks once per traced op


def _index(kind: str, build: Callable[[], dict]) -> dict:
    key = (kind, len(_REGISTRY))
    if key not in _INDEXES:
        _INDEXES[key] = build()
    return _INDEXES[key]


def torch_module_index() -> dict[str, LayerType]:
    """nn.Module class name -> the layer type whose from_torch_module maps it."""
    return _index("module", lambda: {op: lt for lt in all_types() if lt.from_torch_module for op in lt.torch_ops})


def torch_call_index() -> dict[str, LayerType]:
    """Function / method / aten op name -> the layer type whose from_torch_call maps it."""
    return _index("call", lambda: {op: lt for lt in all_types() if lt.from_torch_call for op in lt.torch_ops})


def keras_activation_index() -> dict[str, LayerType]:
    """Keras activation name (lower case) -> the layer type it imports as."""
    return _index("keras", lambda: {a.lower(): lt for lt in all_types() for a in lt.keras_activations})


def by_family() -> dict[str, list[LayerType]]:
    out: dict[str, list[LayerType]] = {f: [] for f in FAMILIES}
    for lt in all_types():
        out[lt.family].append(lt)
    return {k: v for k, v in out.items() if v}


@dataclass
class Issue:
    """An error or warning attached to a node."""

    node_id: str
    field: str
    message: str
    severity: str = "error"
    pending: bool = False  # a layer with no input connected yet: work to do, not a mistake (shown calmly)

    def __str__(self) -> str:
        return f"{self.node_id}.{self.field}: {self.message}"


__all__ = [
    "Prop",
    "ParamSpec",
    "TensorSpec",
    "ShapeCtx",
    "LayerType",
    "LayerError",
    "Issue",
    "register",
    "get",
    "has",
    "canonical",
    "all_types",
    "by_family",
    "onnx_index",
    "torch_module_index",
    "torch_call_index",
    "keras_activation_index",
    "FAMILIES",
    "field",
]

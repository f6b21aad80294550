"""The values an fx graph carries while the PyTorch importer builds a design (a tensor as it
appears in the design, a tuple result, a parameter reached by get_attr, any other Python value),
the build's state, and the import errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memdesigner.model.design import Design
from memdesigner.model.registry import TensorSpec

META_BATCH = 2


class TorchImportError(ValueError):
    """The module could not be traced or the factory could not be loaded."""


class NeedsInputShape(TorchImportError):
    """The factory gave no input shape. ``str()`` is the command line's wording (pass
    --input-shape); ``what`` says only what is missing, for a window to add its own words."""

    def __init__(self, what: str):
        super().__init__(f"{what}; pass --input-shape")
        self.what = what


@dataclass
class Val:
    """A tensor of the traced graph as it appears in the design.

    The design keeps the batch first and may keep singleton dims that the real tensor squeezed
    (unbind); ``dmap[i]`` is the design dimension (batch = 0) of real dimension ``i``.
    """

    nid: str
    port: int
    spec: TensorSpec  # design per-sample shape
    dmap: tuple  # real dim -> design dim

    @property
    def drank(self) -> int:
        return len(self.spec.shape) + 1

    def ddim(self, d: int, real_rank: int) -> int:
        if d < 0:
            d += real_rank
        return self.dmap[d]

    @property
    def identity(self) -> bool:
        return self.dmap == tuple(range(self.drank))


@dataclass
class Multi:
    """A tuple result (LSTM, MultiheadAttention, split): getitem picks an element."""

    items: list


@dataclass
class ParamVal:
    """A parameter reached through get_attr (class token, position embedding, F.linear weights)."""

    name: str
    shape: tuple
    expanded: bool = False
    # (g's name, dim): the weight weight_norm computes from this v and that g (_torch_weight_norm)
    weight_norm: tuple | None = None


class Other:
    """A non-tensor Python value (a size, a shape, a constant)."""

    def __init__(self, value=None):
        self.value = value


@dataclass
class _State:
    design: Design
    torch: Any
    module: Any
    warnings: list = field(default_factory=list)
    vals: dict = field(default_factory=dict)  # fx node -> Val | Multi | ParamVal | Other
    used_ids: set = field(default_factory=set)
    used_params: set = field(default_factory=set)  # parameter names mapped onto design params
    depth: dict = field(default_factory=dict)  # nid -> layout depth
    param_owner: dict = field(default_factory=dict)  # id(Parameter) -> "node_id.param" that holds it
    generic_owner: dict = field(default_factory=dict)  # module path -> Generic node carrying its params
    gm: Any = None
    generic_fx: dict = field(default_factory=dict)  # fx node -> [fx input node of each design input]
    call_tensors: dict = field(default_factory=dict)  # id(tensor) -> (Generic node id, index) its call owns
    held: dict = field(default_factory=dict)  # nid -> tuple index: a module output only a Python name holds
    upcasts: dict = field(default_factory=dict)  # module call chain -> Val its last literal fp32 upcast cast


def _sanitize(name: str) -> str:
    return "".join(c if (c.isalnum() or c in "._-") else "_" for c in name) or "node"


def get_attr(gm, target):
    """The submodule, parameter or buffer a graph's get_attr node names (``layers.0.weight``)."""
    obj = gm
    for part in str(target).split("."):
        obj = getattr(obj, part)
    return obj

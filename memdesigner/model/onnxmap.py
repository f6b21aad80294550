"""What a layer type's ONNX rule sees, and the attribute arithmetic the rules share.

The ONNX importer (importers/onnx_import.py) hands each node, after folding shape subgraphs into
constants and fusing split patterns (MatMul+Add, x*Sigmoid(x), the Erf form of GELU), to the
``from_onnx`` rule of every layer type whose ``onnx_ops`` name its op. A rule returns the design
node's props, None when the node is another type's (Conv is Conv1d or Conv2d by rank), or raises
LayerError when the node is its type in a configuration memdesigner cannot model.

Shapes here are the real ONNX shapes, batch first. The design keeps the batch first too, and may
keep singleton dims that the real tensor squeezed, so a real axis is turned into a design dim with
``ctx.ddim``. No onnx import here: values are numpy arrays or plain tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memdesigner.model.registry import LayerError


@dataclass
class OnnxIn:
    """One input of an ONNX node: a tensor of the design, a parameter (initializer), a folded
    constant, or absent (an empty input name)."""

    kind: str  # tensor | param | const | none
    shape: tuple = ()  # real shape, batch first for tensors
    value: object = None  # numpy array for constants
    dmap: tuple = ()  # tensors: real dim -> design dim
    elem: str = "float"  # float | int64 | bool
    drank: int = 0  # tensors: rank in the design (batch included)
    src_numel: int = 0  # parameters: elements of the initializers behind it (a Gather of rows has fewer)


@dataclass
class OnnxCtx:
    op: str
    name: str
    attrs: dict
    inputs: list  # list[OnnxIn]
    out_shapes: list  # real output shapes
    batch: int = 2
    out_dmap: tuple | None = None  # a rule may set the output's layout (default: the first input's)
    tensor_inputs: list | None = None  # which inputs feed the design node (default: every tensor)

    def attr(self, key, default=None):
        return self.attrs.get(key, default)

    def x(self, i: int = 0) -> OnnxIn:
        return self.inputs[i] if i < len(self.inputs) else OnnxIn("none")

    def tensor(self, i: int = 0) -> OnnxIn:
        v = self.x(i)
        if v.kind != "tensor":
            raise LayerError("inputs", f"input {i} of {self.op} is not a tensor of the network")
        return v

    def param(self, i: int) -> tuple | None:
        """The shape of input i if it is a parameter (an initializer), else None."""
        v = self.x(i)
        return tuple(v.shape) if v.kind == "param" else None

    def const(self, i: int, default=None):
        v = self.x(i)
        if v.kind == "const":
            return v.value
        if v.kind == "none" and default is not None:
            return default
        raise LayerError("inputs", f"input {i} of {self.op} must be a constant")

    def scalar(self, i: int, default=None) -> float:
        import numpy as np

        v = self.x(i)
        if v.kind == "none" and default is not None:
            return default
        arr = np.asarray(self.const(i))
        if arr.size != 1:
            raise LayerError("inputs", f"input {i} of {self.op} must be a single number")
        return float(arr.reshape(-1)[0])

    def rank(self, i: int = 0) -> int:
        return len(self.x(i).shape)

    def ddim(self, axis: int, i: int = 0) -> int:
        """The design dimension (batch = 0) of real axis ``axis`` of input i."""
        v = self.tensor(i)
        r = len(v.shape)
        a = axis + r if axis < 0 else axis
        if not 0 <= a < r:
            raise LayerError("axis", f"{axis} is outside a {r}-D tensor")
        d = v.dmap[a]
        if d == 0:
            raise LayerError("axis", "the op works across the batch dimension")
        return d


def f32(v) -> float:
    """An ONNX float attribute (float32) as the decimal a model's code wrote (1e-05, not
    9.99999974e-06)."""
    return float(f"{float(v):.7g}")


def pair(values, default=1):
    """ONNX per-dim lists (kernel_shape, strides, dilations) as memdesigner's int-or-tuple."""
    if values is None:
        return default
    vals = tuple(int(v) for v in values)
    if not vals:
        return default
    return vals[0] if len(set(vals)) == 1 else vals


def pads(ctx: OnnxCtx, n: int):
    """ONNX pads (begin..., end...) or auto_pad as memdesigner padding (symmetric, SAME, VALID)."""
    auto = ctx.attr("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        return "SAME"
    if auto == "VALID":
        return 0
    p = list(ctx.attr("pads", [0] * (2 * n)))
    begin, end = p[:n], p[n:]
    if begin != end:
        raise LayerError("padding", f"asymmetric padding {p} (begin {begin}, end {end})")
    return pair(begin, 0)


def spatial_rank(ctx: OnnxCtx) -> int:
    return len(ctx.x(0).shape) - 2


@dataclass
class Alias:
    """A rule's answer for an op that is no new node in the design: the input under a new layout."""

    dmap: tuple
    what: str = ""


__all__ = ["OnnxCtx", "OnnxIn", "Alias", "f32", "pair", "pads", "spatial_rank", "field"]

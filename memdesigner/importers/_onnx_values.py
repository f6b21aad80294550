"""The values the ONNX importer passes between nodes (shared by the importer and its fusions)."""

from __future__ import annotations

from dataclasses import dataclass

from memdesigner.model.registry import TensorSpec

_FLOAT = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
_BOOL = 9


# ----------------------------------------------------------------------------------------------
@dataclass
class Val:
    """A tensor of the design; ``dmap[i]`` is the design dim (batch = 0) of real dim ``i``."""

    nid: str
    port: int
    spec: TensorSpec
    dmap: tuple

    @property
    def drank(self) -> int:
        return len(self.spec.shape) + 1


@dataclass
class Const:
    value: object  # numpy array


@dataclass
class PVal:
    """A parameter: an initializer, or a layout op on initializers (Transpose of a weight)."""

    shape: tuple
    sources: frozenset


@dataclass
class RnnSeq:
    """The Y output of an ONNX LSTM/GRU, (T, dirs, B, H): a Squeeze (one direction) or a
    Transpose + Reshape (two) turns it into the design node's batch-first sequence."""

    nid: str
    spec: TensorSpec
    dirs: int
    transposed: bool = False


class Unknown:
    """A value no rule produced (an output of an unmapped op's extra port, a non-tensor)."""


def _kind(elem: int) -> str:
    return "float" if elem in _FLOAT else ("bool" if elem == _BOOL else "int64")

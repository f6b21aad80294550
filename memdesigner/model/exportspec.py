"""What a layer registration hands the PyTorch exporter (exporters/torch_code.py) to write itself:
the lines for ``__init__`` and the forward expression, plus helper classes the generated file
needs (a block PyTorch has no module for). Pure data: no torch here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class ExportCtx:
    """One node, as the exporter sees it: ``attr`` its attribute name on the model, ``inputs`` the
    Python expressions of its inputs, ``in_shapes`` / ``out_shapes`` per sample, ``props`` its
    coerced properties and ``lit(name)`` a property as a Python literal."""

    attr: str
    inputs: list
    in_shapes: list
    out_shapes: list
    props: dict
    lit: Callable[[str], str]
    value: Callable[[object], str] = repr  # any value as a Python literal (the exporter's checked one)

    @property
    def x(self) -> str:
        return self.inputs[0]


@dataclass
class TorchExport:
    forward: str  # an expression of the inputs; a tuple when outputs > 1
    init: list = field(default_factory=list)  # lines of __init__ (self.<attr> = ...)
    helpers: dict = field(default_factory=dict)  # class name -> source, written once before the model
    outputs: int = 1


def _per_dim(v, n):
    if isinstance(v, (tuple, list)):
        return tuple(v) if len(v) == n else tuple(v) * n
    return (v,) * n


def same_padding(props: dict, in_spatial, n: int):
    """PyTorch padding for a SAME / VALID design (symmetric; SAME with an odd total pads one less
    on the left, which PyTorch cannot express without F.pad: we pad the larger half symmetrically)."""
    pad = props["padding"]
    if pad == "VALID":
        return 0
    if pad != "SAME":
        return pad
    k = _per_dim(props["kernel"], n)
    s = _per_dim(props.get("stride", 1) or 1, n)
    d = _per_dim(props.get("dilation", 1), n)
    out = []
    for i in range(n):
        o = -(-in_spatial[i] // s[i])
        total = max((o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in_spatial[i], 0)
        out.append(total // 2 + (total % 2))
    if all(p == out[0] for p in out):
        return out[0]
    return tuple(out)


def module_export(e: ExportCtx, constructor: str) -> TorchExport:
    """A layer written as a submodule: ``self.<attr> = <constructor>`` and ``self.<attr>(x)``."""
    return TorchExport(f"self.{e.attr}({e.x})", init=[f"self.{e.attr} = {constructor}"])


class ExportUnsupported(ValueError):
    """A configuration of the type that has no PyTorch export (the message says why)."""


__all__ = ["ExportCtx", "TorchExport", "ExportUnsupported", "module_export", "same_padding"]

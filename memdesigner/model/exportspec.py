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

    @property
    def x(self) -> str:
        return self.inputs[0]


@dataclass
class TorchExport:
    forward: str  # an expression of the inputs; a tuple when outputs > 1
    init: list = field(default_factory=list)  # lines of __init__ (self.<attr> = ...)
    helpers: dict = field(default_factory=dict)  # class name -> source, written once before the model
    outputs: int = 1


def module_export(e: ExportCtx, constructor: str) -> TorchExport:
    """A layer written as a submodule: ``self.<attr> = <constructor>`` and ``self.<attr>(x)``."""
    return TorchExport(f"self.{e.attr}({e.x})", init=[f"self.{e.attr} = {constructor}"])


class ExportUnsupported(ValueError):
    """A configuration of the type that has no PyTorch export (the message says why)."""


__all__ = ["ExportCtx", "TorchExport", "ExportUnsupported", "module_export"]

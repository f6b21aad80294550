"""What a layer type's PyTorch and Keras import rules see, as plain values (no torch, no keras here).

The PyTorch importer (importers/_torch_map_modules.py, _torch_map_ops.py) hands each traced call
whose name is in a type's ``torch_ops`` to that type's rule: a module call (``nn.Tanh()``) to
``from_torch_module``, a function, tensor method or aten op (``F.tanh``, ``x.tanh_()``,
``aten::tanh``; fx, torch.export and the dispatch recorder all end in one fx graph) to
``from_torch_call``. The Keras importer hands an activation named in ``keras_activations`` to
``from_keras``. A rule returns the node's props, None when the call is not this type (the importer
goes on to a Generic node), ``PASS`` when the call is no node (dropout with training=False), or
raises LayerError to import it as Generic with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

PASS = object()  # a rule's answer: the call changes nothing in the design (its input passes through)


@dataclass
class TorchCall:
    """One traced call. ``op`` is the module's class name or the call's name (``relu_``); ``args``
    and ``kwargs`` are the call's arguments, input first, as plain Python values (tensors are
    opaque); ``module`` is the nn.Module of a module call (read its attributes, duck-typed);
    ``kind`` is call_module, call_function or call_method; ``ddim`` turns a real dim of the input
    into the design's; ``where`` names the call in warnings."""

    op: str
    kind: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    module: object = None
    ddim: Callable[[int], int] = lambda d: d
    where: str = ""
    warnings: list = field(default_factory=list)

    def arg(self, i: int, name: str, default=None):
        """Positional argument ``i`` (the input is 0), else keyword ``name``, else ``default``."""
        if len(self.args) > i:
            return self.args[i]
        return self.kwargs.get(name, default)

    def warn(self, message: str) -> None:
        self.warnings.append(f"{self.where}: {message}")

    @property
    def from_torch_nn(self) -> bool:
        """The module is PyTorch's own class (not a user's or transformers' class of that name)."""
        return type(self.module).__module__.startswith("torch.nn.")


def size_arg(v):
    """A torch size argument (3, (3, 3), [1, 2]) as memdesigner's int-or-tuple."""
    if isinstance(v, (tuple, list)):
        v = tuple(int(x) for x in v)
        return v[0] if len(set(v)) == 1 else v
    return int(v)


@dataclass
class KerasCall:
    """One Keras activation (or layer) config: ``name`` as written (``leaky_relu``), ``config`` the
    layer's config dict, ``axis(a)`` a Keras axis (batch = 0) as the design's dim of the input."""

    name: str
    config: dict = field(default_factory=dict)
    axis: Callable[[int], int] = lambda a: a


__all__ = ["PASS", "TorchCall", "KerasCall", "size_arg"]

"""Hugging Face's losses upcast the logits (``logits = logits.float()`` in transformers/loss/
loss_utils.py, reached through ``self.loss_function(...)``): with bf16 weights that is a fp32 copy
of the logits beside the fp32 log-probabilities. The fp32 trace sees no conversion, so the
importer maps that one cast onto ToDtype float32 (a view when the logits already are fp32). Other
casts stay as traced: ``x.to(input_dtype)`` names a variable the trace captured as float32, and
``x.float()`` in a model's own code is often undone later by ``.type_as(x)``."""

from __future__ import annotations

import re

_FRAME = re.compile(r'\s*File "([^"]+)", line (\d+), in (\w+)')


def _innermost(fxn) -> tuple[str, str]:
    """(file, code) of the innermost frame of the op's stack trace outside torch (torch.fx's own
    frames end it)."""
    lines = str(fxn.meta.get("stack_trace") or "").splitlines()
    for i in range(len(lines) - 2, -1, -1):
        m = _FRAME.match(lines[i])
        if m and "/torch/" not in m.group(1):
            return m.group(1), lines[i + 1].strip()
    return "", ""


def loss_upcast(torch, fxn, name: str) -> bool:
    """Whether this cast is the upcast of a Hugging Face loss: a ``.float()`` (torch.fx) or an
    ``aten.to`` to float32 (torch.export, whose trace stops at the ``self.loss_function(`` call)
    made inside transformers' loss code."""
    if name == "float" and fxn.op == "call_method":
        pass
    elif name == "to" and torch.float32 in tuple(fxn.args[1:]) + tuple(fxn.kwargs.values()):
        pass
    else:
        return False
    file, code = _innermost(fxn)
    return "/transformers/loss/" in file or "loss_function(" in code


def return_uncast(torch, fxn) -> None:
    """The model returns the logits it made, not the loss's fp32 copy: torch.export, tracing in
    fp32 where ``.float()`` returns its input, lists the cast among the graph's outputs; point
    those outputs back at the cast's input."""
    src = fxn.args[0]
    for user in list(fxn.users):
        if user.op == "output":
            user.args = torch.fx.node.map_arg(user.args, lambda n: src if n is fxn else n)

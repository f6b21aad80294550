"""Hugging Face's losses upcast the logits (``logits = logits.float()`` in transformers/loss/
loss_utils.py, reached through ``self.loss_function(...)``): with bf16 weights that is a fp32 copy
of the logits beside the fp32 log-probabilities. The fp32 trace sees no conversion, so the
importer maps that one cast onto ToDtype float32 (a view when the logits already are fp32).

Normalisations upcast for their numerics the same way (Llama's RMSNorm: ``input_dtype = x.dtype;
x = x.to(torch.float32); ...; return self.weight * x.to(input_dtype)``, Gemma's ``x.float()`` ...
``.type_as(x)``): with bf16 weights the fp32 copy is what pow and mul keep for backward and the
cast back is a second copy. A cast whose source names float32 literally becomes ToDtype float32;
a later cast in the same module call to a dtype the trace captured in a variable becomes ToDtype
``like`` that upcast's input (its dtype whatever the run's)."""

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


_LITERAL_FP32 = re.compile(r"\.float\(\s*\)|\.to\((?:[^()]*,\s*)?(?:dtype\s*=\s*)?torch\.float(?:32)?\b")


def literal_upcast(torch, fxn, name: str) -> bool:
    """A cast to float32 whose source line names float32 (``x.to(torch.float32)``, ``x.float()``)."""
    if name not in ("to", "float"):
        return False
    if name == "to" and torch.float32 not in tuple(fxn.args[1:]) + tuple(fxn.kwargs.values()):
        return False
    _, code = _innermost(fxn)
    return bool(_LITERAL_FP32.search(code))


def cast_back(torch, fxn, name: str) -> bool:
    """A cast to a dtype held in a variable (``x.to(input_dtype)``, ``x.type_as(y)``), traced as
    float32 (the trace's dtype)."""
    if name == "type_as":
        return True
    if name != "to":
        return False
    given = tuple(fxn.args[1:]) + tuple(fxn.kwargs.values())
    if any(isinstance(a, torch.fx.Node) for a in given):  # torch.fx: the traced ``x.dtype`` itself
        return True
    if torch.float32 not in given:
        return False
    _, code = _innermost(fxn)
    return bool(code) and not _LITERAL_FP32.search(code) and ".to(" in code


def unmerge_noop_upcasts(torch, gm) -> None:
    """torch.export traces in fp32, where ``x.to(torch.float32)`` returns x itself: the graph then
    hands every later reader of x (the decoder layer's residual add) the cast instead. A reader
    outside the module call that cast reads x again, so that with bf16 weights only the
    normalisation's own ops see the fp32 copy."""
    from memdesigner.importers._torch_nodes import _call_chain, _op_name

    for n in list(gm.graph.nodes):
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload) or not n.args \
                or not hasattr(n.args[0], "meta"):  # (torch.fx's proxies are distinct values)
            continue
        name = _op_name(n)
        if not literal_upcast(torch, n, name):
            continue
        chain = _call_chain(n)
        for user in list(n.users):
            if user.op != "output" and not _call_chain(user).startswith(chain):
                user.replace_input_with(n, n.args[0])


def return_uncast(torch, fxn) -> None:
    """The model returns the logits it made, not the loss's fp32 copy: torch.export, tracing in
    fp32 where ``.float()`` returns its input, lists the cast among the graph's outputs; point
    those outputs back at the cast's input."""
    src = fxn.args[0]
    for user in list(fxn.users):
        if user.op == "output":
            user.args = torch.fx.node.map_arg(user.args, lambda n: src if n is fxn else n)

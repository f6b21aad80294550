"""Code a model runs without autograd: ``with torch.no_grad():`` (a frozen feature extractor, a
distillation teacher, an EMA target), ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``
and methods decorated with them. torch.fx does not record grad mode, so the importer reads the
source lines each op ran at (its stack trace) and freezes the nodes made inside such a block:
with inputs that need no gradient, a frozen node records nothing and keeps nothing, as under
no_grad, and its parameters get no gradient and no optimizer state."""

from __future__ import annotations

import ast
import linecache
import re

_FRAME = re.compile(r'\s*File "([^"]+)", line (\d+), in (\w+)')
_LINES: dict[str, frozenset] = {}


def _is_no_grad(expr) -> bool:
    """``torch.no_grad()``, ``no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``
    (and the same names undecorated by a call: ``@torch.no_grad``)."""
    call = expr if isinstance(expr, ast.Call) else None
    f = call.func if call is not None else expr
    name = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
    if name in ("no_grad", "inference_mode"):
        return not (call is not None and call.args and isinstance(call.args[0], ast.Constant)
                    and call.args[0].value is False)  # inference_mode(False) records
    if name == "set_grad_enabled" and call is not None and call.args:
        return isinstance(call.args[0], ast.Constant) and call.args[0].value is False
    return False


def no_grad_lines(file: str) -> frozenset:
    """The line numbers of ``file`` that run without autograd (cached per file)."""
    hit = _LINES.get(file)
    if hit is not None:
        return hit
    lines: set = set()
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        body = None
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(_is_no_grad(i.context_expr) for i in node.items):
            body = node.body
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(_is_no_grad, node.decorator_list)):
            body = node.body
        for stmt in body or ():
            lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    _LINES[file] = out = frozenset(lines)
    return out


def ran_without_grad(fxn) -> bool:
    """Whether any frame of the op's stack trace is a line inside a no-grad block."""
    for m in _FRAME.finditer(str(fxn.meta.get("stack_trace") or "")):
        file = m.group(1)
        if "/torch/" in file:
            continue
        if int(m.group(2)) in no_grad_lines(file):
            return True
    return False


def mark_no_grad(design, gm, nid_of, warnings: list) -> list[str]:
    """Freeze the design nodes of ops that ran without autograd (``nid_of``: fx node -> design
    node id or None). Returns their ids; a warning names a block whose input needs a gradient
    (the estimate then still records those ops)."""
    out = []
    for fxn in gm.graph.nodes:
        if fxn.op not in ("call_module", "call_function", "call_method"):
            continue
        nid = nid_of(fxn)
        if nid is None or nid not in design.nodes or not ran_without_grad(fxn):
            continue
        if design.nodes[nid].trainable:
            design.set_trainable(nid, False)
        out.append(nid)
    if out:
        inside = set(out)
        feeds = [e.src for e in design.edges if e.dst in inside and e.src not in inside
                 and design.nodes[e.src].type != "Input"]
        if feeds:
            warnings.append(f"{out[0]}: runs under torch.no_grad() on the output of {feeds[0]}, which needs a "
                            "gradient; the estimate records it as if under grad")
    return out

"""How many elements evaluating an ONNX node on constants could make, before evaluating it.

The importer folds nodes whose inputs are all constants (shape arithmetic) with onnx's reference
evaluator. A 300-byte file can ask that evaluator for ``Range(0, 5 * 10^7)`` or
``ConstantOfShape([10^5, 10^5])``: 7 GB and 76 s for the Range before this bound. Ops that grow
their output from the *values* of their inputs are bounded from those values; any other op
makes at most as many elements as the product of its inputs' sizes (broadcasting, MatMul),
which for real shape arithmetic (a few small integer vectors) is tiny.
"""

from __future__ import annotations

import math


def _numel(a) -> int:
    return int(getattr(a, "size", 1)) or 1


def _prod(values) -> float:
    p = 1.0
    for v in values:
        p *= max(abs(float(v)), 1.0)
    return p


def fold_size_bound(op: str, inputs: list, attrs: dict) -> float:
    """An upper bound on the output elements of ``op`` evaluated on ``inputs`` (numpy arrays or
    None for an absent input); ``inf`` where a value is not finite."""
    try:
        return _bound(op, inputs, attrs)
    except (TypeError, ValueError, OverflowError, IndexError):
        return math.inf


def _bound(op: str, ins: list, attrs: dict) -> float:
    def val(i):
        return ins[i].reshape(-1).tolist() if len(ins) > i and ins[i] is not None else []

    first = _numel(ins[0]) if ins and ins[0] is not None else 1
    if op == "ConstantOfShape":
        return _prod(val(0))
    if op == "Expand":
        return first * _prod(val(1))
    if op == "Tile":
        return first * _prod(val(1))
    if op == "Range":
        start, limit, delta = (float(val(i)[0]) for i in range(3))
        return math.inf if delta == 0 else max(math.ceil((limit - start) / delta), 1)
    if op in ("Resize", "Upsample"):
        sizes = val(3) if op == "Resize" else []
        if sizes:
            return _prod(sizes)
        scales = val(2) if op == "Resize" else (val(1) or list(attrs.get("scales", [])))
        return first * _prod(scales)
    if op == "Pad":
        pads = val(1) or list(attrs.get("pads", []))
        shape = list(getattr(ins[0], "shape", ()))
        r = len(shape)
        if r and len(pads) >= 2 * r:
            return _prod(shape[k] + max(pads[k], 0) + max(pads[k + r], 0) for k in range(r))
        return first * _prod(pads)
    if op == "OneHot":
        return first * _prod(val(1))
    if op in ("RandomNormal", "RandomUniform", "Constant"):
        return _prod(attrs.get("shape", [])) if op != "Constant" else 1
    p = 1.0
    for a in ins:
        if a is not None:
            p *= _numel(a)
    return p

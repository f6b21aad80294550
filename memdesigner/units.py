"""Byte sizes of dtypes and human formatting.

Code keeps bytes as ints everywhere; these helpers are only for display.
"""

from __future__ import annotations

import math
from decimal import Decimal

DTYPE_BYTES = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int64": 8,
    "int32": 4,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}

# The short names people type (CLI, settings) mapped to torch-style dtype names.
DTYPE_ALIASES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "half": "float16",
    "float": "float32",
}

KiB = 1024
MiB = 1024**2
GiB = 1024**3


EiB = 1024**6


def format_bytes(n: int | float, digits: int = 1) -> str:
    """Binary units (KiB/MiB/GiB), the way allocators and nvidia-smi count. From 1 EiB on (no
    real device holds that: the sizes are absurd) bytes are written in scientific notation, which
    also works for ints far beyond a float's range."""
    if isinstance(n, float) and not math.isfinite(n):
        return f"{n} B"
    if abs(n) >= EiB:
        return f"{_sci(n, max(digits, 2))} B"
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{sign}{n / size:.{digits}f} {unit}"
    return f"{sign}{int(n)} B"


def format_gib(n: int | float, digits: int = 1) -> str:
    """Always GiB, for lists whose rows must compare at a glance (device memory, runtime)."""
    return f"{n / GiB:.{digits}f} GiB"


def format_count(n: int) -> str:
    """1,234,567 -> '1.23 M' for compact labels; up to E (10^18) so a large model's training
    FLOPs read '3.10 PFLOP', not '3100000.00 GFLOP'; scientific from 10^21 on (any size of int)."""
    if isinstance(n, float) and not math.isfinite(n):
        return f"{n}"
    if abs(n) >= 10**21:
        return _sci(n, 2)
    n = float(n)
    for unit, size in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)}"


def format_flops(n: int) -> str:
    if abs(n) < 1000 or abs(n) >= 10**21:
        return f"{format_count(n)} FLOP"
    return format_count(n) + "FLOP"


def _sci(n: int | float, digits: int) -> str:
    """'1.23e+602' for an int of any size (Decimal: exact, no float overflow)."""
    return f"{Decimal(n):.{digits}e}"


def pick_unit(max_bytes: float) -> tuple[str, int]:
    """The unit a memory axis reaching ``max_bytes`` is labelled in (GiB, MiB or KiB) and its size."""
    if max_bytes >= GiB:
        return "GiB", GiB
    if max_bytes >= MiB:
        return "MiB", MiB
    return "KiB", KiB

"""Validation at the edge: every config value a builder uses, checked before anything is built.

A config.json is user input: 0 attention heads divided by zero, a negative
``query_pre_attn_scalar`` became a complex scaling factor, 10^15 layers a MemoryError after
minutes. Each check names the key and what it must be, in one line; sizes are bounded by
MEMDESIGNER_MAX_HF_DIM and the layer count by MEMDESIGNER_MAX_HF_LAYERS (input_limits), so the
refusal comes before the memory is spent.
"""

from __future__ import annotations

import math

from memdesigner.importers.hf_config._graph import HfConfigError
from memdesigner.io.input_limits import limit, over


def short(v) -> str:
    """A value for a message: scalars as repr (cut), containers by their type (a 900-deep list
    must not be printed, nor an integer of 5,000 digits)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**30:
        return "a huge integer"
    if isinstance(v, (str, int, float, bool, type(None))):
        text = repr(v)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"a {'JSON object' if isinstance(v, dict) else 'list' if isinstance(v, list) else type(v).__name__}"


class Check:
    """Checks on one config dict ``c``; ``error`` is the builder's exception type."""

    def __init__(self, c: dict, error=HfConfigError):
        self.c = c
        self.error = error

    def fail(self, key: str, v, must: str):
        raise self.error(f"{key}: {short(v)} {must}")

    def pos_int(self, key: str, *, zero: bool = False, cap: str = "MAX_HF_DIM") -> int:
        """A positive integer (``zero``: or 0) within the limit ``cap``."""
        v = self.c.get(key)
        lo = 0 if zero else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            self.fail(key, v, "is not a non-negative integer" if zero else "is not a positive integer")
        if v > limit(cap):
            raise self.error(f"{key}: " + over(cap, f"{v:,} is too large"))
        return v

    def opt_pos_int(self, key: str) -> int | None:
        """None (or absent), else a positive integer."""
        return None if self.c.get(key) is None else self.pos_int(key)

    def layers(self, key: str) -> int:
        """The layer count, within MEMDESIGNER_MAX_HF_LAYERS: checked before any layer is built."""
        return self.pos_int(key, cap="MAX_HF_LAYERS")

    def number(self, key: str, *, lo: float = 0.0, hi: float = math.inf, lo_open: bool = False,
               optional: bool = False) -> float | None:
        """A finite number in [lo, hi] (``lo_open``: above lo); ``optional``: None allowed."""
        v = self.c.get(key)
        if v is None and optional:
            return None
        ok = _finite(v)
        if ok:
            f = float(v)
            ok = (f > lo if lo_open else f >= lo) and f <= hi
        if not ok:
            rng = f"{'above' if lo_open else 'at least'} {lo:g}" + (f" and at most {hi:g}" if hi != math.inf else "")
            self.fail(key, v, f"is not a finite number {rng}")
        return float(v)

    def prob(self, key: str, optional: bool = False) -> float | None:
        """A dropout probability, 0 to 1."""
        return self.number(key, hi=1.0, optional=optional)

    def text(self, key: str) -> str:
        v = self.c.get(key)
        if not isinstance(v, str):
            self.fail(key, v, "is not a string")
        return v

    def divides(self, key: str, d: int, into_key: str, n: int) -> None:
        """``key`` (= d) must divide ``into_key`` (= n)."""
        if n % d:
            raise self.error(f"{key}: {d} does not divide {into_key} {n}")

    def int_list(self, key: str) -> list:
        v = self.c.get(key) or []
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            self.fail(key, v, "is not a list of integers")
        return v


def _finite(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:  # an integer beyond any float
        return False


def check_seq_len(seq_len) -> int:
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise HfConfigError(f"seq_len: {short(seq_len)} is not a positive integer")
    if seq_len > limit("MAX_HF_DIM"):
        raise HfConfigError("seq_len: " + over("MAX_HF_DIM", f"{seq_len:,} is too large"))
    return seq_len

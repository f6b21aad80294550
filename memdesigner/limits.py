"""The limits that keep a broken or hostile input from costing unbounded time or memory.

Each limit is one environment variable, ``MEMDESIGNER_MAX_<NAME>``, with a default that no real
model comes near (docs/limits.md lists them); every refusal names the limit and the variable, so
the one user whose file is legitimately bigger knows how to go on.
"""

from __future__ import annotations

import os

DEFAULTS = {
    "FILE_MB": 256,  # bytes read from any one user file (design, devices.json, Keras JSON, autosave, journal)
    "JSON_DEPTH": 64,  # nesting of a JSON file (a design nests about 6 deep, a Keras 3 config 12)
    "LAYERS": 200_000,  # layers after block expansion (a Llama-3-70B is about 2,000, a 256-expert MoE of 61 layers 80,000)
    "BLOCK_DEPTH": 32,  # blocks inside blocks (real designs nest 2 or 3 deep)
}


def variable(name: str) -> str:
    return f"MEMDESIGNER_MAX_{name}"


def limit(name: str) -> int:
    """The limit's value: the environment variable when it holds a positive integer, else the default."""
    raw = os.environ.get(variable(name), "").strip().replace("_", "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return DEFAULTS[name]


def raise_hint(name: str) -> str:
    """What a refusal message ends with."""
    return f"set {variable(name)} to raise it"

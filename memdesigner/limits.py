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
    # Hugging Face configs, ONNX files and memory snapshots (io/input_limits.py reads them)
    "HF_CONFIG_MB": 16,  # MB of a Hugging Face config.json
    "HF_LAYERS": 1_000,  # decoder/encoder layers of a Hugging Face config (the deepest real ones: ~130)
    "HF_EXPERTS": 65_536,  # experts of a Hugging Face MoE config (the engine spreads tokens per expert)
    "HF_DIM": 2**31 - 1,  # any one size of a Hugging Face config (hidden, vocab, heads, ...)
    "ONNX_MB": 4096,  # MB of an ONNX file (weights in external data files do not count)
    "ONNX_NODES": 1_000_000,  # nodes of an ONNX graph
    "SNAPSHOT_MB": 4096,  # MB of a PyTorch memory snapshot
    "SNAPSHOT_EVENTS": 5_000_000,  # trace events of a memory snapshot (all devices)
    "SNAPSHOT_FRAMES": 50_000_000,  # stack frames of a memory snapshot's events, all together
    "SNAPSHOT_BLOCKS": 5_000_000,  # segments and blocks of a memory snapshot
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

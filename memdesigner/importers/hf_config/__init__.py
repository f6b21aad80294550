"""Designs from Hugging Face config.json files, without transformers or weights.

``design_from_config(config)`` dispatches on ``model_type`` to a builder module's
``build(config, seq_len=, task=)``; ``load_config(path)`` reads a config.json with one clear
error line for a bad file. The CLI (``memdesigner import hf``) and the window's File → Import →
Hugging Face config call :func:`import_file`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from memdesigner.importers.hf_config import bert, gpt2, llama
from memdesigner.importers.hf_config._graph import HfConfigError
from memdesigner.importers.hf_config.versions import MAJORS, NEWEST, check_major

TASKS = ("causal-lm", "classification", "base")

BUILDERS: dict[str, Callable] = {mt: llama.build for mt in llama.DEFAULTS}
BUILDERS["gpt2"] = gpt2.build
BUILDERS["bert"] = bert.build


def design_from_config(config: dict, *, seq_len: int = 512, task: str = "causal-lm",
                       transformers_major: int = NEWEST):
    """The design of the model transformers ``transformers_major`` (4 or 5, default the newest)
    would build from ``config`` (a config.json dict); the design records the major it follows."""
    if not isinstance(config, dict):
        raise HfConfigError("the config is not a JSON object")
    if task not in TASKS:
        raise HfConfigError(f"task: {task!r} is not one of {', '.join(TASKS)}")
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise HfConfigError(f"seq_len: {seq_len!r} is not a positive integer")
    major = check_major(transformers_major)
    mt = config.get("model_type")
    if mt not in BUILDERS:
        known = ", ".join(sorted(BUILDERS))
        raise HfConfigError(f"model_type: {mt!r} is not supported (supported: {known})")
    try:
        if BUILDERS[mt] is llama.build:  # the decoders' attention differs by major (versions.py)
            design = llama.build(config, seq_len=seq_len, task=task, transformers_major=major)
        else:
            design = BUILDERS[mt](config, seq_len=seq_len, task=task)
    except HfConfigError:
        raise
    except (ValueError, TypeError, KeyError) as e:  # a builder's own check of a field
        raise HfConfigError(str(e).strip("'\"")) from None
    design.library_versions = {"transformers": str(major)}
    return _fold(design)


def _fold(design):
    """Collapse the repeated decoder layers into one block × N when blocks are available."""
    try:
        from memdesigner.model.blocks import fold_repeats
    except ImportError:
        return design
    return fold_repeats(design)


def load_config(path: str | Path) -> dict:
    """A config.json as a dict; HfConfigError names the file and what is wrong with it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise HfConfigError(f"{p}: cannot read the file ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise HfConfigError(f"{p}: not a text file") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise HfConfigError(f"{p}: not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(config, dict):
        raise HfConfigError(f"{p}: a config.json must hold a JSON object")
    return config


def import_file(path: str | Path, *, seq_len: int = 512, task: str = "causal-lm", transformers_major: int = NEWEST):
    """load_config + design_from_config, with the file named in any error."""
    config = load_config(path)
    try:
        design = design_from_config(config, seq_len=seq_len, task=task, transformers_major=transformers_major)
    except HfConfigError as e:
        raise HfConfigError(f"{Path(path).name}: {e}") from None
    design.name = Path(path).stem if Path(path).stem != "config" else design.name
    return design


__all__ = ["BUILDERS", "MAJORS", "NEWEST", "TASKS", "HfConfigError", "design_from_config", "load_config", "import_file"]

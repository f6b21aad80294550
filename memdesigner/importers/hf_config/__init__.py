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
from memdesigner.importers.hf_config._check import check_seq_len, short
from memdesigner.importers.hf_config._graph import HfConfigError
from memdesigner.importers.hf_config.versions import MAJORS, NEWEST, check_major
from memdesigner.io.input_limits import InputLimitError, read_limited

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
    check_seq_len(seq_len)
    major = check_major(transformers_major)
    mt = config.get("model_type")
    if not isinstance(mt, str) or mt not in BUILDERS:
        known = ", ".join(sorted(BUILDERS))
        raise HfConfigError(f"model_type: {short(mt)} is not supported (supported: {known})")
    try:
        if BUILDERS[mt] is llama.build:  # the decoders' attention differs by major (versions.py)
            design = llama.build(config, seq_len=seq_len, task=task, transformers_major=major)
        else:
            design = BUILDERS[mt](config, seq_len=seq_len, task=task)
    except HfConfigError:
        raise
    except (ValueError, TypeError, KeyError) as e:  # a builder's own check of a field
        raise HfConfigError(str(e).strip("'\"")) from None
    except (ArithmeticError, IndexError, RecursionError, MemoryError) as e:  # a value no check caught
        raise HfConfigError(f"cannot build this config ({type(e).__name__}: {str(e)[:120]})") from None
    design.library_versions = {"transformers": str(major)}
    return _fold(design)


def _fold(design):
    """Collapse the repeated decoder layers into one block × N when blocks are available."""
    try:
        from memdesigner.model.block_fold import fold_repeats
    except ImportError:
        return design
    return fold_repeats(design)


def load_config(path: str | Path) -> dict:
    """A config.json as a dict; HfConfigError names the file and what is wrong with it. Read
    within MEMDESIGNER_MAX_HF_CONFIG_MB (a regular file only); nesting past the JSON parser's
    recursion limit and integers of thousands of digits are one line too."""
    p = Path(path)
    try:
        data = read_limited(p, "MAX_HF_CONFIG_MB")
    except InputLimitError as e:
        raise HfConfigError(str(e).replace("cannot read (", "cannot read the file (", 1)) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise HfConfigError(f"{p}: not a text file") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise HfConfigError(f"{p}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise HfConfigError(f"{p}: not a config.json (nested too deeply)") from None
    except ValueError as e:  # an integer literal over Python's 4,300-digit limit
        raise HfConfigError(f"{p}: not valid JSON ({str(e).splitlines()[0][:120]})") from None
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

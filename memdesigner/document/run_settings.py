"""The run settings of a design (mode, batch, optimizer, dtype, device, fine-tuning, ...) as an
evented model. It is part of the document: saved in the design file's ``settings``, changed
through undo commands, viewed (never owned) by the window's settings bar."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memdesigner.engine.settings import DTYPES, MODES, OPTIMIZERS, Settings

CORE = {"mode": "inference", "batch": 1, "optimizer": "adam", "dtype": "fp32", "amp": False, "checkpointing": False}
GENERATE_KEYS = ("new_tokens", "kv_cache", "kv_dtype")
PARALLEL_KEYS = ("gpus", "strategy", "offload", "tensor_parallel", "sequence_parallel", "pipeline_parallel",
                 "micro_batches")  # the bar's GPUs popup
FINETUNE_KEYS = ("freeze", "lora_r", "lora_alpha", "lora_dropout", "lora_targets", "base_bits", "grad_accum",
                 "checkpoint_layers", "master_weights")
EXTRA_KEYS = ("foreach", "checkpoint_units", "seq_len")  # no widget in the bar: carried


def _valid(key: str, v) -> bool:
    if key == "mode":
        return v in MODES
    if key == "batch":
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1
    if key == "optimizer":
        return v in OPTIMIZERS
    if key == "dtype":
        return v in DTYPES
    return isinstance(v, bool)


def normalize(d: dict | None) -> dict:
    """Every core key present and valid (missing or bad ones take the default); other keys kept as
    they are, so settings this version does not know survive a round trip."""
    out = dict(d or {})
    for k, default in CORE.items():
        if not _valid(k, out.get(k)):
            out[k] = default
    return out


def to_settings(d: dict) -> Settings:
    """The engine's Settings for a settings dict, as the window estimates it: the optimizer and
    checkpointing only count in training, AMP only with fp32; options that do not form valid
    Settings are left out rather than failing the estimate."""
    d = normalize(d)
    train = d["mode"] == "train"
    s = Settings(mode=d["mode"], batch=d["batch"], optimizer=d["optimizer"] if train else "none", dtype=d["dtype"],
                 amp=d["amp"] and d["dtype"] == "fp32", checkpointing=d["checkpointing"] and train)
    extra = {k: tuple(d[k]) if isinstance(d[k], list) else d[k] for k in EXTRA_KEYS if k in d}
    if "checkpoint_units" in extra and (s.checkpointing or d.get("checkpoint_layers")):
        del extra["checkpoint_units"]  # a ticked checkpointing box wins over a planned set
    groups = [{**extra, **{k: d[k] for k in PARALLEL_KEYS if k in d}}]
    if d["mode"] == "generate":
        groups.insert(0, {k: d[k] for k in GENERATE_KEYS if k in d})
    if train:
        groups.append({k: tuple(d[k]) if isinstance(d[k], list) else d[k] for k in FINETUNE_KEYS if k in d})
    for g in groups:
        if g:
            try:
                s = s.with_(**g)
            except (TypeError, ValueError):
                pass
    return s


def settings_dict(s: Settings) -> dict:
    """``s`` in the design file's spelling, every key the window has a control for (and those it
    carries), so that a window given it estimates exactly ``s`` (render, tests of the window)."""
    out = {}
    for k in (*CORE, *GENERATE_KEYS, *PARALLEL_KEYS, *FINETUNE_KEYS, *EXTRA_KEYS):
        v = getattr(s, k)
        if v is not None:
            out[k] = list(v) if isinstance(v, tuple) else v
    return out


class RunSettings:
    """A settings dict with listeners. ``set_all`` replaces it and notifies; ``adopt`` takes the
    same settings in the view's canonical spelling without notifying (no change for the user)."""

    def __init__(self, d: dict | None = None):
        self._d = normalize(d)
        self._listeners: list[Callable[[dict], Any]] = []

    def subscribe(self, fn: Callable[[dict], Any]) -> None:
        self._listeners.append(fn)

    def unsubscribe(self, fn) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def to_dict(self) -> dict:
        return dict(self._d)

    def get(self, key: str, default=None):
        return self._d.get(key, default)

    def set_all(self, d: dict) -> None:
        new = normalize(d)
        if new == self._d:
            return
        self._d = new
        for fn in list(self._listeners):
            fn(self.to_dict())

    def adopt(self, d: dict) -> None:
        self._d = normalize(d)

    def settings(self) -> Settings:
        return to_settings(self._d)

    @property
    def device_id(self) -> str | None:
        return self._d.get("device")

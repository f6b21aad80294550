"""The run settings a design file opens with: its own, and the defaults for what it leaves out,
so opening one example after another never carries the previous one's mode, batch or optimizer
over (a file without settings opens with the defaults). The device stays the user's choice
unless the file names one."""

from __future__ import annotations

from memdesigner.engine.settings import Settings

# what the settings bar shows; the fine-tuning controls reset themselves from what is absent
_BAR_KEYS = ("mode", "batch", "optimizer", "dtype", "amp", "checkpointing", "new_tokens", "kv_cache", "kv_dtype",
             "grad_accum")


def opened_settings(file_settings: dict | None) -> dict:
    defaults = Settings()
    d = {k: getattr(defaults, k) for k in _BAR_KEYS}
    d.update(file_settings or {})
    return d

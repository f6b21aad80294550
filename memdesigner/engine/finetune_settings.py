"""The fine-tuning fields of a run's settings, checked where Settings is made (engine/settings.py):
below the fine-tuning edits themselves (engine/finetune.py), which the passes use."""

from __future__ import annotations

from memdesigner.engine.optim_state import NEW_OPTIMIZERS


def check_finetune_settings(s) -> None:
    """Validate (and normalise) the fine-tuning fields of a Settings object."""
    def _names(v, what):
        if v is None:
            return ()
        if isinstance(v, str):
            v = [x for x in v.split(",")]
        out = tuple(str(x).strip() for x in v)
        if any(not x for x in out):
            raise ValueError(f"{what}: an empty name in {','.join(out)!r}")
        return out

    object.__setattr__(s, "freeze", _names(s.freeze, "freeze"))
    object.__setattr__(s, "lora_targets", _names(s.lora_targets, "lora_targets"))
    if not isinstance(s.lora_r, int) or isinstance(s.lora_r, bool) or s.lora_r < 0:
        raise ValueError(f"lora_r: {s.lora_r!r} must be a non-negative integer")
    if s.lora_alpha is not None and (isinstance(s.lora_alpha, bool) or not isinstance(s.lora_alpha, (int, float))
                                     or s.lora_alpha <= 0):
        raise ValueError(f"lora_alpha: {s.lora_alpha!r} must be a positive number")
    if not isinstance(s.lora_dropout, (int, float)) or isinstance(s.lora_dropout, bool) \
            or not 0 <= s.lora_dropout < 1:
        raise ValueError(f"lora_dropout: {s.lora_dropout!r} must be in [0, 1)")
    if s.base_bits not in (0, 4, 8):
        raise ValueError(f"base_bits: {s.base_bits!r} is not one of 0, 4, 8")
    if s.base_bits and not s.lora_r:
        raise ValueError("base_bits: quantised base weights (QLoRA) need LoRA adapters (lora_r > 0)")
    if not isinstance(s.grad_accum, int) or isinstance(s.grad_accum, bool) or s.grad_accum < 1:
        raise ValueError(f"grad_accum: {s.grad_accum!r} must be a positive integer")
    if s.master_weights and s.dtype == "fp32":
        raise ValueError("master_weights: fp32 master copies need bf16 or fp16 weights (dtype bf16/fp16)")

    if s.strategy == "zero1" and s.optimizer in NEW_OPTIMIZERS:
        raise ValueError(f"optimizer: {s.optimizer} with zero1 sharding is not modelled")

"""The run-settings model (memdesigner/document/run_settings.py): what the window estimates for a
settings dict, and that settings this version has no control for survive."""

import pytest

from memdesigner.document.run_settings import RunSettings, normalize, settings_dict, to_settings
from memdesigner.engine.settings import Settings


def test_only_training_counts_the_optimizer_and_checkpointing_and_amp_needs_fp32():
    s = to_settings({"mode": "inference", "batch": 3, "optimizer": "sgd", "checkpointing": True, "amp": True,
                     "dtype": "bf16"})
    assert (s.batch, s.optimizer, s.checkpointing, s.amp, s.dtype) == (3, "none", False, False, "bf16")
    s = to_settings({"mode": "train", "optimizer": "sgd", "checkpointing": True, "amp": True, "lora_r": 4,
                     "lora_targets": ["q_proj"]})
    assert (s.optimizer, s.checkpointing, s.amp, s.lora_r, s.lora_targets) == ("sgd", True, True, 4, ("q_proj",))


def test_bad_values_take_the_default_and_unknown_keys_are_kept():
    d = normalize({"mode": "fly", "batch": 0, "dtype": "fp8", "amp": "yes", "tp": 4})
    assert d == {"mode": "inference", "batch": 1, "optimizer": "adam", "dtype": "fp32", "amp": False,
                 "checkpointing": False, "tp": 4}
    assert to_settings({"gpus": 4}).gpus == 1  # gpus 4 without a strategy is not valid Settings: left out
    assert to_settings({"gpus": 4, "strategy": "ddp"}).gpus == 4


def test_listeners_hear_changes_not_adoptions():
    m, heard = RunSettings(), []
    m.subscribe(heard.append)
    m.set_all({"batch": 8})
    m.set_all({"batch": 8})  # no change: no event
    m.adopt({"batch": 8, "training": "full"})
    assert [d["batch"] for d in heard] == [8] and m.get("training") == "full"


@pytest.mark.parametrize("s", [
    Settings(mode="train", optimizer="adamw", dtype="bf16", lora_r=16, checkpoint_layers=True),
    Settings(mode="train", optimizer="paged_adamw8bit", dtype="bf16", lora_r=8, lora_alpha=16.0,
             lora_targets=("q_proj", "v_proj"), base_bits=4, grad_accum=4),
    Settings(mode="train", optimizer="adam", gpus=7, strategy="zero3", batch=2),
    Settings(mode="train", optimizer="sgd", tensor_parallel=2, sequence_parallel=True),
    Settings(mode="generate", optimizer="none", dtype="bf16", new_tokens=256, kv_cache="static"),
])
def test_settings_survive_the_design_files_spelling(s):
    """What `memdesigner render` hands the window: every setting, not only the bar's core six (a
    LoRA render showed the full fine-tune's 75.7 GiB where `estimate --lora 16` said 17.1 GiB)."""
    assert to_settings(settings_dict(s)) == s

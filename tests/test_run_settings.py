"""The run-settings model (memdesigner/model/run_settings.py): what the window estimates for a
settings dict, and that settings this version has no control for survive."""

from memdesigner.document.run_settings import RunSettings, normalize, to_settings


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

"""The sequence length as a run setting (engine/sequence_length.py): a token model estimated at
another length equals the design built at that length, event for event, in estimate, the largest
batch and make-it-fit, from the API, the CLI and a design's saved settings."""

import json

import pytest

import memdesigner as md
from memdesigner.cli import main
from memdesigner.document.run_settings import to_settings
from memdesigner.engine.fit import make_it_fit
from memdesigner.importers.hf_config import design_from_config
from memdesigner.io.design_file import design_to_dict

LLAMA = {"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
KW = dict(mode="train", optimizer="adamw", batch=2)


def _events(rep):
    return [(e.phase, e.node, e.label, e.bytes) for e in rep.timeline]


@pytest.mark.parametrize("n", [7, 64, 200])
def test_a_length_setting_is_the_design_built_at_that_length(n):
    built = md.estimate(design_from_config(LLAMA, seq_len=n), **KW)
    setting = md.estimate(design_from_config(LLAMA, seq_len=32), seq_len=n, **KW)
    assert _events(setting) == _events(built)  # the whole timeline, not only the peak
    assert setting.peak_bytes == built.peak_bytes and setting.sequence_length == built.sequence_length == n
    assert setting.settings["seq_len"] == n


def test_the_design_is_not_edited_and_zero_means_its_own_length():
    d = design_from_config(LLAMA, seq_len=32)
    before = design_to_dict(d)
    longer = md.estimate(d, seq_len=96, **KW)
    own = md.estimate(d, **KW)
    assert own.sequence_length == 32 and longer.sequence_length == 96 and longer.peak_bytes > own.peak_bytes
    assert _events(md.estimate(d, seq_len=32, **KW)) == _events(own)
    assert design_to_dict(d) == before


def test_largest_batch_follows_the_length():
    d = design_from_config(LLAMA, seq_len=32)
    at_128 = md.estimate(d, seq_len=128, device="t4", max_batch=True, **KW).max_batch
    built = md.estimate(design_from_config(LLAMA, seq_len=128), device="t4", max_batch=True, **KW).max_batch
    own = md.estimate(d, device="t4", max_batch=True, **KW).max_batch
    assert at_128 == built and at_128 < own


def test_make_it_fit_suggests_a_shorter_setting_not_a_design_edit():
    d = design_from_config({**LLAMA, "vocab_size": 32000, "hidden_size": 1024, "intermediate_size": 2816,
                            "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4}, seq_len=64)
    advice = make_it_fit(d, md.Settings(mode="train", optimizer="adamw", batch=8, seq_len=16384), device="t4")
    seq = [g for g in advice.suggestions if "sequence" in g.kinds]
    assert seq and seq[0].design_change is None
    n = seq[0].settings["seq_len"]
    assert 64 < n < 16384 and advice.max_sequence == n and not advice.fits_as_given
    fits = md.estimate(d, md.Settings(mode="train", optimizer="adamw", batch=8, seq_len=n), device="t4")
    over = md.estimate(d, md.Settings(mode="train", optimizer="adamw", batch=8, seq_len=n + 1), device="t4")
    assert fits.device["fits"] and not over.device["fits"]  # the longest, exactly


def test_a_design_without_tokens_refuses_the_setting():
    with pytest.raises(ValueError, match="no token input"):
        md.estimate(md.load_design("resources/examples/resnet18.json"), seq_len=128)
    with pytest.raises(ValueError, match="seq_len"):
        md.Settings(seq_len=1 << 30)


def test_cli_and_saved_settings(tmp_path, capsys):
    d = design_from_config(LLAMA, seq_len=32)
    path = tmp_path / "llama.json"
    md.save_design(d, path)
    assert main(["estimate", str(path), "--mode", "train", "--batch", "2", "--optimizer", "adamw",
                 "--seq-len", "96", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = md.estimate(design_from_config(LLAMA, seq_len=96), **KW)
    assert (out["peak_bytes"], out["sequence_length"], out["settings"]["seq_len"]) == (want.peak_bytes, 96, 96)
    d.settings = {**KW, "seq_len": 96}  # saved with the design: the CLI and the window read it
    md.save_design(d, path)
    assert main(["estimate", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["peak_bytes"] == want.peak_bytes
    assert to_settings(d.settings).seq_len == 96
    assert main(["estimate", "resources/examples/resnet18.json", "--seq-len", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no token input" in err[0]

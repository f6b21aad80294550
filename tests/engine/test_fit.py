"""memdesigner fit: every suggestion is what the engine estimates for its own settings."""

import copy
import json
from pathlib import Path

import pytest

import memdesigner
from memdesigner.cli import main
from memdesigner.engine.devices import Device, get_device
from memdesigner.engine.fit import make_it_fit
from memdesigner.engine.settings import Settings

EX = Path(__file__).resolve().parents[2] / "resources" / "examples"


def _check_claims(design, advice, dev=None):
    """Every suggestion's settings (and design edit) re-estimate to the peak it claims."""
    for s in advice.suggestions:
        d = design
        if s.design_change:
            d = design.detached_copy() if not design.blocks else copy.deepcopy(design)
            d.nodes[s.design_change["node"]].props = dict(d.nodes[s.design_change["node"]].props,
                                                          **{s.design_change["prop"]: s.design_change["value"]})
            d.nodes[s.design_change["node"]].rev += 1
        device = dev if dev is not None and s.device == dev.id else s.device
        rep = memdesigner.estimate(d, Settings(**s.settings), device=device)
        assert rep.peak_bytes == s.peak_bytes, s.change
        assert rep.device_peak_bytes == s.device_peak_bytes, s.change
        assert rep.device["fits"] == s.fits, s.change


def test_keras_audio_cnn_on_rtx3080_has_three_ways_to_fit():
    design = memdesigner.load_design(EX / "seed_keras_audio.json")
    advice = make_it_fit(design, mode="train", optimizer="adam", batch=1, device="rtx3080-10gb")
    assert not advice.fits_as_given and advice.max_batch == 0
    fitting = [s for s in advice.suggestions if s.fits]
    assert len(fitting) >= 3
    # hand check: SGD keeps weights + gradients (2 x 3,081,931,460 B) and no state; beside them in
    # backward live a few of the 1489 x 255 x 16 fp32 conv maps (24,300,480 B each)
    sgd = next(s for s in fitting if s.kinds == ("sgd",))
    assert 2 * 3_081_931_460 < sgd.peak_bytes < 2 * 3_081_931_460 + 5 * 24_300_480
    assert [s.fits for s in advice.suggestions] == sorted((s.fits for s in advice.suggestions), reverse=True)
    _check_claims(design, advice)


def test_planned_checkpointing_is_priced_by_its_recompute():
    design = memdesigner.load_design(EX / "vgg16.json")
    s = Settings(mode="train", optimizer="sgd", batch=32)
    every = memdesigner.estimate(design, s.with_(checkpointing=True))
    dev = Device("budget", "2.7 GiB budget", "cuda", 2_900_000_000)  # between all-checkpointed and none
    advice = make_it_fit(design, s, device=dev)
    ck = next(g for g in advice.suggestions if g.kinds == ("checkpointing",))
    assert ck.fits and advice.suggestions[0] is ck  # the cheapest way
    rep = memdesigner.estimate(design, Settings(**ck.settings), device=dev)
    assert 0 < rep.recompute_flops < every.recompute_flops  # fewer layers than sqrt(n) segments of all
    assert ck.cost["recompute_pct"] == round(100 * rep.recompute_flops / (3 * rep.flops), 1)
    assert ck.cost["checkpoint_units"] == list(ck.settings["checkpoint_units"])
    _check_claims(design, advice, dev)


def _token_design():
    from memdesigner.importers.hf_config import import_file

    return import_file(EX / "hf" / "gpt2.json", seq_len=1024)


def test_llm_suggestions_and_exact_limits():
    design = _token_design()
    dev = get_device("rtx3060-12gb")
    s = Settings(mode="train", optimizer="adamw", batch=8, backend="cuda")
    advice = make_it_fit(design, s, device=dev)
    kinds = {g.kinds for g in advice.suggestions if g.fits}
    for k in [("checkpointing",), ("amp",), ("accum",), ("sequence",), ("qlora",), ("gpus",), ("offload",),
              ("lora", "checkpointing"), ("bf16_master",)]:
        assert k in kinds, k
    accum = next(g for g in advice.suggestions if g.kinds == ("accum",))
    assert accum.settings["batch"] * accum.settings["grad_accum"] == 8
    # fewest GPUs, longest sequence, largest batch: each fits and one more / one fewer does not
    n = advice.min_gpus
    fits = lambda **kw: memdesigner.estimate(design, s.with_(**kw), device=dev).device["fits"]  # noqa: E731
    assert n > 2 and fits(gpus=n, strategy="zero3") and not fits(gpus=n - 1, strategy="zero3")
    b = advice.max_batch
    assert 1 <= b < 8 and fits(batch=b) and not fits(batch=b + 1)
    L = advice.max_sequence
    seq = next(g for g in advice.suggestions if g.kinds == ("sequence",))
    assert seq.design_change == {"node": "input_ids", "prop": "shape", "value": [L]}
    from memdesigner.importers.hf_config import import_file

    for length, ok in ((L, True), (L + 1, False)):
        d = import_file(EX / "hf" / "gpt2.json", seq_len=length)
        assert memdesigner.estimate(d, s, device=dev).device["fits"] == ok, length
    _check_claims(design, advice, dev)


def test_cli_exit_codes_and_json(capsys):
    f = str(EX / "seed_keras_audio.json")
    assert main(["fit", f, "--mode", "train", "--optimizer", "adam", "--device", "rtx3080-10gb",
                 "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert {"change", "settings", "peak_bytes", "fits", "cost"} <= set(out["suggestions"][0])
    assert main(["fit", f, "--mode", "inference", "--device", "rtx3080-10gb"]) == 0
    capsys.readouterr()
    assert main(["fit", f]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--device" in err
    assert main(["fit", f, "--device", "rtx3080-10gb", "--mode", "train", "--checkpoint-units", "conv9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'conv9' is no layer" in err
    assert main(["estimate", f, "--mode", "train", "--optimizer", "sgd", "--checkpoint-units", "conv1,dense1",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["checkpoint_units"] == ["conv1", "dense1"]


@pytest.mark.parametrize("name", ["lstm_classifier", "transformer_encoder", "mobilenet_v2"])
def test_every_suggestion_re_estimates_to_its_claim(name):
    design = memdesigner.load_design(EX / f"{name}.json")
    advice = make_it_fit(design, mode="train", optimizer="adam", batch=512, device="jetson-orin-nano-8gb")
    _check_claims(design, advice)


@pytest.mark.parametrize("seq_len", [0, 256])
def test_generate_largest_batch_is_estimates(seq_len):
    """In generate mode the advice's largest batch is whole generations, as `estimate --max-batch`
    finds it (it used the one-forward batch curve: 13 beside the window's and the CLI's 28)."""
    from memdesigner.engine.estimate import estimate
    from memdesigner.importers.hf_config import design_from_config

    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
           "intermediate_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 1, "num_key_value_heads": 8,
           "vocab_size": 4096, "max_position_embeddings": 8192, "tie_word_embeddings": False}
    d = design_from_config(cfg, seq_len=2048)
    s = Settings(mode="generate", batch=1, dtype="bf16", new_tokens=64, seq_len=seq_len)
    dev = Device("small", "small", "cuda", 2 << 30)
    want = estimate(d, s, device=dev, max_batch=True).max_batch
    got = make_it_fit(d, s, device=dev).max_batch
    assert got == want > 1

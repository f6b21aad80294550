"""memdesigner fit: every suggestion is what the engine estimates for its own settings."""

import json
from pathlib import Path

import pytest

import memdesigner
from memdesigner.cli import main
from memdesigner.engine.fit import make_it_fit
from memdesigner.engine.settings import Settings

EX = Path(__file__).parent.parent / "resources" / "examples"


def _check_claims(design, advice):
    for s in advice.suggestions:
        d = design
        if s.design_change:
            d = memdesigner.load_design(EX / f"{design.name}.json")
            d.nodes[s.design_change["node"]].props[s.design_change["prop"]] = s.design_change["value"]
        rep = memdesigner.estimate(d, Settings(**s.settings), device=s.device)
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


def test_checkpointing_is_priced_by_its_recompute():
    design = memdesigner.load_design(EX / "resnet18.json")
    advice = make_it_fit(design, mode="train", optimizer="sgd", batch=96, device="rtx3080-10gb")
    ck = next(s for s in advice.suggestions if s.kinds == ("checkpointing",))
    rep = memdesigner.estimate(design, Settings(**ck.settings), device="rtx3080-10gb")
    assert 0 < rep.recompute_flops < rep.flops  # every segment but the last runs again
    assert ck.cost["recompute_pct"] == round(100 * rep.recompute_flops / (3 * rep.flops), 1)
    _check_claims(design, advice)


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


@pytest.mark.parametrize("name", ["lstm_classifier", "transformer_encoder", "mobilenet_v2"])
def test_every_suggestion_re_estimates_to_its_claim(name):
    design = memdesigner.load_design(EX / f"{name}.json")
    advice = make_it_fit(design, mode="train", optimizer="adam", batch=512, device="jetson-orin-nano-8gb")
    _check_claims(design, advice)

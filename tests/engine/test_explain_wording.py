"""Explain the Peak's wording comes from the engine (rows carry ``why``; ``run_header``), and
each kind of gradient is named for what it is: a parameter gradient lives until zero_grad, an
AMP low-precision gradient until its cast, and only ones_like(loss) is the loss's seed."""

from helpers import sequential

from memdesigner.engine.estimate import explain_peak
from memdesigner.engine.peak_rules import run_header, why_alive
from memdesigner.engine.settings import Settings

SEED = "loss gradient seed"


def _mlp():
    return sequential((512,), [("Linear", {"out_features": 512})] * 3 + [("Linear", {"out_features": 4096})])


def test_amp_low_precision_gradients_are_not_the_loss_seed():
    """AMP + SGD, batch 1: two low-precision weight gradients are alive at the peak; they were
    explained as "the loss gradient seed lives until backward returns"."""
    rows = explain_peak(_mlp(), Settings(mode="train", batch=1, optimizer="sgd", amp=True, backend="cpu"))
    low = [r for r in rows if r["tensor"] == "low-precision grad"]
    assert len(low) == 2 and all(r["layer"] for r in low)  # owned by their layer now
    assert all("autocast" in r["why"] and SEED not in r["why"] for r in low)
    assert [r["tensor"] for r in rows if SEED in r["why"]] == ["ones_like(loss)"]
    assert all("until the next zero_grad" in r["why"] for r in rows if r["tensor"].endswith(".grad"))


def test_every_row_carries_the_engines_rule():
    d = _mlp()
    for r in explain_peak(d, Settings(mode="train", batch=4, optimizer="adam")):
        assert r["why"] == why_alive(r, d.nodes.get(r["layer"]) if r["layer"] else None)


def test_gradients_without_a_layer_are_told_apart():
    g = "gradients"
    assert SEED not in why_alive({"tensor": "MeanBackward0 gradient", "category": g}, None)
    assert "model's output" in why_alive({"tensor": "MeanBackward0 gradient", "category": g}, None)
    assert SEED not in why_alive({"tensor": "accumulated gradient", "category": g}, None)
    assert SEED not in why_alive({"tensor": "something else", "category": g}, None)
    assert SEED in why_alive({"tensor": "ones_like(loss)", "category": g}, None)


def test_the_header_names_amp_and_checkpointing():
    h = run_header(Settings(mode="train", batch=8, optimizer="adamw", amp=True, checkpointing=True))
    assert h == "train, batch 8, fp32, adamw, AMP on, activation checkpointing on, cuda semantics"
    assert run_header(Settings(mode="train", batch=2)) == \
        "train, batch 2, fp32, adam, AMP off, checkpointing off, cuda semantics"
    assert run_header(Settings(mode="inference")) == "inference, batch 1, fp32, cuda semantics"


def test_checkpoint_recomputations_are_named_as_such():
    d = _mlp()
    rows = explain_peak(d, Settings(mode="train", batch=64, optimizer="sgd", checkpointing=True))
    rec = [r for r in rows if r["tensor"].startswith("recomputed for backward")]
    assert rec and all(r["why"].startswith("recomputed by activation checkpointing") for r in rec)

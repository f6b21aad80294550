"""The engine's per-process memos (compiled memory rules keyed by spec numbers, per-layer parameter
sums, shape rules) only save time: an estimate after many others, under other settings, is
byte-identical to the same estimate with every memo empty."""

import json
from pathlib import Path

import pytest
from helpers import mlp

import memdesigner as md
from memdesigner.engine import compiled_rule, param_state
from memdesigner.model import flat_analysis as analysis

EX = Path(__file__).resolve().parents[2] / "resources" / "examples"

SETTINGS = [
    dict(mode="inference", batch=3),
    dict(mode="train", batch=2, optimizer="adam"),
    dict(mode="train", batch=2, optimizer="sgd"),
    dict(mode="train", batch=2, optimizer="momentum", dtype="bf16", master_weights=True),
    dict(mode="train", batch=2, optimizer="adam", backend="cpu"),
    dict(mode="train", batch=2, optimizer="adamw", amp=True, device="t4"),
    dict(mode="train", batch=4, optimizer="adam", device="a100-80gb"),
]


def _forget_everything() -> None:
    for memo in (compiled_rule.RULES, compiled_rule._SPEC_IDS, compiled_rule._SETTINGS_IDS, compiled_rule._OP_IDS,
                 param_state._FACTS, param_state._LAYERS, analysis._CACHE, analysis._PROPS, analysis._FROZEN):
        memo.clear()


def _report(design_name: str, kw: dict) -> str:
    rep = md.estimate(md.load_design(EX / f"{design_name}.json"), **kw)
    return json.dumps(rep.to_dict(), sort_keys=True, default=str)


@pytest.mark.parametrize("design_name", ["resnet18", "lstm_classifier", "transformer_encoder"])
def test_warm_memos_give_the_cold_estimate(design_name):
    cold = []
    for kw in SETTINGS:
        _forget_everything()
        cold.append(_report(design_name, kw))
    _forget_everything()
    for _ in range(2):  # warm: every setting after all the others, in both orders
        for i in list(range(len(SETTINGS))) + list(reversed(range(len(SETTINGS)))):
            assert _report(design_name, SETTINGS[i]) == cold[i], SETTINGS[i]


def test_an_input_that_stops_requiring_grad_is_a_new_rule():
    """Freezing fc1 makes the ReLU's input a tensor without grad: its memory rule (what autograd
    saves) is looked up again, not reused from the run where the input required grad."""
    kw = dict(mode="train", batch=32, optimizer="adam")
    _forget_everything()
    frozen = mlp()
    frozen.set_trainable("fc1", False)
    cold = md.estimate(frozen, **kw)
    _forget_everything()
    d = mlp()
    warm_before = md.estimate(d, **kw)
    d.set_trainable("fc1", False)
    warm = md.estimate(d, **kw)
    assert json.dumps(warm.to_dict(), sort_keys=True, default=str) == json.dumps(cold.to_dict(), sort_keys=True,
                                                                                default=str)
    # the ReLU no longer keeps its 32 x 256 fp32 output for backward, nor does backward reach fc1
    assert warm.peak_bytes < warm_before.peak_bytes


def test_a_field_edited_in_place_is_seen_by_the_graph_structure():
    """The graph's structure is kept on the design between estimates: a field it reads, changed
    without Design's methods (``output``: the model also returns the ReLU's value), rebuilds it."""
    kw = dict(mode="train", batch=32, optimizer="sgd")
    d = mlp()
    before = md.estimate(d, **kw)
    d.nodes["act"].output = True
    after = md.estimate(d, **kw)
    fresh = mlp()
    fresh.nodes["act"].output = True
    assert json.dumps(after.to_dict(), sort_keys=True, default=str) == json.dumps(
        md.estimate(fresh, **kw).to_dict(), sort_keys=True, default=str)

    def loss_moment(rep):
        return next(e.bytes for e in rep.timeline if e.label == "loss")
    # two outputs, two losses: one more fp32 scalar (out.mean() of the ReLU's value) at that moment
    assert loss_moment(after) - loss_moment(before) == 4


def test_weights_placed_again_when_a_bit_width_or_a_layer_changes():
    """A run without FSDP or tied parameters keeps its weight placement on the graph's structure for
    the next run over the same parameter lists and bit widths: a bit width set in place (not through
    Design.set_bits) or an edited layer places them again. fc1 at 4 bits: its 64 x 256 weight packs
    into 8,192 B instead of 65,536 (the bias stays fp32), 57,344 B less; fc2 with 16 outputs: 256 x 8
    more weights and 8 more biases, fp32 (8,224 B)."""
    kw = dict(mode="train", batch=32, optimizer="adam")
    d = mlp()
    first = md.estimate(d, **kw)
    assert md.estimate(d, **kw).param_bytes == first.param_bytes
    d.nodes["fc1"].bits = 4
    packed = md.estimate(d, **kw)
    assert first.param_bytes - packed.param_bytes == 57_344
    d.set_prop("fc2", "out_features", 16)
    wider = md.estimate(d, **kw)
    assert wider.param_bytes - packed.param_bytes == 8_224
    fresh = mlp()
    fresh.nodes["fc1"].bits = 4
    fresh.set_prop("fc2", "out_features", 16)
    assert json.dumps(wider.to_dict(), sort_keys=True, default=str) == json.dumps(
        md.estimate(fresh, **kw).to_dict(), sort_keys=True, default=str)

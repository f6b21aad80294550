"""Eight Keras 3 models (benchmarks/keras_models.py) imported from their model.to_json():
parameter counts and output shapes exactly as Keras reports them. The numbers in
tests/fixtures/keras/keras_facts.json were recorded from Keras 3.15 itself (count_params,
trainable_weights, non_trainable_weights, each layer's output.shape); no Keras needed here."""

import json

import pytest
from helpers import ROOT

import memdesigner
from memdesigner.importers.keras_json import load_keras_json

FIX = ROOT / "tests" / "fixtures" / "keras"
FACTS = json.loads((FIX / "keras_facts.json").read_text())


@pytest.mark.parametrize("name", sorted(FACTS))
def test_params_and_shapes_as_keras_reports_them(name):
    facts = FACTS[name]
    d = load_keras_json(FIX / f"{name}.json")
    rep = memdesigner.estimate(d, batch=2)
    assert rep.issues == [] and d.import_warnings == []
    assert (rep.total_params, rep.params, rep.non_trainable_params) == (
        facts["total"], facts["trainable"], facts["non_trainable"])
    rows = {r.id: r.output_shape for r in rep.layers}
    for layer, shape in facts["output_shapes"].items():
        got = rows[d.keras_layers[layer]]
        got = got[0] if isinstance(got[0], list) else got  # an RNN's first output
        assert got == [2, *shape], layer


def test_keras_rnn_bias_layout_by_hand():
    d = load_keras_json(FIX / "gru_tagger.json")
    per = {r.id: r.params for r in memdesigner.estimate(d).layers}
    k = d.keras_layers
    # GRU(32) on 12 features, reset_after=True: 3*32*(12+32) weights + a (2, 96) bias
    assert per[k["gru"]] == 3 * 32 * (12 + 32) + 2 * 3 * 32 == 4_416
    # GRU(24, reset_after=False) on 32: one bias vector, 3*24*(32+24+1)
    assert per[k["gru_1"]] == 3 * 24 * (32 + 24 + 1) == 4_104
    d = load_keras_json(FIX / "lstm_classifier.json")
    per = {r.id: r.params for r in memdesigner.estimate(d).layers}
    k = d.keras_layers
    assert per[k["lstm"]] == 4 * 48 * (32 + 48 + 1) == 15_552  # PyTorch's two biases: 15,744
    assert per[k["bidirectional"]] == 2 * 4 * 16 * (48 + 16 + 1) == 8_320


def test_batchnorm_statistics_are_non_trainable_parameters():
    d = load_keras_json(FIX / "mlp_bn.json")
    rows = {r.id: r for r in memdesigner.estimate(d).layers}
    bn = rows[d.keras_layers["batch_normalization"]]
    # Keras's summary: 512 params for BatchNormalization(128): gamma, beta trainable; moving
    # mean and variance not (no gradient, no optimizer state)
    assert (bn.params, bn.non_trainable) == (256, 256)


def test_conv1d_on_sequences_is_shown_steps_first():
    d = load_keras_json(FIX / "text_conv1d.json")
    rows = {r.id: r.output_shape for r in memdesigner.estimate(d, batch=1).layers}
    conv = d.nodes["conv1d"]  # inside: Conv1d over (channels, steps)
    assert conv.type == "Conv1d" and conv.layout == "moved"
    assert rows["conv1d"] == [1, 60, 32]  # Keras: (None, 60, 32)


def test_multi_head_attention_with_its_own_key_dim():
    """Keras MHA(num_heads=2, key_dim=16) on 8 features: q, k, v kernels (8, 2, 16) + biases
    (2, 16), output kernel (2, 16, 8) + bias (8): 3 x (256 + 32) + 256 + 8 = 1,128."""
    model = {"class_name": "Functional", "config": {"name": "m", "layers": [
        {"class_name": "InputLayer", "name": "x", "config": {"name": "x", "batch_input_shape": [None, 5, 8]},
         "inbound_nodes": []},
        {"class_name": "MultiHeadAttention", "name": "mha", "config": {"name": "mha", "num_heads": 2, "key_dim": 16},
         "inbound_nodes": [[["x", 0, 0, {}], ["x", 0, 0, {}]]]}]}}
    d = load_keras_json(model)
    assert d.nodes["mha"].type == "MultiHeadAttention" and d.nodes["mha"].props["head_dim"] == 16
    rep = memdesigner.estimate(d, batch=1)
    assert rep.params == 1_128 and rep.layers[-1].output_shape == [1, 5, 8]


@pytest.mark.parametrize("merge, width", [("sum", 16), ("ave", 16), ("mul", 16), ("concat", 32)])
def test_bidirectional_merge_modes(merge, width):
    """Keras: Bidirectional(LSTM(16, return_sequences=True), merge_mode) on (10, 8): 2 x 4 x 16 x
    (8 + 16 + 1) = 3,200 parameters; output (None, 10, 16), or (None, 10, 32) concatenated."""
    lstm = {"class_name": "LSTM", "config": {"name": "lstm", "units": 16, "return_sequences": True}}
    model = {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "InputLayer", "config": {"name": "in", "batch_input_shape": [None, 10, 8]}},
        {"class_name": "Bidirectional", "config": {"name": "bi", "layer": lstm, "merge_mode": merge}}]}}
    d = load_keras_json(model)
    assert d.import_warnings == []
    rep = memdesigner.estimate(d, batch=1)
    assert rep.params == 3_200
    out = {r.id: r.output_shape for r in rep.layers}[d.keras_layers["bi"]]
    out = out[0] if isinstance(out[0], list) else out  # concat: the LSTM node itself (and its h_n)
    assert out == [1, 10, width]

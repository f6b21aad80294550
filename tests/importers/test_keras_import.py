"""Keras model.to_json() import (resources/fixtures/*.keras2.json / *.keras3.json); no TensorFlow."""

import copy
import json

import pytest
from helpers import ROOT

import memdesigner
from memdesigner.importers.keras_json import KerasImportError, keras_shape, load_keras_json
from memdesigner.model.analysis import analyze

FIXTURES = ROOT / "resources" / "fixtures"
LAYOUTS = ["keras2", "keras3"]


def keras_shapes(design):
    """Keras layer name -> the per-sample output shape as Keras prints it (channels last)."""
    an = analyze(design)
    assert an.ok, an.issues
    return {k: keras_shape(an.nodes[nid].outputs[0].shape, design.channels_last)
            for k, nid in design.keras_layers.items()}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_seed_audio_cnn_matches_keras_summary(layout):
    d = load_keras_json(FIXTURES / f"seed_keras_audio.{layout}.json")
    assert d.channels_last is True
    assert d.import_warnings == []
    rep = memdesigner.estimate(d)
    assert rep.params == 770_482_865
    shapes = keras_shapes(d)
    assert shapes["conv2d"] == (1489, 255, 16)
    assert shapes["conv2d_1"] == (1487, 253, 16)
    assert shapes["flatten"] == (6_019_376,)
    assert shapes["dense"] == (128,)
    assert shapes["dense_1"] == (1,)
    # Keras summary: Conv2D 160, Conv2D 2,320, Dense 770,480,256, Dense 129
    by_type = [(r.type, r.params) for r in rep.layers if r.params]
    assert by_type == [("Conv2d", 160), ("Conv2d", 2_320), ("Linear", 770_480_256), ("Linear", 129)]
    # the report shows Keras's (batch, H, W, C), as model.summary() prints (None, 1489, 255, 16)
    rows = {r.id: r.output_shape for r in rep.layers}
    assert rows[d.keras_layers["conv2d"]] == [1, 1489, 255, 16]
    assert rows[d.keras_layers["conv2d_1"]] == [1, 1487, 253, 16]
    assert rows[d.keras_layers["flatten"]] == [1, 6_019_376]
    # internally channels first: the Input is (C, H, W)
    inp = next(n for n in d.nodes.values() if n.type == "Input")
    assert tuple(inp.props["shape"]) == (1, 1491, 257)
    # activations are separate nodes
    assert [n.type for n in d.nodes.values()].count("ReLU") == 3
    assert [n.type for n in d.nodes.values()].count("Sigmoid") == 1


def test_seed_audio_same_memory_as_the_hand_built_example():
    """The hand-built example is the PyTorch model; the import runs as Keras on the torch backend
    (impl keras_torch, layer outputs held to the end of the forward). Taken back to PyTorch's
    semantics, the import is the example exactly."""
    ex = memdesigner.load_design(ROOT / "resources" / "examples" / "seed_keras_audio.json")
    for layout in LAYOUTS:
        d = load_keras_json(FIXTURES / f"seed_keras_audio.{layout}.json")
        assert memdesigner.estimate(d, batch=2).peak_bytes > memdesigner.estimate(ex, batch=2).peak_bytes
        for n in d.nodes.values():
            n.keep_until = ""
            if "impl" in n.props:
                n.props["impl"] = "torch"
        for mode in ("inference", "train"):
            a = memdesigner.estimate(d, mode=mode, batch=2)
            b = memdesigner.estimate(ex, mode=mode, batch=2)
            assert (a.params, a.peak_bytes, a.flops) == (b.params, b.peak_bytes, b.flops)


def test_both_layouts_give_the_same_design():
    d2 = load_keras_json(FIXTURES / "seed_keras_audio.keras2.json")
    d3 = load_keras_json(FIXTURES / "seed_keras_audio.keras3.json")
    t2 = [(n.type, n.props) for n in d2.nodes.values()]
    t3 = [(n.type, n.props) for n in d3.nodes.values()]
    assert t2 == t3


@pytest.mark.parametrize("layout", LAYOUTS)
def test_functional_with_add_and_concatenate(layout):
    d = load_keras_json(FIXTURES / f"functional_small.{layout}.json")
    assert d.name == "functional_small"
    assert d.import_warnings == []
    rep = memdesigner.estimate(d, mode="train", batch=4)
    assert rep.issues == []
    # Keras: total 3,252 = trainable 3,220 + BatchNormalization's moving mean/variance (32, buffers here)
    assert rep.params == 3_220
    assert (rep.non_trainable_params, rep.total_params) == (32, 3_252)
    assert rep.buffer_bytes >= 32 * 4
    shapes = keras_shapes(d)
    assert shapes["add"] == (32, 32, 16)
    assert shapes["dw"] == (32, 32, 6)  # DepthwiseConv2D, depth_multiplier 2
    assert shapes["sep"] == (32, 32, 8)  # SeparableConv2D: depthwise + pointwise
    assert shapes["concat"] == (16, 16, 24)  # axis=-1 (channels) -> Concat dim 1 inside
    assert shapes["gap"] == (24,)
    assert shapes["logits"] == (10,)
    types = {n.type for n in d.nodes.values()}
    assert {"Add", "Concat", "BatchNorm2d", "MaxPool2d", "AdaptiveAvgPool2d", "Dropout", "Softmax"} <= types
    concat = d.nodes[d.keras_layers["concat"]]
    assert concat.props["dim"] == 1
    add_inputs = {e.src for e in d.inputs_of("add")}
    assert add_inputs == {d.keras_layers["conv_a"], d.keras_layers["bn_b"]}
    dw = d.nodes["dw"]
    assert dw.props["groups"] == 3 and dw.props["out_channels"] == 6
    assert d.nodes["sep_depthwise"].props["groups"] == 6
    assert d.nodes["bn_b"].props["eps"] == pytest.approx(1e-3)
    assert d.nodes["bn_b"].props["momentum"] == pytest.approx(0.01)


def test_layout_and_round_trip(tmp_path):
    d = load_keras_json(FIXTURES / "functional_small.keras3.json")
    spots = [n.pos for n in d.nodes.values()]
    assert len(set(spots)) == len(spots)
    for e in d.edges:
        assert d.nodes[e.src].pos[0] < d.nodes[e.dst].pos[0]
    out = tmp_path / "imported.json"
    memdesigner.save_design(d, out)
    back = memdesigner.load_design(out)
    assert back.channels_last is True
    assert memdesigner.estimate(back, mode="train").peak_bytes == memdesigner.estimate(d, mode="train").peak_bytes


def test_accepts_dict_string_and_path():
    path = FIXTURES / "seed_keras_audio.keras2.json"
    text = path.read_text()
    for src in (path, str(path), text, json.loads(text)):
        assert memdesigner.estimate(load_keras_json(src)).params == 770_482_865


def _seq(*layers):
    return {"class_name": "Sequential", "config": {"name": "s", "layers": list(layers)}}


def _layer(cls, **cfg):
    return {"class_name": cls, "config": cfg}


def test_unknown_layer_becomes_generic_with_a_warning():
    model = _seq(_layer("InputLayer", batch_input_shape=[None, 8, 8, 3], name="in"),
                 _layer("FancyNorm", name="fancy"),
                 _layer("Conv2D", name="conv", filters=4, kernel_size=[3, 3], padding="valid", activation="linear"))
    d = load_keras_json(model)
    node = d.nodes[d.keras_layers["fancy"]]
    assert node.type == "Generic" and node.props["op"] == "FancyNorm"
    assert any("FancyNorm" in w for w in d.import_warnings)
    rep = memdesigner.estimate(d)
    assert rep.issues == []
    assert any("fancy" in w for w in rep.warnings)  # the engine flags the rule-less op too
    assert keras_shapes(d)["conv"] == (6, 6, 4)


def test_unknown_layer_shape_from_keras3_tensors():
    data = json.loads((FIXTURES / "functional_small.keras3.json").read_text())
    for layer in data["config"]["layers"]:
        if layer["config"]["name"] == "gap":
            layer["class_name"] = "MysteryPool"
    d = load_keras_json(data)
    node = d.nodes[d.keras_layers["gap"]]
    assert node.type == "Generic" and tuple(node.props["out_shape"]) == (24,)
    assert any("MysteryPool" in w for w in d.import_warnings)
    assert memdesigner.estimate(d).params == 3_220


def test_lstm_and_embedding():
    model = _seq(_layer("Embedding", name="emb", input_dim=20000, output_dim=256, batch_input_shape=[None, 128],
                        dtype="float32", input_length=128),
                 _layer("LSTM", name="lstm1", units=512, return_sequences=True, use_bias=True),
                 _layer("LSTM", name="lstm2", units=512, return_sequences=False, use_bias=True),
                 _layer("Dense", name="out", units=10, activation="softmax"))
    d = load_keras_json(model)
    inp = next(n for n in d.nodes.values() if n.type == "Input")
    assert inp.props["dtype"] == "int64" and inp.props["vocab"] == 20000
    rep = memdesigner.estimate(d)
    # Keras's layout: one bias vector per LSTM, 4 x 512 x (in + 512 + 1) each:
    # 20000 x 256 + 4 x 512 x 769 + 4 x 512 x 1025 + 5130 (PyTorch's two biases: 8,803,338)
    assert rep.params == 8_799_242
    assert {d.nodes[d.keras_layers[k]].props["rnn_bias"] for k in ("lstm1", "lstm2")} == {"single"}
    assert d.import_warnings == []
    assert keras_shapes(d)["lstm1"] == (128, 512)


def test_channels_first_models_are_taken_as_they_are():
    model = _seq(_layer("InputLayer", batch_input_shape=[None, 3, 32, 32], name="in"),
                 _layer("Conv2D", name="conv", filters=8, kernel_size=[3, 3], padding="same",
                        data_format="channels_first", activation="relu"))
    d = load_keras_json(model)
    assert d.channels_last is False
    assert analyze(d).nodes[d.keras_layers["conv"]].outputs[0].shape == (8, 32, 32)


def test_open_dimension_needs_a_size():
    model = _seq(_layer("InputLayer", batch_input_shape=[None, None, 16], name="in"),
                 _layer("LSTM", name="lstm", units=8))
    with pytest.raises(KerasImportError, match="open dimension"):
        load_keras_json(model)
    d = load_keras_json(model, unknown_dim=50)
    assert keras_shapes(d)["in"] == (50, 16)


@pytest.mark.parametrize("bad, match", [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"format": "memdesigner-design"}', "not a Keras model config"),
    ('{"class_name": "Sequential", "config": {"layers": []}}', "non-empty list"),
    ('{"class_name": "Pipeline", "config": {}}', "not supported"),
    ('{"class_name": "Sequential", "config": {"layers": [{"class_name": "Dense", "config": {"units": 3}}]}}',
     "no input shape"),
    ('{"class_name": "Sequential", "config": {"layers": [42]}}', r"layers\[0\]"),
])
def test_malformed_files_raise_value_error(bad, match):
    with pytest.raises(ValueError, match=match):
        load_keras_json(bad)


def test_malformed_functional_graph():
    data = json.loads((FIXTURES / "functional_small.keras2.json").read_text())
    broken = copy.deepcopy(data)
    broken["config"]["layers"][1]["inbound_nodes"] = [[["no_such_layer", 0, 0, {}]]]
    with pytest.raises(KerasImportError, match="no_such_layer"):
        load_keras_json(broken)
    broken = copy.deepcopy(data)
    broken["config"]["layers"][1]["inbound_nodes"] = "image"
    with pytest.raises(KerasImportError, match="inbound_nodes"):
        load_keras_json(broken)


def test_bad_layer_config_names_the_layer():
    model = _seq(_layer("InputLayer", batch_input_shape=[None, 4, 4, 3], name="in"),
                 _layer("Conv2D", name="too_big", filters=2, kernel_size=[9, 9], padding="valid"))
    with pytest.raises(KerasImportError, match="too_big"):
        load_keras_json(model)
    model = _seq(_layer("InputLayer", batch_input_shape=[None, 4], name="in"), _layer("Dense", name="d"))
    with pytest.raises(KerasImportError, match="'d'"):
        load_keras_json(model)


def test_missing_file(tmp_path):
    with pytest.raises(KerasImportError, match="cannot read"):
        load_keras_json(tmp_path / "nope.json")


def test_keras_archive(tmp_path):
    import zipfile

    path = tmp_path / "model.keras"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", (FIXTURES / "seed_keras_audio.keras3.json").read_text())
        z.writestr("metadata.json", '{"keras_version": "3.6.0"}')
    assert memdesigner.estimate(load_keras_json(path)).params == 770_482_865

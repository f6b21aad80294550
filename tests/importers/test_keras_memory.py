"""Memory of imported Keras models as Keras 3 runs them on the PyTorch backend (impl keras_torch).

Every number here was measured with shared/truth/measure.py (method a: live tensor storage) on
Keras 3.15.1 + torch 2.13 CPU, KERAS_BACKEND=torch, batch 8, SGD; see
benchmarks/keras_models.py. The single-layer cases are exact and each guards one mechanism: the
rule that PyTorch's module of the same name follows gives a different number.
"""

import json

import pytest
from helpers import ROOT

import memdesigner
from memdesigner.importers.keras_json import load_keras_json
from memdesigner.model.design import GC_HELD

FIX = ROOT / "tests" / "fixtures" / "keras"


def _seq(shape, *layers, dtype="float32"):
    first = {"class_name": "InputLayer", "config": {"name": "in", "batch_input_shape": [None, *shape], "dtype": dtype}}
    return {"class_name": "Sequential", "config": {"name": "s", "layers": [first, *layers]}}


def _l(cls, name, **cfg):
    return {"class_name": cls, "config": {"name": name, **cfg}}


CASES = [
    # (what it guards, model, mode, measured peak bytes)
    ("Dense adds its bias separately: matmul and add outputs meet",
     _seq((256,), _l("Dense", "d", units=512)), "inference", 567_296),
    ("Conv2D: conv output + bias add output",
     _seq((32, 32, 8), _l("Conv2D", "c", filters=16, kernel_size=3)), "inference", 1_188_416),
    ("Conv2D keeps its channels_last input copy and kernel copy",
     _seq((32, 32, 8), _l("Conv2D", "c", filters=16, kernel_size=3)), "train", 1_459_848),
    ("Conv2D on one channel: no input copy, only the kernel's",
     _seq((32, 32, 1), _l("Conv2D", "c", filters=16, kernel_size=3)), "train", 956_232),
    ("uneven SAME padding: Keras pads a copy the convolution keeps",
     _seq((32, 32, 3), _l("Conv2D", "c", filters=16, kernel_size=3, strides=2, padding="same", use_bias=False)),
     "train", 470_184),
    ("DepthwiseConv2D: the same copies, groups = channels",
     _seq((32, 32, 16), _l("DepthwiseConv2D", "dw", kernel_size=3, padding="same")), "train", 2_099_016),
    ("Conv3D: the same copies in channels_last_3d",
     _seq((8, 16, 16, 4), _l("Conv3D", "c", filters=8, kernel_size=3)), "train", 1_136_840),
    ("MaxPooling2D pools a channels-first copy",
     _seq((32, 32, 16), _l("MaxPooling2D", "p", pool_size=2)), "inference", 1_441_792),
    ("Flatten after pooling copies (Keras flattens H, W, C of channels-first memory)",
     _seq((32, 32, 8), _l("Conv2D", "c", filters=16, kernel_size=3), _l("MaxPooling2D", "p", pool_size=2),
          _l("Flatten", "f"), _l("Dense", "d", units=4)), "train", 1_973_840),
    ("BatchNormalization: x - mean cloned for mul_, a second full-size gradient",
     _seq((32, 32, 16), _l("BatchNormalization", "bn")), "train", 2_621_896),
    ("BatchNormalization on features", _seq((256,), _l("BatchNormalization", "bn")), "train", 48_136),
    ("Conv2DTranspose: uncropped output, slice_backward's zero-filled gradients",
     _seq((16, 16, 16), _l("Conv2DTranspose", "t", filters=8, kernel_size=3, strides=2, padding="same")),
     "inference", 676_640),
    ("Keras MultiHeadAttention: biased q, k, v, their SDPA copies, SDPA's output",
     {"class_name": "Functional", "config": {"name": "m", "layers": [
         {"class_name": "InputLayer", "name": "x", "config": {"name": "x", "batch_input_shape": [None, 16, 32]},
          "inbound_nodes": []},
         {"class_name": "MultiHeadAttention", "name": "mha", "config": {"name": "mha", "num_heads": 4, "key_dim": 8},
          "inbound_nodes": [[["x", 0, 0, {}], ["x", 0, 0, {}]]]}]}}, "inference", 150_016),
    # video / medical volumes (D, H, W, C), measured the same way (Keras 3.15.1, torch 2.13 CPU)
    ("MaxPooling3D pools a channels-first copy",
     _seq((8, 16, 16, 4), _l("MaxPooling3D", "p", pool_size=2)), "inference", 622_592),
    ("MaxPooling3D after Conv3D keeps its copy and the argmax indices",
     _seq((8, 16, 16, 4), _l("Conv3D", "c", filters=8, kernel_size=3), _l("MaxPooling3D", "p", pool_size=2)),
     "train", 1_283_880),
    ("AveragePooling3D pools a channels-first copy",
     _seq((8, 16, 16, 4), _l("AveragePooling3D", "p", pool_size=2)), "inference", 557_056),
    ("AveragePooling3D after Conv3D keeps its copy",
     _seq((8, 16, 16, 4), _l("Conv3D", "c", filters=8, kernel_size=3), _l("AveragePooling3D", "p", pool_size=2)),
     "train", 1_208_616),
    ("BatchNormalization on a 5-D input: Keras's own ops",
     _seq((8, 16, 16, 4), _l("BatchNormalization", "bn")), "inference", 524_384),
    ("BatchNormalization on a 5-D input: the clone and the second gradient",
     _seq((8, 16, 16, 4), _l("BatchNormalization", "bn")), "train", 1_310_840),
    ("Keras LSTM on CPU: x_proj and its bias add meet",
     _seq((20, 16), _l("LSTM", "r", units=32)), "inference", 201_224),
    ("Keras GRU on CPU: x_proj and its bias add meet",
     _seq((20, 16), _l("GRU", "r", units=32)), "inference", 153_352),
    # training: x_proj is kept by no one (a local); each step keeps gates*H + 7*H values; the walk back
    # meets three full-size x_proj gradients beside the recurrent kernel's gradient only
    ("Keras LSTM training: per-step values, x_proj not kept, the kernel gradient after the walk",
     _seq((20, 16), _l("LSTM", "r", units=32, return_sequences=True)), "train", 553_488),
    ("Keras GRU training: per-step h_proj and gate values, the (2, 3H) bias gradient in the walk",
     _seq((20, 16), _l("GRU", "r", units=32, return_sequences=True)), "train", 466_448),
    ("Keras Bidirectional LSTM training: the reverse output's flipped gradient during its walk",
     _seq((20, 16), {"class_name": "Bidirectional", "config": {"name": "bi", "layer": {
         "class_name": "LSTM", "config": {"name": "r", "units": 16, "return_sequences": True}}}}), "train", 440_856),
    ("Keras GRU(reset_after=False) training: the generic cell loop, no x_proj",
     _seq((20, 16), _l("GRU", "r", units=24, return_sequences=True, reset_after=False)), "train", 198_992),
]


@pytest.mark.parametrize("what, model, mode, measured", CASES, ids=[c[0][:40] for c in CASES])
def test_single_layers_as_measured(what, model, mode, measured):
    d = load_keras_json(model)
    est = memdesigner.estimate(d, mode=mode, batch=8, optimizer="sgd", backend="cpu").peak_bytes
    assert est == pytest.approx(measured, rel=1e-4, abs=16), what


def test_layer_outputs_live_until_the_forward_returns():
    """Keras's Function._run_through_graph keeps every layer output in a dict: three ReLU-ed
    conv outputs all meet at the last layer (measured: 4,416,964 B for audio_cnn inference)."""
    d = load_keras_json(FIX / "audio_cnn.json")
    held = [n for n in d.nodes.values() if n.keep_until]
    assert held and {n.keep_until for n in held} == {d.topo_order()[-1]}
    assert memdesigner.estimate(d, batch=8, backend="cpu").peak_bytes == 4_416_964


MEASURED = json.loads((FIX / "keras_measured.json").read_text())
CONFIGS = {"inference-b8": ("inference", "none"), "train-sgd-b8": ("train", "sgd"), "train-adam-b8": ("train", "adam")}


@pytest.mark.parametrize("key", sorted(MEASURED))
def test_eight_models_within_measured(key):
    name, cfg = key.split("/")
    mode, opt = CONFIGS[cfg]
    d = load_keras_json(FIX / f"{name}.json")
    est = memdesigner.estimate(d, mode=mode, batch=8, optimizer=opt, backend="cpu").peak_bytes
    truth = MEASURED[key]["peak_overall"]
    assert abs(est - truth) <= 0.013 * truth, (est, truth)


def test_merge_layer_inputs_wait_for_the_garbage_collector():
    """Keras 3.15's merge layers (Add, Concatenate, ...) on the PyTorch backend leave the list of
    their inputs in a reference cycle (measured: freed by gc.collect(), not by their last use).
    The Transformer block's residual Adds keep the attention output and ff2's output to the end of
    the step: measured 325,248 B (SGD) and 394,464 B (Adam); without the rule 292,480 B (-10 %)."""
    d = load_keras_json(FIX / "attention_block.json")
    assert {n.id for n in d.nodes.values() if n.keep_until == GC_HELD} == {"mha", "ln1", "ff2"}
    rep = memdesigner.estimate(d, mode="train", batch=8, optimizer="sgd", backend="cpu")
    assert rep.peak_bytes == 325_248
    assert any("garbage collector" in w and "32,768 B" in w for w in rep.warnings), rep.warnings
    adam = memdesigner.estimate(d, mode="train", batch=8, optimizer="adam", backend="cpu").peak_bytes
    assert abs(adam - 394_464) <= 32


def test_conv3d_is_modelled_with_keras_params_and_shape():
    d = load_keras_json(_seq((8, 16, 16, 4), _l("Conv3D", "c", filters=8, kernel_size=3)))
    assert d.import_warnings == [] and d.nodes["c"].type == "Conv3d"
    rep = memdesigner.estimate(d, batch=1)
    assert rep.params == 8 * 4 * 27 + 8 == 872
    assert rep.layers[-1].output_shape == [1, 6, 14, 14, 8]  # Keras: (None, 6, 14, 14, 8)


def test_3d_pooling_and_batchnorm_map_with_keras_params_and_shapes():
    """Keras's summary: MaxPooling3D(2) of (8, 16, 16, 4) is (4, 8, 8, 4); BatchNormalization on
    it has 8 trainable (gamma, beta) and 8 non-trainable (moving mean, variance) weights."""
    d = load_keras_json(_seq((8, 16, 16, 4), _l("BatchNormalization", "bn"), _l("MaxPooling3D", "p", pool_size=2),
                             _l("AveragePooling3D", "a", pool_size=(1, 2, 2))))
    assert d.import_warnings == []
    assert [d.nodes[n].type for n in ("bn", "p", "a")] == ["BatchNorm3d", "MaxPool3d", "AvgPool3d"]
    rep = memdesigner.estimate(d, batch=1)
    assert (rep.params, rep.non_trainable_params) == (8, 8)
    assert rep.layers[-1].output_shape == [1, 4, 4, 4, 4]  # Keras: (None, 4, 4, 4, 4)

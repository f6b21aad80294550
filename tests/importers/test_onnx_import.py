"""ONNX import: graphs built by hand with onnx.helper (numbers derived below), bad files, and a
round trip through torch.onnx.export on a few models (the rest in benchmarks/onnx_roundtrip.py)."""

import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import memdesigner  # noqa: E402
from memdesigner.cli import main  # noqa: E402
from memdesigner.importers.onnx_import import OnnxImportError, from_model, load_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
F = TensorProto.FLOAT


def _init(name, *shape):
    return numpy_helper.from_array(np.random.rand(*shape).astype(np.float32), name)


def _const(name, values, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, dtype=dtype)))


def _model(nodes, inits, in_shape=("N", 3, 8, 8), out="y", opset=17):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, list(in_shape))],
                          [helper.make_tensor_value_info(out, F, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _cnn():
    """Conv(3->4, 3x3, pad 1) + BN + Relu + GlobalAveragePool + Flatten + Gemm(4->5)."""
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], name="/bn/BatchNormalization",
                         epsilon=1e-5, momentum=0.9),
        helper.make_node("Relu", ["n"], ["r"], name="/relu/Relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["p"], ["f"], name="/Flatten", axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="/fc/Gemm", transB=1),
    ]
    inits = [_init("cw", 4, 3, 3, 3), _init("cb", 4), _init("s", 4), _init("b", 4), _init("m", 4), _init("v", 4),
             _init("fw", 5, 4), _init("fb", 5)]
    return _model(nodes, inits)


def test_layers_map_through_the_registrations():
    d = from_model(_cnn())
    types = [n.type for n in d.nodes.values()]
    assert types == ["Input", "Conv2d", "BatchNorm2d", "ReLU", "AdaptiveAvgPool2d", "Flatten", "Linear"]
    conv = d.nodes["conv.conv"]
    assert conv.props["out_channels"] == 4 and conv.props["padding"] == 1 and conv.props["bias"] is True
    assert d.nodes["bn.batchnormalization"].props["momentum"] == pytest.approx(0.1)  # ONNX keeps 1 - momentum
    # conv 4*3*3*3 + 4, BN weight + bias 8, Gemm 5*4 + 5: 145 trainable; BN's mean/var are buffers
    assert d.import_params == 108 + 4 + 8 + 25
    assert d.import_warnings == []
    # the input's dynamic dim is the batch
    assert d.nodes["x"].props["shape"] == (3, 8, 8)


def test_scope_from_torch_onnx_names():
    d = from_model(_cnn())
    assert d.nodes["conv.conv"].scope == "conv"


def test_shared_initializer_counted_once():
    """Two Gemm layers reading one weight: one tensor (the second is tied to the first)."""
    nodes = [helper.make_node("Gemm", ["x", "w"], ["h"], transB=1, name="/a/Gemm"),
             helper.make_node("Gemm", ["h", "w"], ["y"], transB=1, name="/b/Gemm")]
    d = from_model(_model(nodes, [_init("w", 6, 6)], in_shape=("N", 6)))
    assert d.import_params == 36
    assert d.nodes["b.gemm"].tied == {"weight": "a.gemm.weight"}
    assert memdesigner.estimate(d, mode="inference", batch=1).at_peak["weights"] == 36 * 4


def test_identity_of_an_initializer_is_its_own_tensor():
    """torch.onnx merges initializers of equal value through Identity nodes (fresh BN weights are
    all ones): in the source model those were separate parameters."""
    nodes = [helper.make_node("Identity", ["w"], ["w2"]),
             helper.make_node("Gemm", ["x", "w"], ["h"], transB=1, name="/a/Gemm"),
             helper.make_node("Gemm", ["h", "w2"], ["y"], transB=1, name="/b/Gemm")]
    d = from_model(_model(nodes, [_init("w", 6, 6)], in_shape=("N", 6)))
    assert d.import_params == 72
    assert not d.nodes["b.gemm"].tied


def test_shape_subgraph_folded_into_a_reshape():
    """x.view(x.size(0), -1) as torch.onnx writes it: Shape -> Gather -> Unsqueeze -> Concat."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]), _const("i0", 0),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0), _const("ax", [0]),
        helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]), _const("m1", [-1]),
        helper.make_node("Concat", ["bu", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"], name="/Reshape"),
    ]
    d = from_model(_model(nodes, []))
    assert [n.type for n in d.nodes.values()] == ["Input", "Reshape"]
    assert d.nodes["Reshape"].props["shape"] == (192,)
    assert d.import_warnings == []


def test_split_patterns_fuse():
    """MatMul + bias Add is one Linear; x * Sigmoid(x) is SiLU; the Erf chain is GELU."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="/fc/MatMul"),
        helper.make_node("Add", ["b", "mm"], ["h"], name="/fc/Add"),
        helper.make_node("Sigmoid", ["h"], ["sg"]),
        helper.make_node("Mul", ["h", "sg"], ["s"]),
        _const("sq2", 2 ** 0.5, np.float32), _const("one", 1.0, np.float32), _const("half", 0.5, np.float32),
        helper.make_node("Div", ["s", "sq2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["s", "e1"], ["g"]),
        helper.make_node("Mul", ["g", "half"], ["y"]),
    ]
    d = from_model(_model(nodes, [_init("w", 6, 10), _init("b", 10)], in_shape=("N", 7, 6)))
    assert [n.type for n in d.nodes.values()] == ["Input", "Linear", "SiLU", "GELU"]
    assert d.nodes["fc.matmul"].props == {"out_features": 10, "bias": True, "impl": "torch", "weight_norm": None,
                                          "weight_norm_hook": False}
    assert d.import_params == 70


def test_unknown_op_is_generic_with_its_inferred_shape():
    nodes = [helper.make_node("HardSwish", ["x"], ["h"], name="/act/HardSwish"),
             helper.make_node("Relu", ["h"], ["y"])]
    d = from_model(_model(nodes, []))
    g = next(n for n in d.nodes.values() if n.type == "Generic")
    assert g.props["op"] == "HardSwish" and g.props["out_shape"] == (3, 8, 8)
    assert any("HardSwish has no memdesigner rule" in w for w in d.import_warnings)
    assert d.import_warnings[-1].startswith("1 of 3 nodes are Generic")
    # the output still counts: batch 1 inference holds input, HardSwish output and ReLU output
    assert memdesigner.estimate(d, mode="inference", batch=1).peak_bytes == 3 * 192 * 4


def test_input_shape_override_and_dynamic_dims():
    d = from_model(_cnn(), input_shape=(3, 16, 16))
    assert d.nodes["x"].props["shape"] == (3, 16, 16)
    with pytest.raises(OnnxImportError, match="pass --input-shape"):
        from_model(_model([helper.make_node("Relu", ["x"], ["y"])], [], in_shape=("N", 3, "H", "W")))


def test_cli_import_and_bad_files(tmp_path, capsys):
    good = tmp_path / "m.onnx"
    onnx.save(_cnn(), str(good))
    out = tmp_path / "d.json"
    assert main(["import", "onnx", str(good), "-o", str(out), "--input-shape", "3,16,16"]) == 0
    assert tuple(memdesigner.load_design(str(out)).nodes["x"].props["shape"]) == (3, 16, 16)
    capsys.readouterr()
    notonnx = tmp_path / "notes.onnx"
    notonnx.write_text("this is not a model\n")
    truncated = tmp_path / "t.onnx"
    truncated.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    for args in ([str(notonnx), "-o", str(out)], [str(truncated), "-o", str(out)],
                 [str(tmp_path / "missing.onnx"), "-o", str(out)],
                 [str(good), "-o", str(tmp_path / "no" / "such" / "dir.json")]):
        assert main(["import", "onnx", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("memdesigner: error:"), err


def test_registry_onnx_column_is_documented():
    from memdesigner.importers.onnx_import import ops_table

    doc = (ROOT / "docs" / "onnx-import.md").read_text()
    assert ops_table() in doc, "docs/onnx-import.md is stale: run python tools/make_onnx_docs.py"


# ----------------------------------------------------------------------------------------------
# round trip through torch.onnx.export
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rt():
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import onnx_roundtrip

    return onnx_roundtrip


@pytest.mark.parametrize("name", ["tcn", "gpt_sdpa_tied", "se_resnet_gn", "vit_meanpool"])
def test_torch_export_round_trip(rt, name):
    """Same parameters; the same inference peak as the torch design once what ONNX cannot say
    (in-place ops, tensors kept by Python variables) is taken out of it."""
    import holdout_models

    r = rt.roundtrip(name, holdout_models.MODELS[name], batch=4)
    assert r["params_onnx"] == r["params_torch"]
    assert r["peak_onnx"] == r["peak_graph"]
    assert r["generic"] == 0


def test_round_trip_exact_without_inplace_or_locals(rt):
    """lstm_maxpool's torch design has no in-place op and keeps no tensor by a Python variable:
    the ONNX import has the same peak (a stacked LSTM, max over time, Linear)."""
    import holdout_models

    r = rt.roundtrip("lstm_maxpool", holdout_models.MODELS["lstm_maxpool"], batch=4)
    assert r["why"] == "" and r["peak_onnx"] == r["peak_torch"]
    assert r["params_onnx"] == r["params_torch"]


def test_batchnorm_folded_by_constant_folding_changes_the_design(rt):
    """The exporter's default (do_constant_folding=True, eval) folds BN into the conv: the file has
    no BatchNormalization and the conv gains a bias, so the count differs by the BN's 2*C weights
    minus the C-sized conv bias. The round trip exports with folding off for that reason."""
    import io
    import warnings

    import torch

    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, bias=False), torch.nn.BatchNorm2d(8)).eval()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.zeros(1, 3, 8, 8),), f, dynamo=False)
    folded = from_model(onnx.load_from_string(f.getvalue()))
    kept = from_model(onnx.load_from_string(rt.export(m, (3, 8, 8))))
    assert [n.type for n in folded.nodes.values()] == ["Input", "Conv2d"]
    assert folded.import_params == 216 + 8
    assert [n.type for n in kept.nodes.values()] == ["Input", "Conv2d", "BatchNorm2d"]
    assert kept.import_params == 216 + 16


def test_load_onnx_reads_a_file(tmp_path):
    p = tmp_path / "cnn.onnx"
    onnx.save(_cnn(), str(p))
    assert load_onnx(p).import_params == 145


def test_transformer_encoder_layer_fast_path(rt):
    """nn.TransformerEncoderLayer in inference runs as one fused kernel (even heads, GELU, bias):
    the ONNX import gathers its MultiheadAttention and marks the layer fused, as from PyTorch."""
    import torch

    def factory():
        layer = torch.nn.TransformerEncoderLayer(32, 2, 64, activation="gelu", batch_first=True)
        # inside a container: the PyTorch importer maps a called TransformerEncoder as a whole
        return torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)), (16, 32)

    r = rt.roundtrip("encoder", factory, batch=4)
    assert r["generic"] == 0 and r["params_onnx"] == r["params_torch"]
    assert r["peak_onnx"] == r["peak_graph"]


def test_stacked_bidirectional_lstm_is_one_layer(rt):
    """torch.onnx writes nn.LSTM(num_layers=2, bidirectional) as two LSTM nodes joined by a
    Transpose + Reshape; the design has one LSTM with num_layers=2, as from PyTorch."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
            self.fc = torch.nn.Linear(32, 3)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.fc(out[:, -1])

    d = from_model(onnx.load_from_string(rt.export(Net(), (12, 8))))
    lstm = [n for n in d.nodes.values() if n.type == "LSTM"]
    assert len(lstm) == 1 and lstm[0].props["num_layers"] == 2 and lstm[0].props["bidirectional"]
    r = rt.roundtrip("lstm2", lambda: (Net(), (12, 8)), batch=4)
    assert r["generic"] == 0 and r["params_onnx"] == r["params_torch"] == sum(p.numel() for p in Net().parameters())
    assert r["peak_onnx"] == r["peak_graph"]


def test_video_layers_round_trip_through_torch_onnx_export(rt):
    """Conv3d, BatchNorm3d, MaxPool3d and AvgPool3d map back to their registrations from ONNX's
    Conv / BatchNormalization / MaxPool / AveragePool on 5-D tensors."""
    import torch

    m = torch.nn.Sequential(torch.nn.Conv3d(2, 4, 3, padding=1), torch.nn.BatchNorm3d(4), torch.nn.MaxPool3d(2),
                            torch.nn.AvgPool3d((1, 2, 2))).eval()
    d = from_model(onnx.load_from_string(rt.export(m, (2, 6, 8, 8))))
    assert [n.type for n in d.nodes.values()] == ["Input", "Conv3d", "BatchNorm3d", "MaxPool3d", "AvgPool3d"]
    assert d.import_params == 2 * 4 * 27 + 4 + 8 and d.import_warnings == []
    rep = memdesigner.estimate(d, batch=1)
    assert rep.layers[-1].output_shape == [1, 4, 3, 2, 2]

"""Softsign (x / (1 + |x|)), added in one file (model/layers/activation.py): its memory rule
against PyTorch, per phase. Truth: ../shared/truth/measure.py, method a, torch 2.13.0 CPU, seed 0,
Linear(32, 64) -> Softsign -> Linear(64, 8) at batch 16 (n = 16 x 64 fp32 = 4,096 B): F.softsign
runs ``x / (x.abs() + 1)``, keeps x and the divisor 1 + |x| (forward +2n over GELU's +n), and its
backward peaks 3n above the input's gradient (x / d / d, the divisor's gradient, sign(x))."""

import pytest

import memdesigner
from memdesigner.engine.settings import Settings
from memdesigner.model.design import Design

# measured phase peaks (bytes): mode/optimizer -> {phase: bytes}
MEASURED = {
    ("inference", "none"): {"forward": 24_864},
    ("train", "sgd"): {"forward": 25_380, "backward": 43_848, "optimizer_step": 23_620},
    ("train", "adam"): {"forward": 46_452, "backward": 64_920, "optimizer_step": 61_076},
}


def _design(act="Softsign") -> Design:
    d = Design("softsign")
    d.add_node("Input", {"shape": (32,)}, id="x")
    d.add_node("Linear", {"out_features": 64}, id="fc")
    d.add_node(act, {}, id="act")
    d.add_node("Linear", {"out_features": 8}, id="out")
    d.add_edge("x", "fc")
    d.add_edge("fc", "act")
    d.add_edge("act", "out")
    return d


@pytest.mark.parametrize("mode,optimizer", sorted(MEASURED))
def test_phase_peaks_match_pytorch(mode, optimizer):
    est = memdesigner.estimate(_design(), Settings(backend="cpu", batch=16, mode=mode, optimizer=optimizer))
    assert {k: est.phase_peaks.get(k) for k in MEASURED[mode, optimizer]} == MEASURED[mode, optimizer]


def test_it_keeps_one_more_tensor_than_gelu():
    """The forward's live bytes after Softsign: its output and the divisor (GELU: its output)."""
    s = Settings(backend="cpu", batch=16, mode="train", optimizer="sgd")
    a, b = memdesigner.estimate(_design(), s), memdesigner.estimate(_design("GELU"), s)
    assert a.phase_peaks["forward"] - b.phase_peaks["forward"] == 16 * 64 * 4


def test_imports_from_torch_and_keras_and_exports():
    torch = pytest.importorskip("torch")
    from memdesigner.exporters.torch_code import to_python
    from memdesigner.importers.keras_json import load_keras_json
    from memdesigner.importers.torch_fx import from_module

    nn, F = torch.nn, torch.nn.functional

    class Fn(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.Softsign()

        def forward(self, x):
            return F.softsign(x) + self.act(x)

    d = from_module(Fn(), (4, 6))
    assert [n.type for n in d.nodes.values()] == ["Input", "Softsign", "Softsign", "Add"]
    k = load_keras_json({"class_name": "Sequential", "config": {"layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 6]}},
        {"class_name": "Dense", "config": {"units": 4, "activation": "softsign"}}]}})
    assert [n.type for n in k.nodes.values()] == ["Input", "Linear", "Softsign"] and not k.import_warnings
    ns: dict = {}
    exec(compile(to_python(_design()), "<softsign>", "exec"), ns)  # noqa: S102 - our own generated code
    module, shape = ns["make"]()
    assert "nn.Softsign()" in to_python(_design())
    back = from_module(module, shape)
    s = Settings(backend="cpu", batch=16, mode="train", optimizer="adam")
    assert memdesigner.estimate(back, s).peak_bytes == memdesigner.estimate(_design(), s).peak_bytes == 64_920


def test_onnx_softsign_imports(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from memdesigner.importers.onnx_import import load_onnx

    g = helper.make_graph([helper.make_node("Softsign", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "s.onnx")
    d = load_onnx(tmp_path / "s.onnx")
    assert [n.type for n in d.nodes.values()] == ["Input", "Softsign"] and not d.import_warnings

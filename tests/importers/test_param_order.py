"""The for-loop optimizer (Adam's default on the CPU: ``_single_tensor_adam``) steps the
parameters in ``model.parameters()`` order, which is registration order, not execution order
(engine/param_order.py). Probe: benchmarks/probe_optimizer_order.py."""

import json
import sys
from pathlib import Path

import pytest

import memdesigner
from memdesigner.io.design_file import design_from_dict, design_to_dict
from memdesigner.model.blocks import expand
from tests.helpers import sequential

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _three_linears():
    # weights 2,000,000 / 20,000 / 4,000,000 B, executed in that order
    return sequential((1000,), [("Linear", {"out_features": 500, "bias": False}),
                                ("Linear", {"out_features": 10, "bias": False}),
                                ("Linear", {"out_features": 100_000, "bias": False})])


def _step_peak(d):
    return memdesigner.estimate(d, mode="train", optimizer="adam", backend="cpu").phase_peaks["optimizer_step"]


def test_loop_neighbours_follow_the_registration_order():
    """sqrt and denominator of parameter i (2 |p_i|) beside the previous parameter's denominator:
    executed order n0, n1, n2 peaks at 2 * 4,000,000 + 20,000; registered as n0, n2, n1 at
    2 * 4,000,000 + 2,000,000."""
    d = _three_linears()
    base = _step_peak(d)
    d.param_order = ["n0.weight", "n2.weight", "n1.weight"]
    assert _step_peak(d) - base == 2_000_000 - 20_000
    # the order survives a save / load, a detached copy and block expansion
    assert design_from_dict(design_to_dict(d)).param_order == d.param_order
    assert d.detached_copy().param_order == d.param_order
    assert _step_peak(design_from_dict(design_to_dict(d))) == base + 1_980_000


def test_foreach_and_sgd_do_not_depend_on_the_order():
    d = _three_linears()
    cuda = memdesigner.estimate(d, mode="train", optimizer="adam", backend="cuda").peak_bytes
    sgd = memdesigner.estimate(d, mode="train", optimizer="sgd", backend="cpu").peak_bytes
    d.param_order = ["n0.weight", "n2.weight", "n1.weight"]
    assert memdesigner.estimate(d, mode="train", optimizer="adam", backend="cuda").peak_bytes == cuda
    assert memdesigner.estimate(d, mode="train", optimizer="sgd", backend="cpu").peak_bytes == sgd


def test_seq2seq_gru_adam_on_cpu_matches_the_measurement():
    """holdout2's seq2seq_gru registers tgt_emb (768,000 B) before the encoder GRU but runs it
    after: measured 15,867,188 B (benchmarks/holdout2_truth.json); execution order gave 255,000 B less."""
    torch = pytest.importorskip("torch")
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import holdout2_models as hm

    from memdesigner.importers.torch_fx import from_module

    rec = json.loads((BENCH / "holdout2_truth.json").read_text())["seq2seq_gru/train-adam-fp32-b8"]
    with torch.device("meta"):
        module, shape = hm.MODELS["seq2seq_gru"]()
    design = from_module(module, shape, name="seq2seq_gru")
    assert design.param_order == [n for n, _ in module.named_parameters()]
    est = memdesigner.estimate(design, mode="train", optimizer="adam", batch=8, backend="cpu")
    assert est.peak_bytes == rec["peak_overall"] == 15_867_188
    assert expand(design).param_order == design.param_order


def test_export_registers_modules_in_the_recorded_order():
    """``__init__`` follows Design.param_order, so the exported model's parameters() (and the
    for-loop Adam peak) are the design's; without a recorded order, execution order."""
    from memdesigner.exporters.torch_code import to_python

    d = _three_linears()
    code = to_python(d)
    assert code.index("self.n0 = ") < code.index("self.n1 = ") < code.index("self.n2 = ")
    d.param_order = ["n0.weight", "n2.weight", "n1.weight"]
    code = to_python(d)
    assert code.index("self.n0 = ") < code.index("self.n2 = ") < code.index("self.n1 = ")


@pytest.mark.parametrize("name, peak", [("seq2seq_gru", 15_867_188), ("mini_bert", 16_102_640)])
def test_export_round_trip_keeps_the_adam_peak(name, peak):
    """Exported and imported back, the model registers its parameters as the original did: the
    same for-loop Adam peak (benchmarks/torch_export_roundtrip.py before: seq2seq_gru -1.64 %,
    modules in execution order; mini_bert +0.41 %, a traced call's weight on the root module,
    listed before every child's)."""
    torch = pytest.importorskip("torch")
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import holdout2_models as hm

    from memdesigner.exporters.torch_code import to_python
    from memdesigner.importers.torch_fx import from_module

    with torch.device("meta"):
        module, shape = hm.MODELS[name]()
    design = from_module(module, shape, name=name)
    ns: dict = {}
    exec(compile(to_python(design), "<export>", "exec"), ns)
    with torch.device("meta"):
        back_module, back_shape = ns["make"]()
    back = from_module(back_module, back_shape, name="back")
    kw = dict(mode="train", optimizer="adam", batch=8 if name == "seq2seq_gru" else 2, backend="cpu")
    assert memdesigner.estimate(back, **kw).peak_bytes == memdesigner.estimate(design, **kw).peak_bytes == peak

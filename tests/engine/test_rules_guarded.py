"""Engine invariants and measured cases that guard single rules: each test here goes red when the
rule it names is removed (checked by deleting the rule)."""

import itertools
import json
from pathlib import Path

import pytest
from helpers import two_branch_residual

import memdesigner
from memdesigner.io.design_file import DesignFileError

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "resources" / "examples").glob("*.json"))
GRID = [
    dict(mode="inference", optimizer="none", amp=False, dtype="fp32"),
    dict(mode="train", optimizer="sgd", amp=True, dtype="fp32"),
    dict(mode="train", optimizer="momentum", amp=True, dtype="fp32"),
    dict(mode="train", optimizer="adam", amp=False, dtype="fp32"),
    dict(mode="train", optimizer="adam", amp=False, dtype="bf16"),
]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_timeline_maximum_is_the_peak(path):
    """The timeline and the summary show one peak: every moment that raises the running peak lands
    in a timeline event (fan-in gradient sums, AMP's fp32 gradient casts, late outputs)."""
    design = memdesigner.load_design(path)
    for kw, backend in itertools.product(GRID, ("cuda", "cpu")):
        rep = memdesigner.estimate(design, batch=4, backend=backend, **kw)
        assert max(e.bytes for e in rep.timeline) == rep.peak_bytes, (kw, backend)
        phase_max = {}
        for e in rep.timeline:
            phase_max[e.phase] = max(phase_max.get(e.phase, 0), e.bytes)
        assert max(phase_max.values()) == max(rep.phase_peaks.values())


def test_props_edited_in_place_are_not_stale():
    design = memdesigner.load_design(Path(__file__).resolve().parents[2] / "resources/examples/seed_fc.json")
    assert memdesigner.estimate(design, batch=1).params == 131_410
    design.nodes["fc5"].props["out_features"] = 1000  # 100*1000 + 1000 instead of 100*10 + 10
    assert memdesigner.estimate(design, batch=1).params == 131_410 - 1_010 + 101_000
    design.nodes["input"].props["shape"][0] = 10  # nested value: fc1 becomes 10*100 + 100
    assert memdesigner.estimate(design, batch=1).params == 231_400 - 100_100 + 1_100


def test_an_alias_that_changes_meaning_is_not_a_file_type(tmp_path):
    """``DepthwiseConv2d`` is a search word for Conv2d with groups = channels: a file naming it
    must not load as a plain Conv2d with groups=1."""
    data = {"format": "memdesigner-design", "version": 1, "name": "dw",
            "nodes": [{"id": "in", "type": "Input", "props": {"shape": [3, 8, 8]}},
                      {"id": "c", "type": "DepthwiseConv2d", "props": {"out_channels": 3}}],
            "edges": [{"from": "in", "to": "c"}]}
    f = tmp_path / "dw.json"
    f.write_text(json.dumps(data))
    with pytest.raises(DesignFileError, match=r"nodes\[1\]\.type: unknown layer type 'DepthwiseConv2d'"):
        memdesigner.load_design(f)


def _two_branch_residual():
    """a feeds two bottleneck branches and the residual sum: autograd sums a's gradient
    contributions out of place, and that sum is the backward peak."""
    return two_branch_residual(2048, 8, name="two_branch_residual")


def _cross_entropy_head():
    d = memdesigner.Design("ce_head")
    d.add_node("Input", {"shape": [64]}, id="x")
    d.add_node("Linear", {"out_features": 1000}, id="fc")
    d.add_node("Loss", {"kind": "cross_entropy"}, id="loss")
    d.add_edge("x", "fc")
    d.add_edge("fc", "loss")
    return d


@pytest.mark.slow
def test_fan_in_gradient_sum_measured():
    """Measured with the storage tracker (torch 2.13 CPU): 3,184,744 B, in backward. Without the
    out-of-place sum of a's two gradient contributions the estimate is 2,799,752 B."""
    pytest.importorskip("torch")
    from memdesigner.engine.settings import Settings
    from memdesigner.measure.torch_measure import measure_design

    s = Settings(backend="cpu", batch=64, mode="train", optimizer="sgd")
    d = _two_branch_residual()
    measured = measure_design(d, s)
    est = memdesigner.estimate(d, s)
    assert measured["peak_bytes"] == 3_184_744
    assert est.peak_bytes == measured["peak_bytes"]
    assert est.phase_peaks == measured["phase_peaks"]


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_cross_entropy_keeps_log_probabilities_measured(optimizer):
    """cross_entropy keeps log_softmax(x) (16 x 1000 fp32 = 64,000 B) for backward. The harness
    also takes out.mean() of the scalar loss (4 B, and 4 B in its backward): at most 8 B apart."""
    pytest.importorskip("torch")
    from memdesigner.engine.settings import Settings
    from memdesigner.measure.torch_measure import measure_design

    s = Settings(backend="cpu", batch=16, mode="train", optimizer=optimizer)
    d = _cross_entropy_head()
    measured = measure_design(d, s)
    est = memdesigner.estimate(d, s)
    assert 0 <= measured["peak_bytes"] - est.peak_bytes <= 8
    assert 0 <= measured["phase_peaks"]["forward"] - est.phase_peaks["forward"] <= 8


def test_explain_names_the_rule_of_each_gradient():
    """Parameter gradients live until the next zero_grad, not "freed after backward"; the fan-in
    sum is not the loss gradient seed."""
    from memdesigner.engine.estimate import explain_peak
    from memdesigner.engine.peak_rules import why_alive

    d = _two_branch_residual()
    rows = explain_peak(d, backend="cpu", batch=64, mode="train", optimizer="sgd")
    why = {r["tensor"]: why_alive(r, d.nodes.get(r["layer"]) if r["layer"] else None) for r in rows}
    assert "fan-in" in why["accumulated gradient"]
    grads = [w for t, w in why.items() if "parameter gradients" in t]
    assert grads and all(w.startswith("p.grad") for w in grads)
    assert why_alive({"tensor": "fc.weight.grad", "category": "gradients"}, d.nodes["a"]).startswith("p.grad")

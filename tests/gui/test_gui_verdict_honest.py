"""The verdict never shows a green "Fits" it cannot stand behind: not over an empty canvas, and
not when some ops were estimated without a memory rule."""

import memdesigner as md
from memdesigner._qt.memory.summary import SummaryPanel
from memdesigner.model.design import Design


def _panel(qtbot, design, **kw):
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_report(md.estimate(design, device="h200", **kw))
    return panel


def test_an_empty_training_design_does_not_fit_anything(qtbot):
    d = Design("empty")
    d.add_node("Input", {"shape": (8,)}, id="x")
    panel = _panel(qtbot, d, mode="train", optimizer="adam")
    assert "Fits" not in panel.verdict.text() and "add layers" in panel.verdict.text()


def test_ops_without_a_rule_are_said_in_the_verdict(qtbot):
    d = Design("guess")
    d.add_node("Input", {"shape": (8,)}, id="x")
    d.add_node("Generic", {"op": "mystery", "out_shape": (8,)}, id="g")
    d.add_edge("x", "g")
    rep = md.estimate(d, device="h200")
    assert rep.unruled_ops and rep.device["fits"]
    panel = _panel(qtbot, d)
    assert panel.verdict.text().startswith("⚠ Fits") and "1 layer not modelled" in panel.verdict.text()
    assert "Generic, no memory rule" in panel.verdict.toolTip()


def test_a_guess_is_named_when_it_does_not_fit_either(qtbot):
    """Not only over a green verdict: "does not fit" with unmodelled layers says so too."""
    d = Design("guess-big")
    d.add_node("Input", {"shape": (4096, 4096)}, id="x")
    d.add_node("Generic", {"op": "mystery", "out_shape": (4096, 4096)}, id="g")
    d.add_edge("x", "g")
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    rep = md.estimate(d, device="h200", batch=4096)
    assert rep.device["fits"] is False
    panel.set_report(rep)
    assert panel.verdict.text().startswith("⚠ Does not fit") and "1 layer not modelled" in panel.verdict.text()


def test_no_phantom_loss_seed_without_anything_to_train(qtbot):
    """Nothing requires grad, so there is no loss to seed (PyTorch's backward would refuse): the
    empty design peaked at a phantom 4-byte ones_like(loss), the lone Input at its 32 B + 4 B."""
    rep = md.estimate(Design("empty"), mode="train", optimizer="adam", device="h200")
    assert rep.peak_bytes == 0
    d = Design("input only")
    d.add_node("Input", {"shape": (8,)}, id="x")
    assert md.estimate(d, mode="train", optimizer="adam").peak_bytes == 8 * 4
    panel = _panel(qtbot, Design("empty"), mode="train", optimizer="adam")
    assert "Fits" not in panel.verdict.text()

"""The summary panel shows an absurd estimate (peak 8e500 B on a device) without crashing and
puts the one-line warning in the verdict banner."""

import memdesigner as md
from memdesigner._qt.memory.summary import SummaryPanel
from memdesigner.model.design import Design


def test_summary_shows_absurd_peak_and_warning(qtbot):
    d = Design("huge")
    d.add_node("Input", {"shape": (8,)}, id="in")
    d.add_node("Linear", {"out_features": 10**18}, id="fc")
    d.add_node("ReLU", id="relu")
    d.add_edge("in", "fc")
    d.add_edge("fc", "relu")
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_report(md.estimate(d, batch=10**200, device="h200"))
    assert panel.verdict.text().startswith("\u26a0 peak 8.00e+218 B exceeds 1 EiB")
    assert "node fc" in panel.verdict.text()
    assert panel.peak.value.text() == "8.00e+218 B"

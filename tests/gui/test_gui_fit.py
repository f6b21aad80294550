"""Tools -> Make It Fit lists the engine's suggestions; Apply takes one into the run settings."""

from gui_helpers import load

from memdesigner.model.design import Design


def _wide_linear() -> Design:
    """64 Mi fp32 weights (256 MiB): Adam needs weights, gradients, two moments and a step
    temporary (5 x 256 MiB) over the 1 GiB test GPU; SGD needs 2 x 256 MiB and fits."""
    d = Design("wide-linear")
    d.add_node("Input", {"shape": (4096,)}, id="x")
    d.add_node("Linear", {"out_features": 16384, "bias": False}, id="fc", pos=(270, 0))
    d.add_edge("x", "fc")
    d.settings = {"mode": "train", "optimizer": "adam", "batch": 1, "device": "small"}
    return d


def test_make_it_fit_applies_a_suggestion(window, qtbot):
    window.set_design(_wide_linear(), None, layout=False)
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.settings_bar.apply_dict(_wide_linear().settings)
    assert window.result.report.device["fits"] is False
    dlg = window.make_it_fit()
    assert dlg is not None and dlg.table.rowCount() == len(dlg.advice.suggestions) >= 2
    assert dlg.table.item(0, 2).text() == "fits"  # fitting changes come first
    row = next(i for i, s in enumerate(dlg.advice.suggestions) if s.kinds == ("sgd",))
    claimed = dlg.advice.suggestions[row].device_peak_bytes
    dlg.table.selectRow(row)
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        dlg.apply_selected()
    assert window.settings_bar.settings().optimizer == "sgd"
    rep = window.result.report
    assert rep.device["fits"] is True and rep.device_peak_bytes == claimed
    dlg.close()


def test_make_it_fit_without_a_device_says_so(window, qtbot):
    load(window, qtbot, _wide_linear())
    window.settings_bar.device.setCurrentIndex(-1)
    assert window.make_it_fit() is None
    assert "needs a device" in window.statusBar().currentMessage()

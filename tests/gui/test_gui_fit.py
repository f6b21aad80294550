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


def test_make_it_fit_without_a_device_says_so(window, qtbot):
    load(window, qtbot, _wide_linear())
    window.settings_bar.device.setCurrentIndex(-1)
    assert window.make_it_fit() is None
    assert "needs a device" in window.statusBar().currentMessage()


def _token_model() -> Design:
    """Token ids -> Embedding -> Linear: the logits grow with the sequence, so a shorter one fits."""
    d = Design("tokens")
    d.add_node("Input", {"shape": (16384,), "dtype": "int64"}, id="ids")
    d.add_node("Embedding", {"num_embeddings": 1000, "embedding_dim": 512}, id="emb", pos=(270, 0))
    d.add_node("Linear", {"out_features": 8000}, id="head", pos=(540, 0))
    d.add_edge("ids", "emb")
    d.add_edge("emb", "head")
    d.settings = {"mode": "train", "optimizer": "sgd", "batch": 1, "device": "small"}
    return d


def test_applying_a_suggestion_is_one_undo_step(window, qtbot):
    design = _token_model()
    window.set_design(design, None, layout=False)
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.settings_bar.apply_dict(design.settings)
    assert window.result.report.device["fits"] is False
    before = window.settings_bar.to_dict()
    dlg = window.make_it_fit()
    rows = {s.kinds: i for i, s in enumerate(dlg.advice.suggestions)}
    n0 = window.stack.index()
    # a shorter sequence: the design edit and the settings in one step
    seq = dlg.advice.suggestions[rows[("sequence",)]]
    dlg.table.selectRow(rows[("sequence",)])
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        dlg.apply_selected()
    assert window.stack.index() == n0 + 1
    assert list(window.design.nodes["ids"].props["shape"]) == seq.design_change["value"]
    assert window.result.report.device_peak_bytes == seq.device_peak_bytes
    window.stack.undo()
    assert list(window.design.nodes["ids"].props["shape"]) == [16384]
    # settings only (AMP): applied and undone as one step, the bar back to what it was
    dlg = window.make_it_fit()  # (Apply closed the last one: its figures were for the old settings)
    rows = {s.kinds: i for i, s in enumerate(dlg.advice.suggestions)}
    amp = dlg.advice.suggestions[rows[("amp",)]]
    dlg.table.selectRow(rows[("amp",)])
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        dlg.apply_selected()
    assert window.stack.index() == n0 + 1 and window.settings_bar.settings().amp
    assert window.result.report.device_peak_bytes == amp.device_peak_bytes
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.stack.undo()
    assert window.settings_bar.to_dict() == before and window.stack.index() == n0
    window.stack.redo()
    assert window.settings_bar.settings().amp


def test_a_planned_checkpoint_set_is_kept_with_the_design(window):
    bar = window.settings_bar
    bar.apply_dict({"mode": "train", "optimizer": "sgd", "batch": 4, "checkpoint_units": ["fc1", "fc4"]})
    assert bar.settings().checkpoint_units == ("fc1", "fc4")
    assert bar.to_dict()["checkpoint_units"] == ["fc1", "fc4"]  # what the design file saves
    bar.ckpt.setChecked(True)  # ticking all-or-nothing checkpointing wins over the plan
    assert bar.settings().checkpointing and bar.settings().checkpoint_units == ()

"""Edits reach the memory view: the inspector, the timeline, the summary, the device verdict."""

from gui_helpers import load, small_cnn
from PySide6.QtCore import Qt

from memdesigner.units import format_bytes


def test_property_edit_updates_timeline_and_summary_and_undo_redo(window, qtbot):
    before = load(window, qtbot, small_cnn())
    window.select_node("conv")
    assert window.inspector.node_id == "conv"
    spin = window.inspector.fields["out_channels"].editor
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        spin.setValue(64)
    after = window.result.report
    assert window.design.nodes["conv"].props["out_channels"] == 64
    assert after.peak_bytes > before.peak_bytes
    assert window.timeline.events and max(e.bytes for e in window.timeline.events) == after.peak_bytes
    assert format_bytes(after.peak_bytes, 2) in window.timeline.peak_label.toPlainText()
    shown = format_bytes(after.device_peak_bytes if after.device else after.peak_bytes, 2)
    assert window.summary.peak.value.text() == shown
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.stack.undo()
    assert window.result.report.peak_bytes == before.peak_bytes
    assert spin.value() == 16  # the inspector follows the undo
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.stack.redo()
    assert window.result.report.peak_bytes == after.peak_bytes


def test_refused_value_stays_out_and_says_why(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    row = window.inspector.fields["kernel"]
    row.editor.setText("3, banana")
    row.editor.setModified(True)
    row.editor.editingFinished.emit()
    assert "not a number" in row.error_text and "not a number" in window.inspector.issue_label.text()
    assert window.design.nodes["conv"].props["kernel"] == 3
    assert not window.inspector.commit("out_channels", 0)  # below the registry's minimum
    assert "minimum" in window.inspector.fields["out_channels"].error_text
    assert window.stack.count() == 0


def test_invalid_configuration_marks_node_in_error(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        assert window.inspector.commit("kernel", 64)  # a valid int, but larger than the 32×32 input
    item = window.scene.nodes["conv"]
    assert item.in_error
    assert "Error" in item.toolTip()
    assert window.scene.nodes["relu"].blocked == "conv"
    assert not window.inspector.issue_label.isHidden()
    assert "error" in window.summary.verdict.text()
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.stack.undo()
    assert not item.in_error and not window.scene.nodes["relu"].blocked


def test_switching_device_flips_the_verdict(window, qtbot):
    d = small_cnn()
    d.nodes["fc"].props["out_features"] = 40000  # ~655 M weights: fits 80 GiB, not 1 GiB
    load(window, qtbot, d)
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.settings_bar.set_device("big")
    assert window.result.report.device["fits"] is True
    assert window.summary.verdict.text().startswith("✓")
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.settings_bar.set_device("small")
    assert window.result.report.device["fits"] is False
    assert "Does not fit" in window.summary.verdict.text()


def test_settings_change_reestimates_and_batch_sweep_arrives(window, qtbot):
    base = load(window, qtbot, small_cnn())
    with qtbot.waitSignal(window.service.sweep_ready, timeout=10000):
        with qtbot.waitSignal(window.result_applied, timeout=5000):
            window.settings_bar.set_device("small")
            window.settings_bar.mode.setCurrentIndex(window.settings_bar.mode.findData("train"))
    assert window.result.report.settings["mode"] == "train"
    assert window.result.report.peak_bytes > base.peak_bytes
    sw = window.sweep
    assert sw.max_batch and sw.max_batch >= 1
    assert window.summary.max_batch.value.text() == str(sw.max_batch)


def test_timeline_click_selects_node_and_table_click_too(window, qtbot):
    load(window, qtbot, small_cnn())
    tl = window.timeline
    i = next(k for k, e in enumerate(tl.events) if e.node == "fc")
    with qtbot.waitSignal(tl.node_clicked, timeout=2000) as sig:
        tl.node_clicked.emit(tl.events[i].node)
    assert sig.args == ["fc"]
    assert window.scene.selected_node_ids() == ["fc"]
    assert tl._highlight  # the layer's span is marked
    assert "fc" in tl.describe(i) or window.design.nodes["fc"].name in tl.describe(i)
    table = window.table
    row = next(r for r in range(table.proxy.rowCount())
               if table.proxy.data(table.proxy.index(r, 0), Qt.UserRole + 1) == "conv")
    table.clicked.emit(table.proxy.index(row, 0))
    assert window.scene.selected_node_ids() == ["conv"]


def test_explain_the_peak_lists_every_live_tensor(window, qtbot):
    from gui_helpers import load, small_cnn

    load(window, qtbot, small_cnn())
    dlg = window.explain_peak()
    assert dlg is not None
    qtbot.waitUntil(lambda: bool(dlg.rows), timeout=10000)  # explained on the worker
    assert sum(r["bytes"] for r in dlg.rows) == window.result.report.peak_bytes
    assert dlg.table.rowCount() == len(dlg.rows) > 0
    layers = {dlg.table.item(i, 2).text() for i in range(dlg.table.rowCount())}
    assert "conv" in layers or "x" in layers
    dlg.close()


def test_batch_sweep_shows_the_engines_largest_batch(window, qtbot):
    """The window reads the engine's batch curve: no search of its own, no 2^20 cap."""
    from conftest import BIG

    import memdesigner
    from memdesigner.model.design import Design

    def tiny():
        d = Design("tiny-mlp")  # about 100 B per sample: hundreds of millions fit in 80 GiB
        d.add_node("Input", {"shape": (16,)}, id="x")
        d.add_node("Linear", {"out_features": 4}, id="fc", pos=(270, 0))
        d.add_edge("x", "fc")
        return d

    load(window, qtbot, tiny())
    with qtbot.waitSignal(window.service.sweep_ready, timeout=10000):
        with qtbot.waitSignal(window.result_applied, timeout=5000):
            window.settings_bar.set_device("big")
    expected = memdesigner.estimate(tiny(), window.settings_bar.settings(), device=BIG, max_batch=True).max_batch
    assert expected > 1 << 20
    assert window.sweep.max_batch == expected
    assert window.summary.max_batch.value.text() == str(expected)


def test_explain_follows_settings_and_names_gradients_right(window, qtbot):
    """The dialog re-explains on every new estimate (it used to keep the settings it was opened
    with); its header names AMP and checkpointing; parameter gradients are said to live until
    zero_grad and only ones_like(loss) is called the loss seed (engine wording, rendered as is)."""
    from gui_helpers import load, small_cnn

    load(window, qtbot, small_cnn())
    dlg = window.explain_peak()
    qtbot.waitUntil(lambda: bool(dlg.rows), timeout=10000)
    inference_total = sum(r["bytes"] for r in dlg.rows)
    assert "inference" in dlg.title.text()
    sb = window.settings_bar
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        sb.apply_dict({"mode": "train", "optimizer": "adam", "batch": 4, "amp": False, "checkpointing": True})
    qtbot.waitUntil(lambda: "train" in dlg.title.text(), timeout=10000)
    assert sum(r["bytes"] for r in dlg.rows) == window.result.report.peak_bytes != inference_total
    assert "AMP off" in dlg.title.text() and "activation checkpointing on" in dlg.title.text()
    why = {dlg.table.item(i, 3).text(): dlg.table.item(i, 4).text() for i in range(dlg.table.rowCount())}
    grads = [w for t, w in why.items() if t == "parameter gradients"]
    assert grads and all("until the next zero_grad" in w for w in grads)
    assert all("loss gradient seed" not in w for t, w in why.items() if t != "ones_like(loss)")
    dlg.close()

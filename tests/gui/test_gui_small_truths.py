"""Issue 21's smaller window bugs, each driven by real keys and clicks: an empty design claims no
headroom and no largest batch; Make It Fit closes on Apply; Ctrl+N starts from the default run
settings; the find box says when nothing matches."""

import shiboken6
from gui_helpers import load, small_cnn
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox
from test_gui_fit import _wide_linear
from test_gui_same_truth import choose, shown_largest_batch, type_into


def test_empty_design_has_nothing_to_estimate(window, qtbot):
    bar = window.settings_bar
    with qtbot.waitSignal(window.service.sweep_ready, timeout=20000):
        choose(qtbot, bar.device, "big")
    s = window.summary
    assert s.verdict.text() == "Nothing to estimate yet: add layers"
    assert (s.headroom.value.text(), s.headroom.sub.text()) == ("—", "nothing to estimate")  # was 79.5 GiB
    assert shown_largest_batch(window, qtbot) == "—"  # was 16,777,216: the search's limit
    assert s.max_batch.sub.text() == "nothing to estimate"


def test_make_it_fit_closes_on_apply(window, qtbot):
    d = _wide_linear()
    load(window, qtbot, d)
    assert window.result.report.device["fits"] is False
    dlg = window.make_it_fit()
    row = next(i for i, s in enumerate(dlg.advice.suggestions) if s.kinds == ("sgd",))
    table = dlg.table
    rect = table.visualRect(table.model().index(row, 0))
    qtbot.mouseClick(table.viewport(), Qt.LeftButton, pos=rect.center())
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        qtbot.mouseClick(dlg.buttons.button(QDialogButtonBox.Apply), Qt.LeftButton)
    assert window.settings_bar.settings().optimizer == "sgd"
    assert not shiboken6.isValid(dlg) or not dlg.isVisible()  # its header still said "does not fit"


def test_new_design_starts_from_default_settings_on_the_same_device(window, qtbot):
    d = small_cnn()
    d.settings = {"mode": "train", "optimizer": "adamw", "batch": 8, "dtype": "bf16", "device": "small",
                  "lora_r": 4, "gpus": 2, "strategy": "zero3"}
    load(window, qtbot, d)
    bar = window.settings_bar
    type_into(qtbot, bar.batch, 12)
    window.stack.setClean()
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        qtbot.keyClick(window.view, Qt.Key_N, Qt.ControlModifier)
    assert not window.design.nodes
    assert window.settings_bar.to_dict() == {"mode": "inference", "batch": 1, "optimizer": "adam", "dtype": "fp32",
                                             "amp": False, "checkpointing": False, "device": "small"}
    assert bar.parallel.button.text() == "1 GPU" and bar.finetune.more.text() == "FT"


def test_find_says_no_match_in_the_box(window, qtbot):
    load(window, qtbot, small_cnn())
    qtbot.keyClick(window.view, Qt.Key_F, Qt.ControlModifier)
    box = window.find_layer
    edit = box.edit
    qtbot.keyClicks(edit, "nosuchlayer")
    qtbot.keyClick(edit, Qt.Key_Return)
    assert box.note.isVisible() and box.note.text() == "no match"
    qtbot.keyClick(edit, Qt.Key_Backspace)  # typing again clears it
    assert not box.note.isVisible()
    edit.selectAll()
    qtbot.keyClicks(edit, "conv")
    qtbot.keyClick(edit, Qt.Key_Return)
    assert window.scene.selected_node_ids() == ["conv"] and not box.note.isVisible()


def test_largest_batch_of_other_settings_is_not_shown_beside_a_new_verdict(window, qtbot):
    d = small_cnn()
    d.settings = {"mode": "train", "optimizer": "adam", "batch": 4, "device": "small"}
    load(window, qtbot, d)
    before = shown_largest_batch(window, qtbot)
    assert before not in ("…", "—")
    bar = window.settings_bar
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        choose(qtbot, bar.optimizer, "sgd")  # far less state: a larger batch fits
    s = window.summary
    assert (s.max_batch.value.text(), s.max_batch.sub.text()) == ("…", "searching for these settings")
    after = shown_largest_batch(window, qtbot)
    assert int(after) > int(before)

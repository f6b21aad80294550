"""The settings bar's panels, used with real clicks and keys: the fine-tuning panel's rows are
readable after choosing LoRA / QLoRA (they were squashed to 1-2 px inside a QMenu), the window
fits a 1366x768 screen in every mode (generate mode made it 1,682 px wide), and the GPUs and
strategy are set, shown, undone and saved from the bar."""

from gui_helpers import load, small_cnn
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget
from test_gui_same_truth import choose, open_panel, type_into

from memdesigner.io.design_file import load_design


def _rows_readable(panel):
    """Every shown row of the panel at least as tall as it asks to be (a squashed row is not)."""
    shown = [w for w in panel.findChildren(QWidget) if w.parentWidget() is panel and w.isVisible()]
    assert shown
    for w in shown:
        assert w.height() >= w.minimumSizeHint().height() > 4, (type(w).__name__, w.height())
        assert panel.rect().contains(w.geometry()), type(w).__name__  # inside the panel, not clipped


def test_finetune_panel_rows_readable_after_lora_and_qlora(window, qtbot):
    load(window, qtbot, small_cnn())
    bar = window.settings_bar
    choose(qtbot, bar.mode, "train")
    ft = bar.finetune
    open_panel(qtbot, ft.more)
    choose(qtbot, ft.kind, "lora")
    qtbot.wait(20)
    assert ft.rank.isVisible() and ft.targets.isVisible()
    _rows_readable(ft.more.panel)
    choose(qtbot, ft.kind, "qlora")
    qtbot.wait(20)
    assert ft.bits.isVisible()
    _rows_readable(ft.more.panel)
    type_into(qtbot, ft.rank, 16)  # typed into the panel, reaching the settings
    assert bar.settings().lora_r == 16 and bar.settings().base_bits == 4
    assert ft.more.text() == "QLoRA"
    qtbot.keyClick(ft.more.panel, Qt.Key_Escape)
    assert not ft.more.panel.isVisible()
    open_panel(qtbot, ft.more)  # reopened: still readable
    _rows_readable(ft.more.panel)


def test_window_fits_1366_in_every_mode(window, qtbot):
    load(window, qtbot, small_cnn())
    bar = window.settings_bar
    for mode in ("inference", "train", "generate"):
        choose(qtbot, bar.mode, mode)
        qtbot.wait(10)
        assert window.minimumSizeHint().width() <= 1366, (mode, window.minimumSizeHint().width())
        assert window.minimumSizeHint().height() <= 768, (mode, window.minimumSizeHint().height())
    assert bar.generate.isVisible() and bar.generate.button.text() == "+16 tok"


def test_gpus_and_strategy_set_shown_undone_and_saved(window, qtbot, tmp_path):
    d = small_cnn()
    d.settings = {"mode": "train", "optimizer": "adam", "batch": 2}
    load(window, qtbot, d)
    par = window.settings_bar.parallel
    assert par.button.text() == "1 GPU"
    open_panel(qtbot, par.button)
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        type_into(qtbot, par.gpus, 4)
    assert par.strategy.currentData() == "ddp" and par.button.text() == "4× ddp"  # more GPUs need a strategy
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        choose(qtbot, par.strategy, "zero3")
    par.offload.setFocus()
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        qtbot.keyClick(par.offload, Qt.Key_Space)
    assert par.button.text() == "4× zero3 +offload"
    rep = window.result.report
    assert (rep.settings["gpus"], rep.settings["strategy"], rep.settings["offload"]) == (4, "zero3", "params")
    assert len(rep.per_rank) == 4
    window.save_to(str(tmp_path / "d.json"))
    saved = load_design(tmp_path / "d.json").settings
    assert (saved["gpus"], saved["strategy"], saved["offload"]) == (4, "zero3", "params")
    qtbot.keyClick(par.button.panel, Qt.Key_Escape)
    for _ in range(3):
        with qtbot.waitSignal(window.result_applied, timeout=10000):
            qtbot.keyClick(window.view, Qt.Key_Z, Qt.ControlModifier)
    assert par.button.text() == "1 GPU" and window.result.report.settings["gpus"] == 1

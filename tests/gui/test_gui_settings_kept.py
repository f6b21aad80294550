"""Run settings the settings bar has no widget for (data-parallel ranks) survive open, estimate
and save in the window."""

from gui_helpers import small_cnn


def test_data_parallel_settings_survive_the_window(window, qtbot, tmp_path):
    from memdesigner.io.design_file import load_design, save_design

    d = small_cnn()
    d.settings = {"mode": "train", "optimizer": "adam", "batch": 4, "gpus": 4, "strategy": "zero1"}
    path = tmp_path / "dp.json"
    save_design(d, path)
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.open_path(str(path))
    rep = window.result.report
    assert rep.settings["gpus"] == 4 and rep.settings["strategy"] == "zero1"
    assert len(rep.per_rank) == 4
    window.save_to(str(path))
    again = load_design(path)
    assert again.settings["gpus"] == 4 and again.settings["strategy"] == "zero1"

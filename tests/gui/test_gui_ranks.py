"""Model parallelism in the window: the settings bar's TP field reaches the estimate and the saved
design; the rank picker shows the busiest rank's timeline by default and another rank's on request."""

from gui_helpers import load
from helpers import EXAMPLES

import memdesigner
from memdesigner.io.design_file import load_design


def _fc(**settings):
    d = load_design(EXAMPLES / "seed_fc.json")
    d.settings = {"mode": "train", "optimizer": "adam", "batch": 4, "backend": "cpu", **settings}
    return d


def test_tp_field_is_estimated_and_saved(window, qtbot, tmp_path):
    load(window, qtbot, _fc())
    assert window.rank_picker.isHidden()
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.settings_bar.parallel.tp.setValue(2)  # the TP button's popup
    s = window.settings_bar.settings()
    assert s.tensor_parallel == 2
    rep = window.result.report
    assert rep.peak_bytes == memdesigner.estimate(window.design, s).peak_bytes
    assert [r["rank"] for r in rep.per_rank] == [0, 1]
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.settings_bar.parallel.sp.setChecked(True)
    assert window.settings_bar.settings().sequence_parallel
    path = tmp_path / "tp.json"
    window.save_to(str(path))
    saved = load_design(path).settings
    assert saved["tensor_parallel"] == 2 and saved["sequence_parallel"] is True
    window.settings_bar.apply_dict({"mode": "train", "pipeline_parallel": 2, "micro_batches": 4})
    s = window.settings_bar.settings()
    assert (s.tensor_parallel, s.pipeline_parallel, s.micro_batches) == (1, 2, 4)


def test_rank_picker_shows_the_busiest_stage_then_another(window, qtbot):
    rep = load(window, qtbot, _fc(pipeline_parallel=2, micro_batches=4))
    picker = window.rank_picker
    assert not picker.isHidden() and picker.combo.count() == 2
    busiest = max(rep.per_rank, key=lambda r: r["peak_bytes"])
    assert picker.combo.currentData() == busiest["rank"] == 0  # stage 0 holds the in-flight micro-batches
    assert max(e.bytes for e in window.timeline.events) == rep.peak_bytes
    picker.combo.setCurrentIndex(picker.combo.findData(1))
    other = next(r for r in rep.per_rank if r["rank"] == 1)
    assert max(e.bytes for e in window.timeline.events) == other["peak_bytes"] < rep.peak_bytes

"""The Tokens field (the seq_len run setting) in the settings bar, driven by keys: shown for token
models with the length the estimate used, its value estimated exactly as `memdesigner estimate
--seq-len`, undoable, saved with the design, hidden for a design without tokens."""

import json

from gui_helpers import load, small_cnn
from PySide6.QtCore import Qt

from memdesigner import cli
from memdesigner.importers.hf_config import design_from_config
from memdesigner.io.design_file import load_design

LLAMA = {"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}


def _settled(window, qtbot):
    qtbot.waitUntil(lambda: not window.service.busy and window.result is not None
                    and window.result.gen == window.service.gen, timeout=30000)
    return window.result.report


def _cli_peak(path, capsys, *more) -> int:
    capsys.readouterr()
    assert cli.main(["estimate", str(path), "--format", "json", *more]) == 0
    return json.loads(capsys.readouterr().out)["peak_bytes"]


def test_tokens_field_sets_the_sequence_length(window, qtbot, tmp_path, capsys):
    rep = load(window, qtbot, design_from_config(LLAMA, seq_len=32))
    bar = window.settings_bar
    assert rep.sequence_length == 32 and bar.seq.isVisible() and bar.seq.value() == 32
    own = rep.peak_bytes
    bar.seq.setFocus()
    bar.seq.lineEdit().selectAll()
    qtbot.keyClicks(bar.seq, "96")
    qtbot.keyClick(bar.seq, Qt.Key_Return)
    rep = _settled(window, qtbot)
    assert window.document.settings.get("seq_len") == 96 and rep.sequence_length == 96
    path = tmp_path / "d.json"
    assert window.save_to(str(path))
    assert load_design(path).settings["seq_len"] == 96
    assert rep.peak_bytes == _cli_peak(path, capsys) == _cli_peak(path, capsys, "--seq-len", "96") > own
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        qtbot.keyClick(window.view, Qt.Key_Z, Qt.ControlModifier)
    rep = _settled(window, qtbot)
    assert window.document.settings.get("seq_len") is None and rep.peak_bytes == own and bar.seq.value() == 32


def test_no_tokens_no_field(window, qtbot):
    load(window, qtbot, small_cnn())
    assert not window.settings_bar.seq.isVisible()


def test_the_bar_with_tokens_fits_1366_in_every_mode(window, qtbot):
    load(window, qtbot, design_from_config(LLAMA, seq_len=2048))
    bar = window.settings_bar
    for i, mode in enumerate(("inference", "train", "generate")):
        bar.mode.setFocus()
        qtbot.keyClick(bar.mode, Qt.Key_Home)
        for _ in range(i):
            qtbot.keyClick(bar.mode, Qt.Key_Down)
        assert bar.mode.currentData() == mode
        _settled(window, qtbot)
        assert bar.seq.isVisible() and bar.seq.value() == 2048
        assert window.minimumSizeHint().width() <= 1366, (mode, window.minimumSizeHint().width())


def test_largest_batch_follows_the_tokens_field(window, qtbot, tmp_path, capsys, monkeypatch):
    """LARGEST BATCH at the typed length equals `estimate --max-batch` of the saved design (the
    window's batch sweep searched the design's own 2,048 tokens: 5 beside the CLI's 2 at 4,096)."""
    from memdesigner.engine import devices as devmod

    monkeypatch.setattr("memdesigner._qt.settings.settings_bar.load_devices", devmod.all_devices)
    bar = window.settings_bar
    bar.reload_devices()
    big = {**LLAMA, "vocab_size": 32000, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4,
           "num_attention_heads": 16, "num_key_value_heads": 4}
    load(window, qtbot, design_from_config(big, seq_len=256))
    bar.apply_dict({"mode": "train", "optimizer": "adamw", "device": "t4"})
    bar.seq.setFocus()
    bar.seq.lineEdit().selectAll()
    qtbot.keyClicks(bar.seq, "4096")
    qtbot.keyClick(bar.seq, Qt.Key_Return)
    svc = window.service
    qtbot.waitUntil(lambda: window.sweep is not None and window.sweep.gen == svc.gen and not svc.busy, timeout=60000)
    path = tmp_path / "d.json"
    assert window.save_to(str(path))
    capsys.readouterr()
    assert cli.main(["estimate", str(path), "--max-batch", "--format", "json"]) == 0
    want = json.loads(capsys.readouterr().out)
    assert want["sequence_length"] == 4096 and want["max_batch"] >= 1
    assert window.summary.max_batch.value.text() == str(want["max_batch"])

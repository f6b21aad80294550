"""Generate mode in the settings bar: its options show only in that mode, drive the estimate
(prefill and decode phases in the timeline) and are saved with the design."""

from memdesigner.engine.generate import generate
from memdesigner.engine.settings import Settings
from memdesigner.importers.hf_config import gpt2

SMALL = {"n_embd": 64, "n_layer": 2, "n_head": 2, "vocab_size": 256}


def test_generate_mode_in_the_window(window, qtbot, tmp_path):
    from memdesigner.io.design_file import load_design, save_design

    d = gpt2.build(SMALL, seq_len=16, task="causal-lm")
    d.settings = {"mode": "generate", "batch": 2, "new_tokens": 8, "kv_cache": "static"}
    path = tmp_path / "gpt2.json"
    save_design(d, path)
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.open_path(str(path))
    bar = window.settings_bar
    assert bar.mode.currentText() == "Generate" and bar.generate.isVisible()
    assert bar.generate.kv_cache.currentData() == "static" and bar.generate.new_tokens.value() == 8
    rep = window.result.report
    want = generate(d, Settings(mode="generate", batch=2, new_tokens=8, kv_cache="static", backend="cuda"))
    assert rep.peak_bytes == want.peak_bytes
    assert {e.phase for e in rep.timeline} == {"prefill", "decode"}
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        bar.generate.new_tokens.setValue(32)
    assert window.result.report.settings["new_tokens"] == 32
    window.save_to(str(path))
    again = load_design(path)
    assert again.settings["new_tokens"] == 32 and again.settings["kv_cache"] == "static"
    bar.mode.setCurrentIndex(bar.mode.findData("inference"))
    assert not bar.generate.isVisible()


def test_generate_batch_sweep_is_whole_generations(window, qtbot, tmp_path):
    from conftest import SMALL as DEV

    from memdesigner.engine.estimate import estimate
    from memdesigner.io.design_file import save_design

    d = gpt2.build(SMALL, seq_len=16, task="causal-lm")
    d.settings = {"mode": "generate", "batch": 1, "new_tokens": 8}
    path = tmp_path / "gpt2.json"
    save_design(d, path)
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.open_path(str(path))
    with qtbot.waitSignal(window.service.sweep_ready, timeout=20000):
        with qtbot.waitSignal(window.result_applied, timeout=10000):
            window.settings_bar.set_device("small")
    want = estimate(d, window.settings_bar.settings(), device=DEV, max_batch=True).max_batch
    assert window.sweep.max_batch == want > 1

"""File -> Import -> Hugging Face config loads a config.json into the window and estimates it."""


def test_import_hf_from_the_menu(window, qtbot, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,'
                   ' "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100}')
    file_menu = window.menuBar().actions()[0].menu()
    imp = next(a.menu() for a in file_menu.actions() if a.menu() and "Import" in a.text())
    assert window.act_import_hf in imp.actions()
    window.import_hf(str(cfg), seq_len=32, task="causal-lm")
    qtbot.waitUntil(lambda: "lm_head" in window.design.nodes or any(n.endswith("lm_head") for n in window.design.nodes),
                    timeout=20000)
    qtbot.waitUntil(lambda: window.result is not None and window.result.report is not None
                    and any(r.type == "RMSNorm" for r in window.result.report.layers), timeout=20000)
    assert window.result.report.params == 2 * (4 * 64 * 64 - 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64 + 2 * 100 * 64


def test_import_hf_bad_file_warns(window, qtbot, tmp_path, monkeypatch):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "t5"}')
    shown = []
    monkeypatch.setattr("memdesigner._qt.main_window.QMessageBox.warning", lambda *a, **k: shown.append(a[2]))
    window.import_hf(str(bad), seq_len=32, task="causal-lm")
    qtbot.waitUntil(lambda: bool(shown), timeout=20000)
    assert "model_type: 't5' is not supported" in shown[0]

"""The window's LARGEST BATCH equals `memdesigner estimate --max-batch --format json` on the saved
design, for settings chosen with real input events (keys on the bar's fields, clicks on its
panel buttons). It used to be searched on the design as drawn: with LoRA on full training, with
tensor parallel on unsharded weights (Llama-3-8B LoRA on a 24 GB card: "none" beside "fits";
the seed CNN with zero3 x 3 GPUs and TP 2: 13, the CLI 57)."""

import json

import pytest
from gui_helpers import choose, load, open_panel, type_into
from PySide6.QtCore import Qt

from memdesigner import cli
from memdesigner.engine import devices as devmod
from memdesigner.importers.hf_config import design_from_config
from memdesigner.io.design_file import load_design

# Llama-3-8B's layer, two of them (an estimate's cost is its op count, not its bytes)
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 2, "num_key_value_heads": 8,
         "vocab_size": 128256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
         "tie_word_embeddings": False, "hidden_act": "silu"}


@pytest.fixture
def real_devices(window, monkeypatch):
    monkeypatch.setattr("memdesigner._qt.settings.settings_bar.load_devices", devmod.all_devices)
    window.settings_bar.reload_devices()


def shown_largest_batch(window, qtbot) -> str:
    """The LARGEST BATCH cell once the sweep of the latest settings landed."""
    svc = window.service
    qtbot.waitUntil(lambda: window.sweep is not None and window.sweep.gen == svc.gen and not svc.busy, timeout=60000)
    return window.summary.max_batch.value.text()


def cli_json(window, tmp_path, capsys, *more) -> dict:
    path = tmp_path / "design.json"
    assert window.save_to(str(path))
    capsys.readouterr()
    assert cli.main(["estimate", str(path), "--max-batch", "--format", "json", *more]) == 0
    return json.loads(capsys.readouterr().out)


def cli_largest_batch(window, tmp_path, capsys) -> int:
    return cli_json(window, tmp_path, capsys)["max_batch"]


def _as_shown(n: int) -> str:
    return str(n) if n else "none"


def test_largest_batch_is_the_clis_for_lora_and_qlora(window, qtbot, real_devices, tmp_path, capsys):
    d = design_from_config(LLAMA, seq_len=2048)
    load(window, qtbot, d)
    bar = window.settings_bar
    choose(qtbot, bar.mode, "train")
    choose(qtbot, bar.optimizer, "adamw")
    choose(qtbot, bar.dtype, "bf16")
    bar.ckpt.setFocus()
    qtbot.keyClick(bar.ckpt, Qt.Key_Space)
    assert bar.ckpt.isChecked()
    choose(qtbot, bar.device, "rtx4090")
    full = shown_largest_batch(window, qtbot)
    assert full == _as_shown(cli_largest_batch(window, tmp_path, capsys))
    ft = bar.finetune
    open_panel(qtbot, ft.more)
    choose(qtbot, ft.kind, "lora")
    lora = shown_largest_batch(window, qtbot)
    want = cli_largest_batch(window, tmp_path, capsys)
    assert lora == _as_shown(want) and want > 0 and lora != full
    assert load_design(tmp_path / "design.json").settings["lora_r"] == 8
    choose(qtbot, ft.kind, "qlora")
    qlora = shown_largest_batch(window, qtbot)
    want_q = cli_largest_batch(window, tmp_path, capsys)
    assert qlora == _as_shown(want_q) and want_q >= want  # (the 4-bit layers are few beside the embeddings)
    assert window.result.report.device["fits"]


def test_largest_batch_is_the_clis_with_gpus_strategy_and_tensor_parallel(window, qtbot, real_devices, tmp_path,
                                                                         capsys):
    load(window, qtbot, load_design("resources/examples/seed_keras_audio.json"))
    bar = window.settings_bar
    choose(qtbot, bar.mode, "train")
    choose(qtbot, bar.optimizer, "adam")
    choose(qtbot, bar.device, "rtx3080-10gb")
    par = bar.parallel
    open_panel(qtbot, par.button)
    type_into(qtbot, par.gpus, 3)
    choose(qtbot, par.strategy, "zero3")
    type_into(qtbot, par.tp, 2)
    assert par.button.text() == "3× zero3 · TP 2"
    shown = shown_largest_batch(window, qtbot)
    want = cli_largest_batch(window, tmp_path, capsys)
    assert shown == _as_shown(want) == "57"  # measured once: 13 when the window searched unsharded weights
    saved = load_design(tmp_path / "design.json").settings
    assert (saved["gpus"], saved["strategy"], saved["tensor_parallel"]) == (3, "zero3", 2)


def test_largest_batch_is_the_clis_in_generate_and_inference(window, qtbot, real_devices, tmp_path, capsys):
    d = design_from_config({**LLAMA, "num_hidden_layers": 1}, seq_len=512)
    load(window, qtbot, d)
    bar = window.settings_bar
    choose(qtbot, bar.device, "rtx3080-10gb")
    choose(qtbot, bar.dtype, "fp16")
    assert shown_largest_batch(window, qtbot) == _as_shown(cli_largest_batch(window, tmp_path, capsys))
    choose(qtbot, bar.mode, "generate")
    open_panel(qtbot, bar.generate.button)
    type_into(qtbot, bar.generate.new_tokens, 64)
    assert bar.generate.button.text() == "+64 tok"
    shown = shown_largest_batch(window, qtbot)
    want = cli_json(window, tmp_path, capsys, "--max-context")
    assert shown == _as_shown(want["max_batch"])
    ctx = want["generate"]["max_context"]
    assert window.summary.max_batch.sub.text() == f"longest context {ctx:,} tokens" and ctx > 64


@pytest.mark.parametrize("optimizer, gpus, strategy, offload, pp, amp, ckpt", [
    ("adam", 2, "ddp", False, 1, False, True),
    ("adamw", 4, "zero1", False, 1, True, False),
    ("adam", 2, "zero2", True, 1, False, False),
    ("momentum", 1, "none", False, 2, False, True),
])
def test_largest_batch_is_the_clis_over_a_settings_grid(window, qtbot, real_devices, tmp_path, capsys, optimizer,
                                                         gpus, strategy, offload, pp, amp, ckpt):
    load(window, qtbot, load_design("resources/examples/seed_geron_cnn.json"))
    bar = window.settings_bar
    choose(qtbot, bar.mode, "train")
    choose(qtbot, bar.optimizer, optimizer)
    choose(qtbot, bar.device, "rtx3060-12gb")
    for box, on in ((bar.amp, amp), (bar.ckpt, ckpt)):
        if box.isChecked() != on:
            box.setFocus()
            qtbot.keyClick(box, Qt.Key_Space)
    par = bar.parallel
    open_panel(qtbot, par.button)
    if gpus > 1:
        type_into(qtbot, par.gpus, gpus)
    choose(qtbot, par.strategy, strategy)
    if offload:
        par.offload.setFocus()
        qtbot.keyClick(par.offload, Qt.Key_Space)
    if pp > 1:
        type_into(qtbot, par.pp, pp)
        type_into(qtbot, par.mb, pp)
    shown = shown_largest_batch(window, qtbot)
    got = cli_json(window, tmp_path, capsys)
    s = got["settings"]
    assert (s["gpus"], s["strategy"], s["amp"], s["checkpointing"], s["pipeline_parallel"]) == (gpus, strategy, amp,
                                                                                                 ckpt, pp)
    assert shown == _as_shown(got["max_batch"])
    assert window.result.report.device_peak_bytes == got["device_peak_bytes"]


def test_render_shows_the_run_the_command_line_asked_for(qtbot, monkeypatch, tmp_path, capsys):
    """`memdesigner render --gpus 3 --strategy zero3 --tensor-parallel 2` drew a one-GPU window."""
    from memdesigner._qt import main_window

    seen = {}
    close = main_window.MainWindow.close

    def seeing_close(win):
        if win.headless and win.result is not None:
            seen.update(text=win.settings_bar.parallel.button.text(), batch=win.summary.max_batch.value.text(),
                        peak=win.result.report.device_peak_bytes)
        return close(win)

    monkeypatch.setattr(main_window.MainWindow, "close", seeing_close)
    monkeypatch.setattr("memdesigner._qt.settings.settings_bar.load_devices", devmod.all_devices)
    args = ["resources/examples/seed_keras_audio.json", "--mode", "train", "--device", "rtx3080-10gb", "--gpus", "3",
            "--strategy", "zero3", "--tensor-parallel", "2"]
    assert cli.main(["render", *args[:1], "-o", str(tmp_path / "seed.png"), *args[1:]]) == 0
    capsys.readouterr()
    assert cli.main(["estimate", *args, "--max-batch", "--format", "json"]) == 0
    want = json.loads(capsys.readouterr().out)
    assert seen == {"text": "3× zero3 · TP 2", "batch": str(want["max_batch"]), "peak": want["device_peak_bytes"]}

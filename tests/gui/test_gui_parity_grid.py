"""Every figure the window shows equals the engine's report for the saved design and the same
settings, over a pairwise grid of the run settings (mode x optimizer x dtype/AMP x checkpointing
x LoRA/QLoRA x GPUs x strategy x TP x generate) on three designs. Each setting is chosen with real
input events on the settings bar (keys on its fields, clicks on its panel buttons); the figures
are read off the widgets (verdict, peak, headroom, largest batch, longest context, per-rank peaks,
the Tokens field, Make It Fit's header and rows) and compared with `memdesigner estimate
--max-batch --format json` and `memdesigner fit --format json`, run in-process through cli.main
(the same code the command runs) on the file the window saved."""

import json

import pytest
from gui_helpers import choose, load, open_panel, toggle_to, type_into
from PySide6.QtCore import Qt

from memdesigner import cli
from memdesigner.engine import devices as devmod
from memdesigner.importers.hf_config import design_from_config
from memdesigner.io.design_file import load_design
from memdesigner.reports.suggestions import price_text
from memdesigner.units import format_bytes

# Llama-3-8B's layer, two of them (an estimate's cost is its op count, not its bytes)
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 2, "num_key_value_heads": 8,
         "vocab_size": 128256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
         "tie_word_embeddings": False, "hidden_act": "silu"}


def _design(name):
    if name == "llama":
        return design_from_config(LLAMA, seq_len=2048)
    return load_design(f"resources/examples/{name}.json")


# a covering set chosen by hand (not the full product, nor every pair): each value of mode, optimizer,
# precision (fp32 / AMP / bf16 / fp16), checkpointing, fine-tuning (full / LoRA / QLoRA), GPUs, strategy
# (with and without offload), TP, PP, generate's new tokens and KV cache, and the Tokens setting appears
# in at least one row, mixed across the three designs
GRID = [
    # design, device, mode, batch, optimizer, precision, ckpt, ft, gpus, strategy, offload, tp, pp, generate, seq
    ("seed_geron_cnn", "rtx3060-12gb", "train", 1, "sgd", "fp32", False, "full", 1, "none", False, 1, 1, None, None),
    ("seed_geron_cnn", "rtx3060-12gb", "train", 8, "momentum", "amp", True, "full", 2, "ddp", False, 1, 1, None, None),
    ("seed_geron_cnn", "rtx3080-10gb", "train", 4, "adamw", "bf16", True, "lora", 4, "zero1", False, 1, 1, None, None),
    ("seed_geron_cnn", "rtx3060-12gb", "train", 2, "adam", "fp16", False, "full", 1, "none", False, 1, 2, None, None),
    ("seed_keras_audio", "rtx3080-10gb", "train", 1, "adam", "fp16", False, "full", 2, "zero2", True, 1, 1, None, None),
    ("seed_keras_audio", "rtx3080-10gb", "inference", 16, None, "fp32", False, "full", 2, "ddp", False, 2, 1, None,
     None),
    ("llama", "rtx4090", "train", 1, "adamw", "bf16", True, "lora", 1, "none", False, 2, 1, None, 1024),
    ("llama", "rtx4090", "train", 1, "adamw8bit", "bf16", False, "qlora", 2, "zero3", False, 1, 1, None, 512),
    ("llama", "a100-80gb", "train", 2, "adam", "amp", True, "full", 4, "zero3", True, 2, 1, None, None),
    ("llama", "rtx4090", "train", 1, "sgd", "fp16", False, "qlora", 1, "none", False, 2, 1, None, None),
    ("llama", "rtx3080-10gb", "generate", 1, None, "bf16", False, "full", 1, "none", False, 2, 1, (64, "static"), None),
    ("llama", "rtx4090", "generate", 2, None, "fp16", False, "full", 2, "ddp", False, 1, 1, (128, "dynamic"), 256),
    ("llama", "rtx3060-12gb", "inference", 1, None, "fp32", False, "full", 1, "none", False, 1, 2, None, 4096),
    ("llama", "rtx3090", "train", 1, "adafactor", "bf16", True, "lora", 2, "zero2", True, 1, 1, None, 1024),
    ("seed_geron_cnn", "rtx3060-12gb", "train", 4, "paged_adamw8bit", "bf16", False, "full", 1, "none", False, 1, 1,
     None, None),
]


@pytest.fixture
def real_devices(window, monkeypatch):
    monkeypatch.setattr("memdesigner._qt.settings.settings_bar.load_devices", devmod.all_devices)
    window.settings_bar.reload_devices()


def drive(window, qtbot, device, mode, batch, optimizer, precision, ckpt, ft, gpus, strategy, offload, tp, pp,
          generate, seq):
    """Set each control as a user does: keys on the bar's fields, clicks on its panel buttons."""
    bar = window.settings_bar
    choose(qtbot, bar.device, device)
    choose(qtbot, bar.mode, mode)
    if batch != bar.batch.value():
        type_into(qtbot, bar.batch, batch)
    if seq is not None:
        qtbot.waitUntil(lambda: bar.seq.isVisible(), timeout=10000)  # shown once the estimate says tokens
        type_into(qtbot, bar.seq, seq)
    choose(qtbot, bar.dtype, "fp32" if precision == "amp" else precision)
    toggle_to(qtbot, bar.amp, precision == "amp")
    if mode == "train":
        choose(qtbot, bar.optimizer, optimizer)
        toggle_to(qtbot, bar.ckpt, ckpt)
        open_panel(qtbot, bar.finetune.more)
        choose(qtbot, bar.finetune.kind, ft)
        bar.finetune.more.panel.hide()
    par = bar.parallel
    open_panel(qtbot, par.button)
    if gpus > 1:
        type_into(qtbot, par.gpus, gpus)
    choose(qtbot, par.strategy, strategy)
    toggle_to(qtbot, par.offload, offload)
    if tp > 1:
        type_into(qtbot, par.tp, tp)
    if pp > 1:
        type_into(qtbot, par.pp, pp)
        type_into(qtbot, par.mb, 2 * pp)
    par.button.panel.hide()
    if generate is not None:
        new_tokens, kv = generate
        open_panel(qtbot, bar.generate.button)
        type_into(qtbot, bar.generate.new_tokens, new_tokens)
        choose(qtbot, bar.generate.kv_cache, kv)
        bar.generate.button.panel.hide()


def settled(window, qtbot) -> None:
    """The estimate and the largest-batch search of the latest settings both landed."""
    svc = window.service
    qtbot.waitUntil(lambda: not svc.busy and window.result is not None and window.result.gen == svc.gen
                    and window.sweep is not None and window.sweep.gen == svc.gen, timeout=60000)


def run_cli(capsys, *argv) -> dict:
    capsys.readouterr()
    code = cli.main(list(argv))
    assert code in (0, 1), code  # fit: 1 = does not fit as given
    return json.loads(capsys.readouterr().out)


def verdict_text(rep: dict) -> str:
    dev, n = rep["device"], len(rep["unruled_ops"])
    if n:
        return f"⚠ {'Fits' if dev['fits'] else 'Does not fit'} — but {n} layer{'s' if n != 1 else ''} not modelled"
    head = dev["headroom_bytes"]
    return f"✓ Fits — {format_bytes(head)} to spare" if dev["fits"] else f"✗ Does not fit — {format_bytes(-head)} over"


def shown_fit(window, qtbot):
    """Tools -> Make It Fit…, clicked in the menu bar."""
    mb = window.menuBar()
    tools = next(a for a in mb.actions() if a.text() == "&Tools")
    qtbot.mouseClick(mb, Qt.LeftButton, pos=mb.actionGeometry(tools).center())
    qtbot.waitUntil(lambda: tools.menu().isVisible(), timeout=5000)
    menu = tools.menu()
    for _ in menu.actions():  # down the menu to the entry, then Return
        if menu.activeAction() is window.act_make_fit:
            break
        qtbot.keyClick(menu, Qt.Key_Down)
    assert menu.activeAction() is window.act_make_fit
    qtbot.keyClick(menu, Qt.Key_Return)
    qtbot.waitUntil(lambda: getattr(window, "_fit_dialog", None) is not None and window._fit_dialog.isVisible(),
                    timeout=30000)
    dlg = window._fit_dialog
    t = dlg.table
    rows = [[t.item(i, j).text() for j in range(t.columnCount())] for i in range(t.rowCount())]
    return dlg, rows


@pytest.mark.parametrize("case", GRID, ids=[f"{c[0]}-{c[2]}-{c[4]}-{c[5]}-{c[7]}-{c[8]}{c[9]}-tp{c[11]}"
                                            for c in GRID])
def test_every_shown_figure_is_the_engines(window, qtbot, real_devices, tmp_path, capsys, case):
    name, device, mode, batch, optimizer, precision, ckpt, ft, gpus, strategy, offload, tp, pp, generate, seq = case
    load(window, qtbot, _design(name))
    drive(window, qtbot, device, mode, batch, optimizer, precision, ckpt, ft, gpus, strategy, offload, tp, pp,
          generate, seq)
    settled(window, qtbot)
    path = str(tmp_path / "design.json")
    assert window.save_to(path)
    rep = run_cli(capsys, "estimate", path, "--max-batch", "--format", "json",
                  *(["--max-context"] if mode == "generate" else []))
    s = rep["settings"]
    if mode == "generate":  # not modelled there: the fields are off and the settings leave them out
        assert not window.settings_bar.parallel.tp.isEnabled() and not window.settings_bar.parallel.pp.isEnabled()
        tp = pp = 1
    assert (s["mode"], s["batch"], s["gpus"], s["strategy"], s["tensor_parallel"], s["pipeline_parallel"]) == \
        (mode, batch, gpus, strategy, tp, pp)
    assert s["amp"] == (precision == "amp") and s["offload"] == ("params" if offload else "none")
    if mode == "train":
        assert (s["optimizer"], s["checkpointing"], bool(s["lora_r"]), s["base_bits"]) == \
            (optimizer, ckpt, ft in ("lora", "qlora"), 4 if ft == "qlora" else 0)
    summary = window.summary
    got = window.result.report
    assert got.device_peak_bytes == rep["device_peak_bytes"]  # the figures below are drawn from these bytes
    assert summary.verdict.text() == verdict_text(rep)
    assert summary.peak.value.text() == format_bytes(rep["device_peak_bytes"], 2)
    dev = rep["device"]
    assert summary.capacity.value.text() == format_bytes(dev["capacity_bytes"])
    assert summary.headroom.value.text() == format_bytes(dev["headroom_bytes"])
    mb = rep["max_batch"]
    assert summary.max_batch.value.text() == (str(mb) if mb else "none")
    if mode == "generate":
        ctx = rep["generate"]["max_context"]
        assert summary.max_batch.sub.text() == (f"longest context {ctx:,} tokens" if ctx else "no context fits")
    length = rep.get("sequence_length")
    assert window.settings_bar.seq.isVisible() == (length is not None)
    if length is not None:
        assert window.settings_bar.seq.value() == length == (seq or 2048)
    picker = window.rank_picker
    ranks = {r["rank"]: r["peak_bytes"] for r in rep["per_rank"]}
    if picker.isVisible():
        shown = [picker.combo.itemText(i) for i in range(picker.combo.count())]
        assert [t.split(" — ")[1].removesuffix("  busiest") for t in shown] == \
            [format_bytes(ranks[picker.combo.itemData(i)]) for i in range(picker.combo.count())]
        assert sorted(picker.combo.itemData(i) for i in range(picker.combo.count())) == sorted(ranks)
    else:
        assert len(set(ranks.values())) <= 1
    fit = run_cli(capsys, "fit", path, "--format", "json")
    dlg, rows = shown_fit(window, qtbot)
    assert dlg.advice.to_dict() == fit
    want = [[x["change"], format_bytes(x["device_peak_bytes"], 2), "fits" if x["fits"] else "still too big",
             price_text(dlg.advice.suggestions[i])] for i, x in enumerate(fit["suggestions"])]
    assert rows == want
    text = dlg.head.text()
    assert f"needs <b>{format_bytes(fit['device_peak_bytes'], 2)}</b>" in text
    assert f"Largest batch with these settings: {fit['max_batch'] or 'none'}" in text
    assert fit["max_batch"] == mb
    assert (f"Fewest GPUs that fit (zero3): {fit['min_gpus']}." in text) == bool(fit["min_gpus"])
    if fit["max_sequence"] is not None:
        n = fit["max_sequence"]
        assert f"Longest sequence that fits: {f'{n:,} tokens' if n else 'none'}." in text
    else:
        assert "Longest sequence" not in text
    dlg.close()

"""Fine-tuning in the window: the inspector's trainable checkbox (undoable) and the settings
bar's Training choice, both reaching the estimate and the saved design."""

from gui_helpers import load, small_cnn

import memdesigner


def _train(d):
    d.settings = {"mode": "train", "optimizer": "adam", "batch": 4}
    return d


def test_freeze_a_layer_in_the_inspector_and_undo(window, qtbot):
    d = _train(small_cnn())
    before = load(window, qtbot, d)
    window.select_node("conv")
    box = window.inspector.trainable_box
    assert box.isChecked()
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        box.setChecked(False)
    assert window.design.nodes["conv"].trainable is False
    frozen = window.result.report
    assert frozen.trainable_params == before.params - (3 * 9 * 16 + 16)
    assert frozen.peak_bytes == memdesigner.estimate(window.design, window.settings_bar.settings()).peak_bytes
    assert frozen.peak_bytes < before.peak_bytes
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.stack.undo()
    assert window.design.nodes["conv"].trainable and box.isChecked()
    assert window.result.report.peak_bytes == before.peak_bytes


def test_training_choice_lora_is_estimated_and_saved(window, qtbot, tmp_path):
    from memdesigner.io.design_file import load_design

    load(window, qtbot, _train(small_cnn()))
    ft = window.settings_bar.finetune
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        ft.kind.setCurrentIndex(ft.kind.findData("lora"))
    s = window.settings_bar.settings()
    assert s.lora_r == 8
    rep = window.result.report
    # all-linear leaves the head out: the only Linear is the head, so no adapter, all frozen
    assert rep.finetune["adapters"] == [] and rep.trainable_params == 0
    path = tmp_path / "lora.json"
    window.save_to(str(path))
    saved = load_design(path).settings
    assert saved["training"] == "lora" and saved["lora_r"] == 8
    window.settings_bar.apply_dict({"mode": "train", "training": "qlora", "lora_r": 4, "base_bits": 4})
    assert window.settings_bar.settings().base_bits == 4 and not ft.bits.isHidden()


def test_layer_checkpointing_and_master_weights_survive_the_bar(window, qtbot):
    d = _train(small_cnn())
    d.settings.update(dtype="bf16", checkpoint_layers=True, master_weights=True, grad_accum=4)
    load(window, qtbot, d)
    s = window.settings_bar.settings()
    assert s.checkpoint_layers and s.master_weights and s.grad_accum == 4
    assert window.result.report.settings["global_batch"] == 16
    saved = window.settings_bar.to_dict()
    assert saved["checkpoint_layers"] and saved["master_weights"] and saved["grad_accum"] == 4

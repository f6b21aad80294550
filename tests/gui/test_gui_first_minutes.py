"""The first five minutes: palette search by common words, Esc, arrow-key nudges, pasting twice,
number fields that refuse instead of silently changing a value, calm "not connected yet", the
timeline's zoom reset, FLOP units past giga and devices in one unit."""

from gui_helpers import load, small_cnn
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication

from memdesigner._qt.canvas.scene import NOT_CONNECTED
from memdesigner.model import registry
from memdesigner.units import format_count, format_flops

SEARCHES = {"fc": "Linear", "dense": "Linear", "bn": "BatchNorm2d", "transformer": "MultiHeadAttention",
            "attention": "ScaledDotProductAttention", "mlp": "Linear", "conv": "Conv2d", "pool": "MaxPool2d",
            "lstm": "LSTM", "embedding": "Embedding", "norm": "LayerNorm"}


def _visible(palette):
    return {name for name, it in palette.items.items() if not it.isHidden() and not it.parent().isHidden()}


def test_palette_finds_common_words(window, qtbot):
    pal = window.palette
    for word, expected in SEARCHES.items():
        pal.search.clear()
        qtbot.keyClicks(pal.search, word)  # typed, as a user would
        assert expected in _visible(pal), word
    assert {"RMSNorm", "BatchNorm2d", "GroupNorm"} <= _visible(pal)  # "norm" finds every normalisation
    pal.search.setText("bn")
    assert _visible(pal) == {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d"}
    pal.search.setText("fc")
    assert _visible(pal) == {"Linear"}
    # the words are declared by the layer types themselves, not by the palette
    assert "fc" in registry.get("Linear").search_words and "bn" in registry.get("BatchNorm2d").search_words


def test_escape_deselects(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    window.view.setFocus()
    qtbot.keyClick(window.view, Qt.Key_Escape)
    assert window.scene.selected_node_ids() == []


def _key(widget, key, repeat=False, mods=Qt.NoModifier):
    QApplication.sendEvent(widget, QKeyEvent(QEvent.KeyPress, key, mods, "", repeat))


def test_arrow_keys_nudge_one_undo_step_per_press(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    x0, y0 = window.design.nodes["conv"].pos
    n0 = window.stack.count()
    _key(window.view, Qt.Key_Right)  # a press ...
    _key(window.view, Qt.Key_Right, repeat=True)  # ... held: two auto-repeats
    _key(window.view, Qt.Key_Right, repeat=True)
    assert window.design.nodes["conv"].pos == (x0 + 30, y0)
    assert window.stack.count() == n0 + 1
    _key(window.view, Qt.Key_Down, mods=Qt.ShiftModifier)  # a new press, ten times as far
    assert window.design.nodes["conv"].pos == (x0 + 30, y0 + 100)
    assert window.stack.count() == n0 + 2
    assert window.scene.nodes["conv"].pos() == QPointF(x0 + 30, y0 + 100)
    window.stack.undo()
    window.stack.undo()
    assert window.design.nodes["conv"].pos == (x0, y0)


def test_pasting_twice_offsets_each_copy(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    x0, y0 = window.design.nodes["conv"].pos
    window.view.setFocus()
    qtbot.keyClick(window.view, Qt.Key_C, Qt.ControlModifier)
    qtbot.keyClick(window.view, Qt.Key_V, Qt.ControlModifier)
    first = window.scene.selected_node_ids()
    qtbot.keyClick(window.view, Qt.Key_V, Qt.ControlModifier)
    second = window.scene.selected_node_ids()
    assert len(first) == len(second) == 1 and first != second
    assert window.design.nodes[first[0]].pos == (x0 + 40, y0 + 40)
    assert window.design.nodes[second[0]].pos == (x0 + 80, y0 + 80)


def _type_into(qtbot, spin, text):
    spin.setFocus()
    spin.lineEdit().selectAll()
    qtbot.keyClicks(spin, text)
    qtbot.keyClick(spin, Qt.Key_Return)


def test_number_fields_refuse_out_of_range_instead_of_changing_it(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    row = window.inspector.fields["out_channels"]
    _type_into(qtbot, row.editor, "-5")
    assert window.design.nodes["conv"].props["out_channels"] == 16
    assert row.error_text == "Refused: -5 is below the minimum 1"
    assert window.inspector.issue_label.text() == "<b>out channels</b> — Refused: -5 is below the minimum 1"
    assert row.editor.value() == -5  # what was typed stays visible, marked, with the reason below
    _type_into(qtbot, row.editor, "24")
    assert window.design.nodes["conv"].props["out_channels"] == 24
    assert row.error_text == "" and window.inspector.issue_label.isHidden()


def test_float_field_refuses_the_same_way(window, qtbot):
    d = small_cnn()
    d.add_node("Dropout", id="drop", pos=(1350, 0))
    d.add_edge("fc", "drop")
    load(window, qtbot, d)
    window.select_node("drop")
    row = window.inspector.fields["p"]
    _type_into(qtbot, row.editor, "-0.5")
    assert window.design.nodes["drop"].props["p"] == 0.5
    assert row.error_text == "Refused: -0.5 is below the minimum 0"


def test_dropped_layer_is_calmly_not_connected_yet(window, qtbot):
    load(window, qtbot, small_cnn())
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        nid = window.add_layer("Linear", QPointF(0, 400))
    item = window.scene.nodes[nid]
    assert item.issue == "" and not item.in_error
    assert item.pending == NOT_CONNECTED
    assert window.summary.verdict.text() == "1 layer(s) not connected yet"  # no red banner either
    window.select_node(nid)
    assert window.inspector.issue_label.text().startswith("Not connected yet")
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.scene.try_connect("fc", nid)
    assert item.pending == "" and item.issue == ""


def test_lone_dropped_layer_asks_to_connect_not_to_fix(window, qtbot):
    from memdesigner.model.design import Design

    load(window, qtbot, Design("empty"))
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.add_layer("Conv2d", QPointF(0, 0))
    assert window.timeline._empty_text.textItem.toPlainText() == \
        "Nothing to show: add an Input layer and connect layers"


def test_timeline_home_resets_the_zoom(window, qtbot):
    load(window, qtbot, small_cnn())
    tl = window.timeline
    n = len(tl.events)
    full = tl.getViewBox().viewRange()
    tl.setXRange(2, 4, padding=0)
    assert tl.getViewBox().viewRange()[0] == [2, 4]
    qtbot.keyClick(tl, Qt.Key_Home)
    assert tl.getViewBox().viewRange() == full
    assert full[0] == [0, n]


    class DoubleClick:  # what pyqtgraph's scene emits on a double-click
        def button(self):
            return Qt.LeftButton

        def double(self):
            return True

    tl.setXRange(1, 3, padding=0)
    tl.scene().sigMouseClicked.emit(DoubleClick())
    assert tl.getViewBox().viewRange() == full


def test_flops_scale_past_giga():
    assert format_flops(2_500_000_000) == "2.50 GFLOP"
    assert format_flops(3_100_000_000_000) == "3.10 TFLOP"
    assert format_flops(7_200_000_000_000_000) == "7.20 PFLOP"
    assert format_count(1_500_000_000_000_000_000) == "1.50 E"


def test_devices_listed_in_one_unit(capsys, window):
    from memdesigner.cli import main

    assert main(["devices"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) > 10
    for r in rows:  # ... memory GiB runtime GiB
        parts = r.split()
        assert parts[-1] == "GiB" and parts[-3] == "GiB", r
    combo = window.settings_bar.device
    labels = [combo.itemText(i) for i in range(1, combo.count())]
    assert labels and all(lbl.endswith(" GiB") for lbl in labels)
    assert "Small GPU 1 GiB — 1.0 GiB" in labels


def test_palette_offers_only_types_a_user_places(window):
    """Block ports and instances come from Group into block, LoRA casts, QLoRA weights and sequence
    parallel's collectives from the estimate: a newcomer dragging them in would get a broken node, so the palette leaves them out
    (the registration says so)."""
    pal = window.palette
    hidden = {lt.name for lt in registry.all_types() if not lt.in_palette}
    assert hidden == {"Block", "BlockInput", "BlockOutput", "ToDtype", "QuantLinear", "AllGather", "ReduceScatter"}
    assert not hidden & set(pal.items)
    assert {"Linear", "RMSNorm", "SparseMoE", "KVCache"} <= set(pal.items)


def test_inspector_does_not_jump_when_an_error_appears(window, qtbot):
    """The reason for a refused value or a layer's error appears below the fields: every field
    stays where it was, so the next click lands where the user aimed."""
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    ins = window.inspector
    fields = ("out_channels", "kernel", "stride", "padding", "bias")

    def where():
        return {f: ins.fields[f].editor.mapTo(ins, ins.fields[f].editor.rect().topLeft()) for f in fields}

    before = where()
    _type_into(qtbot, ins.fields["out_channels"].editor, "-5")  # refused
    assert ins.issue_label.isVisible() and "Refused" in ins.issue_label.text()
    assert where() == before
    _type_into(qtbot, ins.fields["out_channels"].editor, "16")
    kernel = ins.fields["kernel"].editor
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        kernel.setFocus()
        kernel.selectAll()
        qtbot.keyClicks(kernel, "64")  # taken, but larger than the 32x32 input: the layer's error
        qtbot.keyClick(kernel, Qt.Key_Return)
    assert window.design.nodes["conv"].props["kernel"] == 64
    assert ins.issue_label.isVisible() and "Error" in ins.issue_label.text()
    assert where() == before
    banner = ins.issue_label.geometry()
    last = ins.fields["bias"].editor
    assert banner.top() >= last.mapTo(ins, last.rect().bottomLeft()).y() or ins.verticalScrollBar().maximum() > 0


def test_settings_bar_refuses_out_of_range_numbers_out_loud(window, qtbot):
    """The settings bar's number fields refuse like the inspector's: "-5" in Batch is neither
    dropped silently nor turned into 5; the batch stays and a note under the field says why."""
    load(window, qtbot, small_cnn())
    batch = window.settings_bar.batch
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        _type_into(qtbot, batch, "4")
    _type_into(qtbot, batch, "-5")
    assert batch.value() == 4 and window.settings_bar.settings().batch == 4
    assert batch.note.isVisible() and batch.note.text() == "Refused: -5 is below the minimum 1"
    _type_into(qtbot, batch, "0")
    assert batch.value() == 4 and batch.note.text() == "Refused: 0 is below the minimum 1"
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        _type_into(qtbot, batch, "8")
    assert window.result.report.settings["batch"] == 8 and not batch.note.isVisible()


def test_settings_bar_float_and_generate_fields_refuse_the_same_way(window, qtbot):
    from memdesigner._qt.settings.number_fields import RefusingDoubleSpinBox

    bar = window.settings_bar
    assert isinstance(bar.finetune.dropout, RefusingDoubleSpinBox)  # in the fine-tuning pop-up
    drop = RefusingDoubleSpinBox(0.0, 0.99)
    qtbot.addWidget(drop)
    drop.show()
    _type_into(qtbot, drop, "1.5")
    assert drop.value() == 0.0 and drop.note.text() == "Refused: 1.5 is above the maximum 0.99"
    bar.mode.setCurrentIndex(bar.mode.findData("generate"))
    tokens = bar.generate.new_tokens
    _type_into(qtbot, tokens, "-3")
    assert tokens.value() == 16 and tokens.note.text() == "Refused: -3 is below the minimum 1"

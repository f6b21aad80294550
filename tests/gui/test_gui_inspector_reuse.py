"""The inspector keeps one page per layer type and one empty note: selecting another layer of a
type already shown fills the same editors (no widgets built or re-polished per selection), and
what the editors do applies to the layer now shown, not the one the page was built for."""

from gui_helpers import load, small_cnn


def _two_linears():
    d = small_cnn()
    d.add_node("Linear", {"out_features": 7}, id="fc2", pos=(1350, 0))
    d.add_edge("fc", "fc2")
    d.settings = {"mode": "train", "optimizer": "adam", "batch": 4}
    return d


def test_a_layer_type_page_is_reused_and_edits_the_layer_shown(window, qtbot):
    load(window, qtbot, _two_linears())
    ins = window.inspector
    window.select_node("fc")
    page, field, box = ins.page(), ins.fields["out_features"], ins.trainable_box
    assert field.editor.value() == 10
    window.select_node("conv")
    assert ins.page() is not page
    window.select_node("fc2")
    assert ins.page() is page and ins.fields["out_features"] is field and ins.trainable_box is box
    assert field.editor.value() == 7 and ins.name_edit.text() == "fc2"
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        box.setChecked(False)  # the reused checkbox freezes fc2, not fc (the page was built for fc)
    assert window.design.nodes["fc2"].trainable is False and window.design.nodes["fc"].trainable is True
    field.editor.setValue(5)
    assert window.design.nodes["fc2"].props["out_features"] == 5 and window.design.nodes["fc"].props["out_features"] == 10


def test_a_refused_value_does_not_follow_to_the_next_layer_of_the_type(window, qtbot):
    load(window, qtbot, _two_linears())
    ins = window.inspector
    window.select_node("fc")
    assert not ins.commit("out_features", -3)
    assert ins.fields["out_features"].refused and ins.issue_label.isVisibleTo(ins)
    window.select_node("fc2")
    assert not ins.fields["out_features"].refused
    assert not ins.fields["out_features"].editor.property("invalid")
    assert not ins.issue_label.isVisibleTo(ins)


def test_the_empty_note_is_one_label_whose_text_changes(window, qtbot):
    load(window, qtbot, _two_linears())
    ins = window.inspector
    ins.show_selection(["fc", "fc2"])
    note = ins.page()
    assert note.text() == "2 layers selected."
    ins.show_selection(["fc", "fc2", "conv"])
    assert ins.page() is note and note.text() == "3 layers selected."
    ins.show_selection([])
    assert ins.page() is note and note.text() == "Select a layer to edit its properties."

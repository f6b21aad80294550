"""Blocks in the window: group, repeat, edit the definition, undo, save, reload, paste, ungroup;
at every step the window's estimate equals the estimate of the expanded network."""

import json
import os

from gui_helpers import load

import memdesigner as md
from memdesigner.io.design_file import design_to_dict
from memdesigner.model import block_edit, blocks
from memdesigner.model.design import Design

LAYER = ["ln", "fc1", "act", "fc2", "add"]
LAYER_PARAMS = 64 + (32 * 128 + 128) + (128 * 32 + 32)
OUTSIDE = 100 * 32 + (32 * 100 + 100)  # embedding + head


def one_layer() -> Design:
    d = Design("mlp-lm")
    d.add_node("Input", {"shape": (16,), "dtype": "int64"}, id="tokens", pos=(0, 0))
    d.add_node("Embedding", {"num_embeddings": 100, "embedding_dim": 32}, id="emb", pos=(270, 0))
    d.add_edge("tokens", "emb")
    for i, (t, p) in enumerate((("LayerNorm", {}), ("Linear", {"out_features": 128}), ("GELU", {}),
                                ("Linear", {"out_features": 32}), ("Add", {}))):
        d.add_node(t, p, id=LAYER[i], pos=(540 + 270 * i, 80))
    for a, b in (("emb", "ln"), ("ln", "fc1"), ("fc1", "act"), ("act", "fc2")):
        d.add_edge(a, b)
    d.add_edge("emb", "add", 0, 0)
    d.add_edge("fc2", "add", 0, 1)
    d.add_node("Linear", {"out_features": 100}, id="head", pos=(1900, 0))
    d.add_edge("add", "head")
    return d


def as_expanded(window) -> dict:
    """The window's estimate equals the estimate of the expanded network, byte for byte."""
    s, dev = window.settings_bar.settings(), window.settings_bar.current_device()
    shown = window.result.report.to_dict()
    assert shown == md.estimate(blocks.expand(window.design), s, device=dev).to_dict()
    return shown


def wait(window, qtbot, fn):
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        fn()
    return window.result.report


def test_blocks_in_the_window(window, qtbot, tmp_path):
    window.settings_bar.apply_dict({"mode": "train", "optimizer": "adam", "batch": 4})
    flat = load(window, qtbot, one_layer())
    assert flat.params == OUTSIDE + LAYER_PARAMS
    qtbot.waitUntil(lambda: window.result.report.settings["mode"] == "train", timeout=10000)
    want = as_expanded(window)

    # group (Ctrl+G): one instance, the same estimate as the flat design (the layer reads the
    # embedding, which the Add keeps anyway, so the module call changes nothing here)
    window.scene.select_nodes(LAYER)
    rep = wait(window, qtbot, window.blocks_nav.act_group.trigger)
    inst = next(n.id for n in window.design.nodes.values() if n.type == "Block")
    assert [n.type for n in window.design.nodes.values()] == ["Input", "Embedding", "Block", "Linear"]
    assert {e.src for e in window.design.edges if e.dst == inst} == {"emb"}
    assert rep.peak_bytes == want["peak_bytes"] and rep.params == want["params"]
    as_expanded(window)
    item = window.scene.nodes[inst]
    fmt = md.units.format_bytes
    assert item.type_name == "block ×1"
    assert item.shape_text == f"4×16×32 · {fmt(rep.blocks[inst]['memory_per_instance_bytes'])} each"
    assert item.mem_text == fmt(rep.blocks[inst]["memory_total_bytes"])
    assert len(item.inputs) == 1  # the definition's one input port, not a variadic one

    # repeat ×3 in the inspector
    window.select_node(inst)
    rep = wait(window, qtbot, lambda: window.inspector.fields["repeat"].editor.setValue(3))
    assert rep.params == OUTSIDE + 3 * LAYER_PARAMS
    assert rep.blocks[inst]["total"]["params"] == 3 * rep.blocks[inst]["per_instance"]["params"]
    assert window.scene.nodes[inst].type_name == "block ×3"
    three = as_expanded(window)

    # open the definition (double-click), edit it: every repetition follows
    window.scene.block_open.emit(inst)
    assert window.scene.design is window.design.blocks["block"].graph
    assert window.blocks_nav.bar.isVisible() and len(window.blocks_nav.bar.crumbs) == 2
    window.select_node("fc1")
    rep = wait(window, qtbot, lambda: window.inspector.fields["out_features"].editor.setValue(64))
    assert rep.params == OUTSIDE + 3 * (64 + (32 * 64 + 64) + (64 * 32 + 32))
    assert window.scene.nodes["fc1"].shape_text == "4×16×64"  # the opened definition shows its rows
    as_expanded(window)
    if os.environ.get("MEMDESIGNER_SHOTS"):  # screenshots for a person to look at
        window.view.zoom_by(2.0)
        window.grab().save(os.path.join(os.environ["MEMDESIGNER_SHOTS"], "blocks_opened_definition.png"))

    # undo the edit, then the repeat and the grouping; redo all
    rep = wait(window, qtbot, window.stack.undo)
    assert rep.to_dict() == three
    rep = wait(window, qtbot, window.stack.undo)
    assert rep.params == OUTSIDE + LAYER_PARAMS
    rep = wait(window, qtbot, window.stack.undo)  # the group: the definition closes, the layers are back
    qtbot.waitUntil(lambda: window.scene.design is window.design, timeout=5000)
    assert "ln" in window.design.nodes and not window.design.blocks
    assert rep.to_dict() == want
    for _ in range(3):
        rep = wait(window, qtbot, window.stack.redo)
    assert rep.params == OUTSIDE + 3 * (64 + (32 * 64 + 64) + (64 * 32 + 32))
    window.blocks_nav.go(0)
    assert window.scene.design is window.design and not window.blocks_nav.bar.isVisible()
    edited = as_expanded(window)
    if os.environ.get("MEMDESIGNER_SHOTS"):
        window.select_node(inst)
        qtbot.wait(50)
        window.view.zoom_by(3.0)
        window.view.centerOn(window.scene.nodes[inst])
        qtbot.wait(50)
        window.grab().save(os.path.join(os.environ["MEMDESIGNER_SHOTS"], "blocks_collapsed.png"))

    # save, reload
    path = tmp_path / "blocks.json"
    assert window.save_to(str(path))
    saved = json.loads(path.read_text())
    assert saved["version"] == 2 and [b["name"] for b in saved["blocks"]] == ["block"]
    rep = wait(window, qtbot, lambda: window.open_path(str(path)))
    assert rep.to_dict() == edited
    as_expanded(window)

    # autosave carries the definitions
    window.stack.push(__import__("memdesigner._qt.document.commands", fromlist=["x"]).MoveNodesCmd(
        window.design, {"head": (window.design.nodes["head"].pos, (2000.0, 10.0))}))
    assert window.autosave()
    auto = window.document.slot.file
    assert json.loads(auto.read_text())["design"]["blocks"] == saved["blocks"]

    # copy/paste an instance: linked to the same definition
    window.scene.select_nodes([inst])
    window.copy()
    window.paste()
    pasted = window.scene.selected_node_ids()
    assert len(pasted) == 1 and window.design.nodes[pasted[0]].props["definition"] == "block"
    assert set(window.design.blocks) == {"block"} and block_edit.users(window.design, "block") == 2
    rep = wait(window, qtbot, lambda: window.stack.push(
        __import__("memdesigner._qt.document.commands", fromlist=["x"]).AddEdgeCmd(window.design, "emb", pasted[0])))
    assert rep.blocks[pasted[0]]["total"] == rep.blocks[inst]["total"]
    as_expanded(window)

    # make unique: the copy gets its own definition
    window.scene.select_nodes([pasted[0]])
    wait(window, qtbot, window.blocks_nav.act_unique.trigger)
    assert window.design.nodes[pasted[0]].props["definition"] == "block_2"
    window.stack.undo()
    assert window.design.nodes[pasted[0]].props["definition"] == "block" and set(window.design.blocks) == {"block"}

    # paste into another document: the definition is copied along
    window.scene.select_nodes([inst])
    window.copy()
    other = Design("other")
    other.add_node("Input", {"shape": (16, 32)}, id="x")
    load(window, qtbot, other)
    window.paste()
    new = window.scene.selected_node_ids()
    assert set(window.design.blocks) == {"block"} and window.design.nodes[new[0]].type == "Block"
    assert design_to_dict(window.design)["blocks"] == saved["blocks"]
    rep = wait(window, qtbot, lambda: window.stack.push(
        __import__("memdesigner._qt.document.commands", fromlist=["x"]).AddEdgeCmd(window.design, "x", new[0])))
    assert rep.ok and rep.params == 3 * (64 + (32 * 64 + 64) + (64 * 32 + 32))
    as_expanded(window)

    # ungroup (Ctrl+Shift+G): the repetitions' layers, the same estimate
    before = window.result.report.to_dict()
    window.scene.select_nodes(new)
    rep = wait(window, qtbot, window.blocks_nav.act_ungroup.trigger)
    assert not window.design.blocks and len(window.design.nodes) == 1 + 3 * 5
    assert rep.peak_bytes == before["peak_bytes"] and rep.params == before["params"]
    rep = wait(window, qtbot, window.stack.undo)
    assert rep.to_dict() == before


def test_rename_definition_in_the_inspector_is_one_undo_step(window, qtbot):
    load(window, qtbot, one_layer())
    window.scene.select_nodes(LAYER)
    inst = wait(window, qtbot, window.blocks_nav.act_group.trigger) and window.scene.selected_node_ids()[0]
    window.select_node(inst)
    from PySide6.QtWidgets import QLineEdit

    edit = window.inspector.findChild(QLineEdit, "block-definition-name")
    edit.setText("mlp")
    edit.editingFinished.emit()
    assert set(window.design.blocks) == {"mlp"} and window.design.nodes[inst].props["definition"] == "mlp"
    window.stack.undo()
    assert set(window.design.blocks) == {"block"} and window.design.nodes[inst].props["definition"] == "block"


def test_a_layer_row_inside_a_block_selects_the_block(window, qtbot):
    load(window, qtbot, one_layer())
    window.scene.select_nodes(LAYER)
    wait(window, qtbot, window.blocks_nav.act_group.trigger)
    inst = window.scene.selected_node_ids()[0]
    window.scene.clearSelection()
    window.table.node_clicked.emit(f"{inst}.fc1")  # the expanded row of the block's fc1
    assert window.scene.selected_node_ids() == [inst]
    window.blocks_nav.open(inst)
    window.table.node_clicked.emit(f"{inst}.fc2")
    assert window.scene.selected_node_ids() == ["fc2"]

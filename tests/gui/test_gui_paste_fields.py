"""Issue 10 §2/§6: copy, paste and duplicate keep every field the one serializer writes (scope,
keep_until, tied, fused, layout, output, trainable, bits), with references inside the pasted set
pointing at the copies; a reference outside it is kept while its target is in the design."""

from gui_helpers import load
from PySide6.QtCore import Qt

from memdesigner.io.design_file import design_to_dict
from memdesigner.model.design import Design


def tied_lm() -> Design:
    """tok -> emb -> norm -> head (weight tied to emb.weight); emb's output held until head ran;
    norm and head one fused group; a frozen embedding; imported-model scopes."""
    d = Design("tied-lm")
    d.add_node("Input", {"shape": (8,), "dtype": "int64"}, id="tok", pos=(0, 0))
    d.add_node("Embedding", {"num_embeddings": 100, "embedding_dim": 16}, id="emb", pos=(270, 0),
               scope="model/embed", keep_until="head", layout="as_is", bits=8, trainable=False)
    d.add_node("LayerNorm", {}, id="norm", pos=(540, 0), scope="model/norm", fused="model.block")
    d.add_node("Linear", {"out_features": 100, "bias": False}, id="head", pos=(810, 0), scope="model/lm_head",
               tied={"weight": "emb.weight"}, fused="model.block", output=True)
    for a, b in (("tok", "emb"), ("emb", "norm"), ("norm", "head")):
        d.add_edge(a, b)
    return d


def _saved(design, nid) -> dict:
    nd = next(nd for nd in design_to_dict(design)["nodes"] if nd["id"] == nid)
    return {k: v for k, v in nd.items() if k not in ("id", "name", "pos")}


def _keys(window, qtbot, key):
    window.view.setFocus()
    qtbot.keyClick(window.view, key, Qt.ControlModifier)


def test_paste_keeps_every_saved_field_with_ids_remapped(window, qtbot):
    rep = load(window, qtbot, tied_lm())
    assert rep.params == 100 * 16 + 2 * 16  # the head shares the embedding's 1,600 weights
    window.scene.select_nodes(["emb", "norm", "head"])
    _keys(window, qtbot, Qt.Key_C)
    _keys(window, qtbot, Qt.Key_V)
    new = window.scene.selected_node_ids()
    d = window.design
    copy = {d.nodes[n].type: n for n in new}
    emb, norm, head = copy["Embedding"], copy["LayerNorm"], copy["Linear"]
    # everything the file keeps, references pointing into the copy
    assert _saved(d, emb) == dict(_saved(d, "emb"), keep_until=head)
    assert _saved(d, head) == dict(_saved(d, "head"), tied={"weight": f"{emb}.weight"}, fused="model.block#2")
    assert _saved(d, norm) == dict(_saved(d, "norm"), fused="model.block#2")
    assert d.nodes[emb].trainable is False and d.nodes[head].output is True and d.nodes[emb].bits == 8
    # one undo step takes the whole paste back
    window.stack.undo()
    assert set(d.nodes) == {"tok", "emb", "norm", "head"}


def test_a_pasted_copy_of_the_whole_model_estimates_like_it(window, qtbot):
    rep = load(window, qtbot, tied_lm())
    window.scene.select_nodes(list(window.design.nodes))
    _keys(window, qtbot, Qt.Key_C)
    load(window, qtbot, Design("empty"))
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        _keys(window, qtbot, Qt.Key_V)
    got = window.result.report
    assert got.params == rep.params == 1632  # tied: without the tie the copy has 3,232
    assert got.peak_bytes == rep.peak_bytes


def test_a_reference_outside_the_pasted_set_is_kept_if_its_target_is_in_the_design(window, qtbot):
    load(window, qtbot, tied_lm())
    window.scene.select_nodes(["head"])
    _keys(window, qtbot, Qt.Key_D)  # duplicate: the copy shares the embedding still in the design
    (dup,) = window.scene.selected_node_ids()
    assert window.design.nodes[dup].tied == {"weight": "emb.weight"}
    window.scene.select_nodes(["emb"])
    _keys(window, qtbot, Qt.Key_C)
    _keys(window, qtbot, Qt.Key_V)
    (emb2,) = window.scene.selected_node_ids()
    assert window.design.nodes[emb2].keep_until == "head"  # the original reader is still there

    # pasted into a document without those targets: the references are dropped, the rest kept
    window.scene.select_nodes(["head"])
    _keys(window, qtbot, Qt.Key_C)
    other = Design("other")
    other.add_node("Input", {"shape": (16,)}, id="x")
    load(window, qtbot, other)
    _keys(window, qtbot, Qt.Key_V)
    (head,) = window.scene.selected_node_ids()
    n = window.design.nodes[head]
    assert (n.tied, n.scope, n.fused, n.output) == ({}, "model/lm_head", "model.block", True)

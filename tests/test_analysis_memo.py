"""analyze() keeps its result on the design and hands it back while nothing analysis reads has
changed (an estimate under other settings, a batch sweep); any edit, also one made in place
behind Design's back, gives a fresh analysis."""

import memdesigner as md
from memdesigner.model.analysis import analyze


def _mlp() -> md.Design:
    d = md.Design()
    d.add_node("Input", {"shape": [8]}, id="x")
    d.add_node("Linear", {"out_features": 4}, id="fc")
    d.add_edge("x", "fc")
    return d


def test_unchanged_design_reuses_its_analysis():
    d = _mlp()
    assert analyze(d) is analyze(d)


def test_in_place_props_edit_is_seen():
    d = _mlp()
    assert analyze(d).nodes["fc"].params[0].numel == 32  # 4 x 8 weight
    d.nodes["fc"].props["out_features"] = 6  # bypasses Design's rev
    assert analyze(d).nodes["fc"].params[0].numel == 48


def test_edges_trainable_and_new_nodes_are_seen():
    d = _mlp()
    assert analyze(d).nodes["fc"].outputs[0].shape == (4,)
    d.nodes["fc"].trainable = False
    assert analyze(d).nodes["fc"].params[0].frozen
    d.add_node("ReLU", id="act")
    assert "act" in analyze(d).nodes
    d.add_edge("fc", "act")
    assert analyze(d).nodes["act"].outputs[0].shape == (4,)

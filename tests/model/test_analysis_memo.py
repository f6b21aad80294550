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
    first = analyze(d)  # analysed once (a one-off copy, say): nothing kept
    assert analyze(d) is not first
    assert analyze(d) is analyze(d)


def test_in_place_props_edit_is_seen():
    d = _mlp()
    analyze(d)
    assert analyze(d).nodes["fc"].params[0].numel == 32  # 4 x 8 weight
    d.nodes["fc"].props["out_features"] = 6  # bypasses Design's rev
    assert analyze(d).nodes["fc"].params[0].numel == 48


def test_edges_trainable_and_new_nodes_are_seen():
    d = _mlp()
    analyze(d)
    assert analyze(d).nodes["fc"].outputs[0].shape == (4,)
    d.nodes["fc"].trainable = False
    assert analyze(d).nodes["fc"].params[0].frozen
    d.add_node("ReLU", id="act")
    assert "act" in analyze(d).nodes
    d.add_edge("fc", "act")
    assert analyze(d).nodes["act"].outputs[0].shape == (4,)


def test_estimates_of_one_design_under_other_settings_match_fresh_ones():
    """The analysis (and the report's graph facts kept on it: FLOPs, the lower bound's largest
    pair of feature maps) carry over to the next estimate of the same design; every figure
    still follows that estimate's batch and dtype."""
    import json
    from pathlib import Path

    ex = Path(__file__).resolve().parents[2] / "resources" / "examples" / "resnet18.json"
    d = md.load_design(ex)
    for kw in (dict(mode="inference", batch=3), dict(mode="inference", batch=5, dtype="fp16"),
               dict(mode="train", batch=2, optimizer="adam")):
        warm = md.estimate(d, **kw).to_dict()
        cold = md.estimate(md.load_design(ex), **kw).to_dict()
        assert json.dumps(warm, sort_keys=True, default=str) == json.dumps(cold, sort_keys=True, default=str)


def test_lower_bound_feature_maps_scale_with_the_batch():
    """Parameters plus the largest adjacent pair of feature maps: the maps part is batch times
    the per-sample pair, also when the second estimate reuses the first one's graph facts."""
    d = _mlp()
    r3, r5 = md.estimate(d, mode="inference", batch=3), md.estimate(d, mode="inference", batch=5)
    # x (8 floats) -> fc (4 floats): 48 B per sample; fc's 4x8 weight and 4 bias: 144 B
    assert r3.lower_bound_bytes == 3 * 48 + 144
    assert r5.lower_bound_bytes == 5 * 48 + 144


def test_a_graph_field_edited_in_place_is_seen_after_repeated_estimates():
    """``output`` set in place (no rev bump) after the design's analysis was kept: the model now
    also returns fc's value, so the kept analysis (and the graph structure on it) is not reused."""
    d = _mlp()
    d.add_node("ReLU", id="act")
    d.add_edge("fc", "act")
    kw = dict(mode="train", batch=2, optimizer="sgd")
    md.estimate(d, **kw)
    before = md.estimate(d, **kw)
    d.nodes["fc"].output = True
    after = md.estimate(d, **kw)

    def loss_moment(rep):
        return next(e.bytes for e in rep.timeline if e.label == "loss")
    # fc's value (2 x 4 fp32, which ReLU does not save) now stays alive as an output: 32 B, and a
    # second loss, out.mean() of it: one more fp32 scalar
    assert loss_moment(after) - loss_moment(before) == 32 + 4

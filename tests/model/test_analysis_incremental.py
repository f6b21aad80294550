"""analyze() after an edit re-infers only what the edit can have changed (model/analysis.py,
_Kept) and hands the engine's graph structure and the report's graph facts on to the next
analysis of the same graph (Analysis.graph_memo). Along random edit sequences (props through
Design and in place, nested values, types, trainable, tied parameters, graph fields, edges and
nodes removed and put back), every analysis must equal a full one from scratch, in place and
through the window's snapshots, and every estimate the estimate of a cold copy."""

import json
import random

import pytest

import memdesigner as md
from memdesigner.model import flat_analysis as analysis
from memdesigner.model.analysis import analyze


def _design() -> md.Design:
    """A small transformer-ish graph with a residual, a scope, a tied head, a Concat fed twice by
    one output and a Generic op without a rule."""
    d = md.Design()
    d.add_node("Input", {"shape": [16], "dtype": "int64", "vocab": 50}, id="tok")
    d.add_node("Embedding", {"num_embeddings": 50, "embedding_dim": 8}, id="emb")
    d.add_node("LayerNorm", {"normalized_shape": [8]}, id="ln")
    d.add_node("Linear", {"out_features": 8}, id="fc1", scope="blk")
    d.add_node("GELU", {}, id="act", scope="blk")
    d.add_node("Linear", {"out_features": 8}, id="fc2", scope="blk")
    d.add_node("Add", {}, id="res")
    d.add_node("Dropout", {"p": 0.1}, id="drop")
    d.add_node("Linear", {"out_features": 50, "bias": False}, id="head", tied={"weight": "emb.weight"})
    d.add_node("Concat", {"dim": -1}, id="cat")
    d.add_node("Generic", {"op": "foo", "out_shape": [16, 100]}, id="gen")
    for a, b in [("tok", "emb"), ("emb", "ln"), ("ln", "fc1"), ("fc1", "act"), ("act", "fc2"), ("res", "drop"),
                 ("drop", "head"), ("cat", "gen")]:
        d.add_edge(a, b)
    d.add_edge("fc2", "res", dst_port=0)
    d.add_edge("ln", "res", dst_port=1)
    d.add_edge("head", "cat", dst_port=0)
    d.add_edge("head", "cat", dst_port=1)
    return d


# (node, prop, values): valid ones, shape changes that break the residual or the Concat, invalid ones
PROPS = [
    ("fc1", "out_features", [8, 4, 12, 0]), ("fc2", "out_features", [8, 6]), ("emb", "embedding_dim", [8, 10]),
    ("head", "bias", [False, True]), ("drop", "p", [0.1, 0.2, 2.0]), ("act", "approximate", ["none", "tanh"]),
    ("tok", "shape", [[16], [12]]), ("ln", "normalized_shape", [[8], [10]]), ("cat", "dim", [-1, 0]),
    ("gen", "out_shape", [[16, 100], [16, 50]]), ("head", "out_features", [50, 60]),
]


def _edit(d: md.Design, rng: random.Random, gone: dict) -> None:
    kind = rng.randrange(11)
    nodes = d.nodes
    if kind <= 2:
        nid, key, values = rng.choice(PROPS)
        if nid not in nodes:
            return
        value = rng.choice(values)
        if kind == 0:
            d.set_prop(nid, key, list(value) if isinstance(value, list) else value)
        elif kind == 1:  # in place, behind Design's back (no rev bump)
            nodes[nid].props[key] = list(value) if isinstance(value, list) else value
        else:  # a nested value changed in place
            v = nodes[nid].props.get(key)
            if isinstance(v, list) and v:
                v[0] = rng.choice([8, 10, 12, 16])
    elif kind == 3:  # emb half the time: the tied head follows it
        n = nodes.get("emb") if rng.random() < 0.5 else None
        n = n or nodes[rng.choice(list(nodes))]
        n.trainable = not n.trainable
    elif kind == 4:
        n = nodes[rng.choice(list(nodes))]
        n.output = not n.output
    elif kind == 5 and "act" in nodes:
        nodes["act"].type = rng.choice(["GELU", "ReLU", "NoSuchLayer"])
    elif kind == 6 and "head" in nodes:
        nodes["head"].tied = {} if nodes["head"].tied else {"weight": "emb.weight"}
    elif kind == 7 and d.edges:
        e = rng.choice(d.edges)
        d.remove_edge(e)
        gone.setdefault("edges", []).append(e)
    elif kind == 8 and gone.get("edges"):
        e = gone["edges"].pop(rng.randrange(len(gone["edges"])))
        if e.src in nodes and e.dst in nodes:  # unchecked: two edges into one port leave a gap
            d.edges = [*d.edges, e]
    elif kind == 9:
        if gone.get("node"):
            idx, node, edges = gone.pop("node")
            d.insert_node(node, idx)
            d.edges = [*d.edges, *(e for e in edges if e.src in nodes and e.dst in nodes)]
        else:
            nid = rng.choice([n for n in nodes if n != "tok"])
            idx = d.node_index(nid)
            node, edges = d.remove_node(nid)
            gone["node"] = (idx, node, edges)
    else:
        n = nodes[rng.choice(list(nodes))]
        n.scope = "" if n.scope else "blk"


def _digest(an) -> str:
    nodes = {}
    for nid, i in an.nodes.items():
        iss = (i.issue.node_id, i.issue.field, i.issue.message, i.issue.pending) if i.issue else None
        nodes[nid] = [[(o.shape, o.kind) for o in i.outputs], [repr(p) for p in i.params], i.flops,
                      sorted(i.props.items(), key=str), iss, i.blocked_by]
    issues = [(i.node_id, i.field, i.message, i.pending, i.severity) for i in an.issues]
    return json.dumps([an.order, issues, nodes], default=str)


def _full(design: md.Design):
    """The analysis from scratch: nothing kept to start from, every node inferred."""
    an, _ = analysis._analyze(design, list(design.nodes), None)
    return an


SETTINGS = [dict(mode="inference", batch=2), dict(mode="train", batch=2, optimizer="adam")]


def _report(design, an, kw) -> str:
    return json.dumps(md.estimate(design, analysis=an, **kw).to_dict(), sort_keys=True, default=str)


@pytest.mark.parametrize("seed", range(6))
def test_incremental_analysis_equals_a_full_one_along_random_edits(seed):
    rng = random.Random(seed)
    d = _design()
    gone: dict = {}
    inc_steps = 0
    for step in range(60):
        _edit(d, rng, gone)
        full = _full(d)
        kept_before = d.__dict__.get("_analysis")
        inc = analyze(d)  # in place: starts from the analysis this design kept
        assert _digest(inc) == _digest(full), f"seed {seed} step {step}"
        snap = d.detached_copy()
        via_snapshot = analyze(snap)  # the window's path: starts from the last kept analysis
        assert _digest(via_snapshot) == _digest(full), f"seed {seed} step {step} (snapshot)"
        if kept_before:
            inc_steps += 1
        kw = SETTINGS[step % 2]
        cold = d.detached_copy()
        want = _report(cold, _full(cold), kw)
        assert md.estimate(d, **kw).to_dict() == json.loads(want), f"seed {seed} step {step}"
        assert _report(snap, via_snapshot, kw) == want, f"seed {seed} step {step} (snapshot)"
    assert inc_steps > 50  # the analyses really started from kept ones


def test_an_edit_reinfers_only_the_edited_node_and_what_its_change_reaches():
    """fc2's bias: its parameters change, its output does not, so nothing downstream is inferred
    again; emb's width: every node after it is."""
    d = _design()
    analyze(d)
    before = analyze(d)
    d.set_prop("fc2", "bias", False)
    after = analyze(d)
    redone = {n for n in after.order if after.nodes[n] is not before.nodes[n]}
    assert redone == {"fc2"}
    assert after.graph_memo is before.graph_memo  # the same graph: the engine's structure carries over
    d.set_prop("emb", "embedding_dim", 10)
    again = analyze(d)
    redone = {n for n in again.order if again.nodes[n] is not after.nodes[n]}
    assert redone == {"emb", "ln", "fc1", "act", "fc2", "res", "drop", "head", "cat", "gen"}
    assert again.graph_memo is not after.graph_memo  # ln's 8 != 10: ln and the nodes after it are blocked


def test_a_graph_field_edited_between_analysis_and_estimate_is_not_handed_on():
    """The structure an estimate builds from a design edited after its analysis (the output flag
    set in place) must not reach the next analyses of that graph, which read the flag unset."""
    d = _design()
    kw = dict(mode="train", batch=2, optimizer="sgd")
    an = analyze(d)
    d.nodes["fc1"].output = True
    md.estimate(d, analysis=an, **kw)
    d.nodes["fc1"].output = False
    snap = d.detached_copy()
    cold = d.detached_copy()
    assert _report(snap, analyze(snap), kw) == _report(cold, _full(cold), kw)


def test_freezing_the_owner_of_a_tied_parameter_freezes_it_in_the_next_analysis():
    """head.weight is emb.weight: freezing emb (only emb changes) freezes the head's weight too."""
    d = _design()
    analyze(d)
    analyze(d)
    d.nodes["emb"].trainable = False
    head = analyze(d).nodes["head"]
    assert [p.frozen for p in head.params] == [True]


def test_the_lower_bound_follows_an_edit_that_keeps_the_graph():
    """Parameters + the largest adjacent pair of feature maps: fc1's width 8 -> 64 makes x -> fc1
    (8 + 64 floats) the largest pair, also when the report's graph facts carry over (from a
    few re-inferred nodes of many: 16 ReLUs after fc2)."""
    d = md.Design()
    d.add_node("Input", {"shape": [8]}, id="x")
    d.add_node("Linear", {"out_features": 8}, id="fc1")
    d.add_node("Linear", {"out_features": 4}, id="fc2")
    d.add_edge("x", "fc1")
    d.add_edge("fc1", "fc2")
    for i in range(16):
        d.add_node("ReLU", id=f"r{i}")
        d.add_edge(f"r{i - 1}" if i else "fc2", f"r{i}")
    for _ in range(2):
        r = md.estimate(d, mode="inference", batch=1)
    assert r.lower_bound_bytes == (8 + 8) * 4 + (8 * 8 + 8 + 4 * 8 + 4) * 4
    d.set_prop("fc1", "out_features", 64)
    r = md.estimate(d, mode="inference", batch=1)
    assert r.lower_bound_bytes == (8 + 64) * 4 + (64 * 8 + 64 + 4 * 64 + 4) * 4

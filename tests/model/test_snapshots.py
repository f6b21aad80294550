"""The window's snapshots (model/snapshots.py) reuse the previous snapshot's node copies for the
nodes an edit left alone. Along random edit sequences (props through Design, in place and nested
in place, names, positions, bits, types, trainable, tied parameters, nodes added, deleted and put
back by undo, edges, settings) each snapshot must equal a fresh Design.detached_copy(), no
snapshot may change when the live design is edited afterwards, and each estimate of a snapshot
must equal the estimate of a cold copy."""

import copy
import json
import random

import pytest
from test_analysis_incremental import SETTINGS, _design, _full, _report

from memdesigner.model.analysis import analyze
from memdesigner.model.design import _NODE_FIELDS
from memdesigner.model.snapshots import Snapshots


def _fields(d) -> list:
    """Everything a snapshot holds, with value types (1, 1.0 and True differ), deep-copied."""
    def typed(v):
        if isinstance(v, dict):
            return ("dict", [(k, typed(x)) for k, x in v.items()])
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, [typed(x) for x in v])
        return (type(v).__name__, v)

    nodes = [(nid, [(f, typed(getattr(n, f))) for f in _NODE_FIELDS]) for nid, n in d.nodes.items()]
    return copy.deepcopy([d.name, d.channels_last, typed(d.settings), list(d.param_order), nodes, list(d.edges)])


def _edit(d, rng: random.Random, undo: list) -> None:
    nodes = d.nodes
    nid = rng.choice(list(nodes))
    n = nodes[nid]
    kind = rng.randrange(16)
    if kind == 0:
        d.set_prop(nid, "p", rng.choice([0.1, 0.2]))
    elif kind == 1:  # in place, no rev bump
        n.props["p"] = rng.choice([0.1, 0.3, 2, "x", None, [1]])
    elif kind == 2:  # a nested value changed in place
        lists = [v for v in n.props.values() if isinstance(v, list) and v]
        if lists:
            lists[0][0] = rng.choice([8, 10, 12, 16])
    elif kind == 3:
        d.set_props(nid, dict(n.props, extra=[rng.randrange(3)]))
    elif kind == 4:
        d.set_name(nid, rng.choice(["a", "b", nid]))
    elif kind == 5:
        d.move_node(nid, (rng.randrange(9), rng.randrange(9)))
    elif kind == 6:
        d.set_bits(nid, rng.choice([None, 4, 8]))
    elif kind == 7:
        d.set_trainable(nid, not n.trainable)
    elif kind == 8 and "act" in nodes:
        nodes["act"].type = rng.choice(["GELU", "ReLU", "NoSuchLayer"])
    elif kind == 9 and "head" in nodes:
        nodes["head"].tied = {} if nodes["head"].tied else {"weight": "emb.weight"}
    elif kind == 10 and nid != "tok" and len(nodes) > 4:  # delete a selection; undo puts the very node objects back
        undo.append(d.remove_nodes([nid, rng.choice(list(nodes))]))
    elif kind == 11 and undo:
        d.restore_nodes(*undo.pop())
    elif kind == 12 and "new" not in nodes:  # a new node, maybe under the id of a deleted one
        gone = [x for x in ("fc1", "act", "drop") if x not in nodes]
        d.add_node("ReLU", id=rng.choice(gone) if gone and rng.random() < 0.5 else "new")
        undo.clear()  # an undo entry's places are those before this node came
    elif kind == 13 and d.edges:
        d.remove_edge(rng.choice(d.edges))
        undo.clear()
    elif kind == 14:
        d.settings["batch"] = [rng.randrange(1, 4)]
    else:
        n.scope = "" if n.scope else "blk"


STEPS = 70


@pytest.mark.parametrize("seed", range(4))
def test_snapshots_reusing_unchanged_nodes_equal_fresh_copies_along_random_edits(seed):
    rng = random.Random(seed)
    d = _design()
    d.param_order = ["emb.weight"]
    snaps = Snapshots()
    taken = []  # (snapshot, what it held when taken)
    undo: list = []  # remove_nodes results, undone last first
    reused = total = 0
    for step in range(STEPS):
        _edit(d, rng, undo)
        snap = snaps.take(d)
        fresh = d.detached_copy()
        assert _fields(snap) == _fields(fresh), f"seed {seed} step {step}"
        reused += snaps.reused
        total += len(d.nodes)
        taken.append((snap, _fields(snap)))
        for old, held in taken[-6:] if step % 6 else taken:  # later edits changed no snapshot under the worker
            assert _fields(old) == held, f"seed {seed} step {step}"
        if step % 4 == 0:
            kw = SETTINGS[step % 8 // 4]
            cold = d.detached_copy()
            assert _report(snap, analyze(snap), kw) == _report(cold, _full(cold), kw), f"seed {seed} step {step}"
    assert reused >= total - 2 * STEPS  # an edit changes at most two nodes: the rest is reused


def test_a_snapshot_after_one_edit_copies_only_the_edited_node():
    d = _design()
    snaps = Snapshots()
    first = snaps.take(d)
    d.set_prop("fc1", "out_features", 4)
    second = snaps.take(d)
    assert [nid for nid in d.nodes if second.nodes[nid] is not first.nodes[nid]] == ["fc1"]
    assert snaps.reused == len(d.nodes) - 1
    assert second.nodes["fc1"].props["out_features"] == 4 and first.nodes["fc1"].props["out_features"] == 8
    d.nodes["tok"].props["shape"][0] = 12  # nested, in place: seen, and not shared with the snapshots
    third = snaps.take(d)
    assert [nid for nid in d.nodes if third.nodes[nid] is not second.nodes[nid]] == ["tok"]
    assert (first.nodes["tok"].props["shape"], third.nodes["tok"].props["shape"]) == ([16], [12])
    assert json.dumps(_fields(third), default=str) == json.dumps(_fields(d.detached_copy()), default=str)


def test_the_window_estimate_reuses_the_last_snapshots_nodes(qtbot):
    """Two live estimates with one edit between: the second snapshot holds the first's copies of
    every node but the edited one (the worker copies one node, not 11)."""
    from memdesigner._qt.jobs.estimator import EstimateService
    from memdesigner.engine.settings import Settings

    d = _design()
    svc = EstimateService(lambda: (d, Settings(mode="inference", batch=2), None))
    one = svc.run_sync(sweep_too=False)
    d.set_prop("drop", "p", 0.2)
    svc.schedule()
    two = svc.run_sync(sweep_too=False)
    assert [nid for nid in d.nodes if two.design.nodes[nid] is not one.design.nodes[nid]] == ["drop"]
    assert two.design.nodes["drop"].props["p"] == 0.2 and one.design.nodes["drop"].props["p"] == 0.1
    svc.shutdown()

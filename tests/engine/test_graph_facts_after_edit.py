"""The report's graph facts after an edit that resizes layers are updated from the previous
analysis' (engine/graph_facts.py: each edge's sum of its two ends' bytes kept), not counted
again, and say what a count says, by hand: x (64) -> fc1 Linear 256 -> act ReLU -> fc2 Linear 8,
(-> 30 ReLUs), fp32, batch 32. Before: the largest adjacent pair is fc1+act, 1,024 + 1,024 B per sample; after
fc1 -> 16 features it shrinks, and x+fc1 (256 + 64 B) is the largest."""

from helpers import mlp

import memdesigner as md
from memdesigner.engine import graph_facts
from memdesigner.io.design_file import copy_design
from memdesigner.model.analysis import analyze
from memdesigner.model.snapshots import Snapshots

B = 32
KW = dict(mode="train", batch=B, optimizer="adam")


def _mlp() -> md.Design:
    return mlp(30)  # 32 B each: their pairs stay small; a few re-inferred nodes of many


def _est(snap):
    return md.estimate(snap, analysis=analyze(snap), **KW)


def test_a_resize_updates_the_largest_pair_without_counting_again(monkeypatch):
    d = _mlp()
    take = Snapshots().take
    first = _est(take(d))
    assert first.lower_bound_bytes == B * 2048 + (64 * 256 + 256 + 256 * 8 + 8) * 4
    counts = []
    count = graph_facts._count
    monkeypatch.setattr(graph_facts, "_count", lambda *a: counts.append(1) or count(*a))
    d.set_prop("fc1", "out_features", 16)
    rep = _est(take(d))
    assert counts == []
    # x+fc1 = 256 + 64 B per sample; fc1 1,040 params, fc2 136: 1,176 * 4 B
    assert rep.lower_bound_bytes == B * 320 + 1176 * 4 == 14944
    assert rep.flops == md.estimate(copy_design(d), **KW).flops
    d.set_prop("fc1", "out_features", 512)  # grows again: fc1+act = 2,048 + 2,048 B
    assert _est(take(d)).lower_bound_bytes == B * 4096 + (64 * 512 + 512 + 512 * 8 + 8) * 4
    assert counts == []

"""estimate() hands back its report without leaving a young collection due: the collector was
paused while it ran, and on the way out what it made moves to the oldest generation (its
report's events and rows are not garbage, and walking them cost 5 ms of a 10,000-op estimate)."""

import gc

import memdesigner as md
from memdesigner.engine.gc_pause import gc_paused
from memdesigner.model.design import Design


def _design() -> Design:
    d = Design("chain")
    d.add_node("Input", {"shape": (8,)}, id="in")
    prev = "in"
    for i in range(300):
        prev_ = d.add_node("Linear", {"out_features": 8}, id=f"l{i}").id
        d.add_edge(prev, prev_)
        prev = prev_
    return d


def test_no_young_collection_runs_when_an_estimate_returns():
    d = _design()
    md.estimate(d, mode="train", batch=2, optimizer="adam")  # (the rule caches filled)
    seen = []

    def note(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.collect()
    gc.callbacks.append(note)
    try:
        assert gc.isenabled()
        rep = md.estimate(d, mode="train", batch=2, optimizer="adam")
    finally:
        gc.callbacks.remove(note)
    assert len(rep.timeline) > 600
    # without the promotion the first allocation after the pause collects (walks the report)
    assert seen == []
    assert gc.get_count()[0] < gc.get_threshold()[0]


def test_someone_elses_frozen_objects_stay_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_paused(promote=True):
            junk = [[i] for i in range(5000)]
        assert gc.get_freeze_count() == frozen
        assert gc.isenabled()
        del junk
    finally:
        gc.unfreeze()

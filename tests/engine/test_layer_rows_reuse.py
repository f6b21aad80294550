"""The report's layer rows after an edit reuse the previous estimate's row objects for the layers
the edit did not touch (engine/layer_rows.py), and give the edited layers' new values, by hand:
x (64 features) -> fc1 Linear 256 -> ReLU -> fc2 Linear 8, batch 32."""

from helpers import mlp

import memdesigner as md
from memdesigner.io.design_file import copy_design
from memdesigner.model.analysis import analyze
from memdesigner.model.snapshots import Snapshots

B = 32
KW = dict(mode="train", batch=B, optimizer="adam")


def _rows(snap):
    return md.estimate(snap, analysis=analyze(snap), **KW).layers


def test_an_edit_rebuilds_only_the_rows_it_touches():
    d = mlp()
    take = Snapshots().take
    first = _rows(take(d))
    d.set_prop("fc2", "out_features", 10)  # fc2: 256*10 + 10 = 2,570 params, 10,280 B; 32*10*4 = 1,280 B out
    second = _rows(take(d))
    assert [r.id for r in second] == ["x", "fc1", "act", "fc2"]
    assert second[0] is first[0] and second[1] is first[1] and second[2] is first[2]
    fc2 = second[3]
    assert fc2 is not first[3]
    assert (fc2.params, fc2.param_bytes, fc2.activation_bytes, fc2.output_shape) == (2570, 10280, 1280, [B, 10])
    assert (first[3].params, first[3].output_shape) == (2056, [B, 8])  # the earlier report's row as it was


def test_a_rename_in_place_and_another_batch_give_new_rows():
    d = mlp()
    take = Snapshots().take
    first = _rows(take(d))
    d.nodes["act"].name = "relu_renamed"  # behind Design's back: seen by content
    second = _rows(take(d))
    assert second[2].name == "relu_renamed" and second[2] is not first[2]
    assert second[1] is first[1]
    snap = take(d)
    other = md.estimate(snap, analysis=analyze(snap), mode="train", batch=2, optimizer="adam").layers
    assert other[1].output_shape == [2, 256] and other[1].activation_bytes == 2 * 256 * 4
    assert other[1].flops == first[1].flops // B * 2


def test_rows_equal_those_of_a_fresh_design():
    """Reused rows read as a fresh estimate's (the same design analysed from scratch)."""
    d = mlp()
    take = Snapshots().take
    _rows(take(d))
    d.set_prop("fc1", "out_features", 128)
    got = [r.to_dict() for r in _rows(take(d))]
    fresh = [r.to_dict() for r in md.estimate(copy_design(d), **KW).layers]
    assert got == fresh
    assert got[1]["params"] == 64 * 128 + 128 and got[3]["params"] == 128 * 8 + 8

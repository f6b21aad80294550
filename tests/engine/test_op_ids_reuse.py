"""After an edit of one layer, the rule cache's op numbers (engine/compiled_rule.py op_ids) of the
ops whose NodeInfo and type are as they were are the previous estimate's, not looked up again:
one lookup for the edited Linear of a 40-op chain, not 40, and the estimate is a fresh one's."""

from helpers import linear_chain

import memdesigner as md
from memdesigner.engine import compiled_rule
from memdesigner.io.design_file import copy_design
from memdesigner.model.analysis import analyze
from memdesigner.model.snapshots import Snapshots

N = 40
KW = dict(mode="train", batch=4, optimizer="adam")


class _Counted(dict):
    def __init__(self, *a):
        super().__init__(*a)
        self.lookups = 0

    def get(self, key, default=None):
        self.lookups += 1
        return super().get(key, default)


def test_an_edit_looks_up_only_the_edited_ops_number(monkeypatch):
    d = linear_chain(N)
    take = Snapshots().take
    snap = take(d)
    md.estimate(snap, analysis=analyze(snap), **KW)
    d.set_prop("fc20", "bias", False)  # new parameters for fc20 alone: 8*8 = 64 weights, no bias
    counted = _Counted(compiled_rule._OP_IDS)
    monkeypatch.setattr(compiled_rule, "_OP_IDS", counted)
    snap = take(d)
    rep = md.estimate(snap, analysis=analyze(snap), **KW)
    assert counted.lookups == 1
    assert rep.params == (N - 1) * 72 - 8
    assert rep.to_dict() == md.estimate(copy_design(d), **KW).to_dict()

"""Analysing the window's next snapshot reads only the nodes that are not the very copies the last
analysis read (model/snapshots.py shares the unchanged ones; nobody edits them): an edit of one
node of 40 reads one node's fields, not 40; a design that is not a snapshot is compared in full."""

from helpers import linear_chain

from memdesigner.model import flat_analysis as analysis
from memdesigner.model.analysis import analyze
from memdesigner.model.snapshots import Snapshots

N = 40


def _counting(monkeypatch) -> list:
    reads = []
    key = analysis._KEY

    def counted(node):
        reads.append(node)
        return key(node)

    monkeypatch.setattr(analysis, "_KEY", counted)
    return reads


def test_the_next_snapshot_reads_only_the_edited_node(monkeypatch):
    d = linear_chain(N)
    take = Snapshots().take
    analyze(take(d))
    d.set_prop("fc20", "out_features", 4)  # fc20: 8*4 + 4 = 36 params; fc21 reads 4 features: 4*8 + 8 = 40
    reads = _counting(monkeypatch)
    snap = take(d)
    an = analyze(snap)
    assert len(reads) <= 2 and reads[0] is snap.nodes["fc20"]
    assert an.nodes["fc20"].n_params == 36 and an.nodes["fc21"].n_params == 40
    assert an.nodes["fc19"].n_params == 72 and an.nodes["fc22"].n_params == 72


def test_a_live_design_is_compared_node_by_node(monkeypatch):
    """Its nodes may be edited in place: every one is read again (and the edit is seen)."""
    d = linear_chain(N)
    analyze(d)
    analyze(d)  # (the design keeps its analysis from the second one on)
    d.nodes["fc20"].props["out_features"] = 4  # in place, behind Design's back
    reads = _counting(monkeypatch)
    an = analyze(d)
    assert len(reads) >= N
    assert an.nodes["fc20"].n_params == 36 and an.nodes["fc21"].n_params == 40

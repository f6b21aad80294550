"""The analyses kept for the next analysis to start from (model/analysis.py _RECENT) are bounded by
count and by nodes in all: after designs of 25,000, 25,000 and 20,000 nodes only the newest two
are kept (45,000 nodes; all three would be 70,000 > 60,000); the newest is kept whatever its size."""

from types import SimpleNamespace

from memdesigner.model import flat_analysis as analysis


def _kept(tag: str, n: int):
    return SimpleNamespace(ids=[f"{tag}{i}" for i in range(n)])


def test_the_kept_analyses_are_bounded_by_their_nodes(monkeypatch):
    monkeypatch.setattr(analysis, "_RECENT", [])
    a, b, c = _kept("a", 25000), _kept("b", 25000), _kept("c", 20000)
    for k in (a, b, c):
        analysis._remember(k)
    assert analysis._RECENT == [c, b]
    huge = _kept("h", 70000)
    analysis._remember(huge)
    assert analysis._RECENT == [huge]
    small = [_kept(t, 10) for t in "pqrstu"]
    for k in small:
        analysis._remember(k)
    assert analysis._RECENT == small[::-1][:4]  # (and at most 4)

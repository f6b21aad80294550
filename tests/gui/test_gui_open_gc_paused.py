"""A big file is read on the worker with the cyclic collector paused: the objects parsing makes
triggered full collections there that held the GIL ~60 ms at 1,000 layers (the window stalled)."""

import gc

from gui_helpers import small_cnn

from memdesigner._qt.jobs import open_file
from memdesigner.io.design_file import save_design


def test_reading_runs_with_the_collector_paused_and_restores_it(tmp_path, monkeypatch):
    path = tmp_path / "cnn.json"
    save_design(small_cnn(), path)
    seen = []
    real = open_file.load_design
    monkeypatch.setattr(open_file, "load_design", lambda p: (seen.append(gc.isenabled()), real(p))[1])
    assert gc.isenabled()
    d = open_file.read_placed(str(path), "bands")
    assert seen == [False]
    assert gc.isenabled()
    assert len(d.nodes) == len(small_cnn().nodes)


def test_what_reading_made_is_not_left_to_a_young_collection(tmp_path):
    """The paused collector still counts allocations: without the move to the oldest generation
    the first allocation after reading started a young collection that walked the whole design
    (and left it in the middle generation, for the next one to walk again)."""
    from test_gui_big_graphs import chain

    path = tmp_path / "big.json"
    save_design(chain(600), path)
    gc.collect()
    d = open_file.read_placed(str(path), "bands")
    node = d.nodes["fc300"]
    assert any(o is node for o in gc.get_objects(generation=2))  # in the oldest at once
    assert gc.get_freeze_count() == 0  # nothing left frozen: full collections still see it all


def test_an_estimate_leaves_its_report_in_the_oldest_generation(window, qtbot):
    """The worker's estimate runs with the collector paused; what it keeps (the report, the
    timeline's figure) is moved to the oldest generation, not left to the next young collection,
    which ran on whichever thread allocated first — often the UI thread, 50 ms at 10,000 layers."""
    from test_gui_big_graphs import chain

    from memdesigner._qt.jobs import estimator

    req = estimator.EstimateRequest(1, chain(200), window.settings_bar.settings(), None, fresh=True)
    gc.collect()
    res = estimator.compute(req)
    assert res.error is None
    assert any(o is res.report for o in gc.get_objects(generation=2))
    assert gc.get_freeze_count() == 0 and gc.isenabled()

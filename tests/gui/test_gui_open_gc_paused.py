"""A big file is read on the worker with the cyclic collector paused: the objects parsing makes
triggered full collections there that held the GIL ~60 ms at 1,000 layers (the window stalled)."""

import gc

from gui_helpers import small_cnn

from memdesigner._qt import open_file
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

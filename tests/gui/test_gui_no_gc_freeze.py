"""Opening a design must not gc.freeze(): frozen objects are never collected, so every File ->
Open kept the previous design and its canvas items alive (~86 MB per 1,000 opens)."""

import gc
import weakref

from gui_helpers import small_cnn

from memdesigner.io.design_file import save_design


def test_open_does_not_freeze_and_old_design_is_collected(window, qtbot, tmp_path, monkeypatch):
    def refuse():
        raise AssertionError("gc.freeze() called on design load")

    monkeypatch.setattr(gc, "freeze", refuse)
    path = tmp_path / "cnn.json"
    save_design(small_cnn(), path)
    assert window.open_path(str(path), remember=False)
    first = weakref.ref(window.design)
    assert window.open_path(str(path), remember=False)
    qtbot.wait(50)
    gc.collect()
    assert first() is None

"""Opening a design must not leave objects frozen (gc.freeze): frozen objects are never collected,
so every File -> Open kept the previous design and its canvas items alive (~86 MB per 1,000
opens). (A freeze undone at once, to move what paused work made to the oldest generation, is
fine: engine.gc_pause.promote_survivors.)"""

import gc
import weakref

from gui_helpers import small_cnn

from memdesigner.io.design_file import save_design


def test_open_does_not_freeze_and_old_design_is_collected(window, qtbot, tmp_path):
    path = tmp_path / "cnn.json"
    save_design(small_cnn(), path)
    assert window.open_path(str(path), remember=False)
    first = weakref.ref(window.design)
    assert window.open_path(str(path), remember=False)
    qtbot.wait(50)
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert first() is None

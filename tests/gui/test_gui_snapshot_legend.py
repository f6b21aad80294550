"""The snapshot legend names the same peaks as the status line (the replay's allocated = tensor
bytes and reserved = device bytes, each labelled); it showed the aligned step's peak beside the
status line's whole-snapshot one. A snapshot belongs to its design: File -> New (Ctrl+N) and
opening another design clear the overlay (it stayed over the next design's timeline)."""

from gui_helpers import load, small_cnn
from helpers import ROOT
from PySide6.QtCore import Qt

from memdesigner._qt.memory import snapshot_view
from memdesigner.io.design_file import load_design
from memdesigner.units import format_bytes

FIX = ROOT / "tests" / "fixtures" / "snapshots"


def _open(window, qtbot, name="mlp_two_steps.pickle"):
    snapshot_view.load(window, str(FIX / name))
    qtbot.waitUntil(lambda: window.timeline.overlay is not None, timeout=10000)


def _file_menu(window, qtbot, action):
    """File menu opened with a click on the menu bar, the entry chosen with Down and Return."""
    mb = window.menuBar()
    file = next(a for a in mb.actions() if a.text() == "&File")
    qtbot.mouseClick(mb, Qt.LeftButton, pos=mb.actionGeometry(file).center())
    menu = file.menu()
    qtbot.waitUntil(menu.isVisible, timeout=5000)
    for _ in menu.actions():
        if menu.activeAction() is action:
            break
        qtbot.keyClick(menu, Qt.Key_Down)
    assert menu.activeAction() is action
    qtbot.keyClick(menu, Qt.Key_Return)


def test_legend_and_status_line_name_the_same_peaks(window, qtbot):
    load(window, qtbot, load_design(FIX / "mlp.json"))
    _open(window, qtbot)
    rp = window.timeline.snapshot
    status, legend = window.statusBar().currentMessage(), window.legend.text()
    want = (f"peak allocated {format_bytes(rp.peak_allocated, 2)} (tensors), reserved "
            f"{format_bytes(rp.peak_reserved, 2)} (device)")
    assert want in status and want in legend
    assert rp.peak_allocated == 10_847_744 and rp.peak_reserved == 22 << 20  # (tests/test_snapshot.py)


def test_new_design_clears_the_overlay(window, qtbot):
    load(window, qtbot, load_design(FIX / "mlp.json"))
    _open(window, qtbot)
    assert window.act_clear_snapshot.isEnabled()
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        _file_menu(window, qtbot, window.act_new)
    tl = window.timeline
    assert tl.snapshot is None and tl.overlay is None and not tl._snap_alloc.isVisible()
    assert "snapshot" not in window.legend.text() and not window.act_clear_snapshot.isEnabled()
    assert window.statusBar().currentMessage() == "Memory snapshot closed: it was of the previous design"


def test_opening_another_design_clears_the_overlay(window, qtbot):
    load(window, qtbot, load_design(FIX / "mlp.json"))
    _open(window, qtbot)
    load(window, qtbot, small_cnn())
    assert window.timeline.snapshot is None and "snapshot" not in window.legend.text()

"""Issue 22, hostile resources: the autosave file swapped for a link is replaced, never followed
(the file it points at stays as it was); a folder in its place, or a full disk, is one line in
the status bar and no crash; a save or an export on a full disk keeps the old file and says so
in one line."""

import errno
import os

import pytest
from gui_helpers import autosave_landed, load, small_cnn
from PySide6.QtWidgets import QMessageBox

from memdesigner._qt.document import recovery
from memdesigner._qt.document.commands import SetPropCmd
from memdesigner.io import atomic_write

VICTIM = b"someone else's file, which the autosave must never overwrite\n"


def _edit(window, value=24):
    window.stack.push(SetPropCmd(window.design, "conv", "out_channels", value))


def _recovered_channels(slot) -> int:
    d = recovery.load(recovery.Recoverable(slot.file, None, 0.0, ""))
    return d.nodes["conv"].props["out_channels"]


def _swap_for_link(slot, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    slot.file.unlink()
    slot.file.symlink_to(victim)
    return victim


@pytest.mark.parametrize("on_worker", [False, True])
def test_an_autosave_swapped_for_a_link_is_replaced_not_followed(window, qtbot, tmp_path, on_worker):
    load(window, qtbot, small_cnn())
    _edit(window, 24)
    assert window.document.autosave()
    slot = window.document.slot
    victim = _swap_for_link(slot, tmp_path)
    _edit(window, 40)
    if on_worker:
        assert window.document._autosave_on_worker()
        autosave_landed(window, qtbot)
    else:
        assert window.document.autosave()
    assert victim.read_bytes() == VICTIM
    assert not slot.file.is_symlink() and slot.file.is_file()
    assert _recovered_channels(slot) == 40


def test_a_journal_name_taken_by_a_link_is_refused(window, qtbot, tmp_path):
    load(window, qtbot, small_cnn())
    _edit(window, 24)
    assert window.document.autosave()
    slot = window.document.slot
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    nxt = slot.file.with_name(f"{slot.file.stem}.{slot._gen + 1}.journal")
    nxt.symlink_to(victim)
    _edit(window, 40)
    window.document.autosave()  # opening the next journal through the link fails: no write
    assert victim.read_bytes() == VICTIM


@pytest.mark.parametrize("on_worker", [False, True])
def test_a_folder_where_the_autosave_goes_is_one_status_line(window, qtbot, on_worker):
    load(window, qtbot, small_cnn())
    _edit(window, 24)
    assert window.document.autosave()
    slot = window.document.slot
    slot.file.unlink()
    slot.file.mkdir()
    _edit(window, 40)
    with qtbot.waitSignal(window.document.problem, timeout=10000) as said:
        if on_worker:
            window.document._autosave_on_worker()
        else:
            assert not window.document.autosave()
    autosave_landed(window, qtbot)
    (line,) = said.args
    assert line == f"Autosave failed: {slot.file}: cannot write: Is a directory"
    assert window.statusBar().currentMessage() == line
    assert slot.file.is_dir() and not list(slot.file.parent.glob(".*.tmp"))


def _fill_the_disk(monkeypatch):
    def chunk(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic_write, "_write_chunk", chunk)


def _warnings(monkeypatch) -> list:
    said = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: said.append((title, text)))
    return said


def test_save_on_a_full_disk_keeps_the_old_file_and_says_so_in_one_line(window, qtbot, tmp_path, monkeypatch):
    load(window, qtbot, small_cnn())
    path = tmp_path / "d.json"
    assert window.save_to(str(path))
    before = path.read_bytes()
    _edit(window, 40)
    said = _warnings(monkeypatch)
    _fill_the_disk(monkeypatch)
    assert window.save_to(str(path)) is False
    assert path.read_bytes() == before
    assert said == [("Cannot save", f"{path}: cannot write: No space left on device")]
    assert window.document.dirty


@pytest.mark.parametrize("kind,name", [("canvas_png", "c.png"), ("canvas_svg", "c.svg"),
                                       ("timeline_png", "t.png"), ("table_csv", "t.csv")])
def test_export_on_a_full_disk_keeps_the_old_file(window, qtbot, tmp_path, monkeypatch, kind, name):
    from memdesigner._qt.dialogs import exports

    if kind == "canvas_svg" and not exports.svg_available():
        pytest.skip("no QtSvg in this PySide6")
    load(window, qtbot, small_cnn())
    path = tmp_path / name
    assert window.export(kind, str(path))
    before = path.read_bytes()
    assert len(before) > 100
    said = _warnings(monkeypatch)
    _fill_the_disk(monkeypatch)
    assert window.export(kind, str(path)) is None
    assert path.read_bytes() == before
    assert said == [("Export failed", f"{path}: cannot write: No space left on device")]
    assert sorted(os.listdir(tmp_path)) == [name]

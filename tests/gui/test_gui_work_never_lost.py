"""Issue 10 §3: crash recovery keeps every edit and never deletes or resurrects the wrong work.
One test per bug that was reproduced with kill -9; a crash is simulated by moving a window's
autosave to a name no running instance holds (as a dead instance leaves it)."""

import json
import os
from pathlib import Path

import pytest
from gui_helpers import load, small_cnn
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from memdesigner._qt.document import recent, recovery
from memdesigner.io.design_file import save_design


@pytest.fixture(autouse=True)
def _quick_autosave(monkeypatch):
    monkeypatch.setenv("MEMDESIGNER_AUTOSAVE_MS", "40")
    yield
    from memdesigner._qt.document import recovery_prompt

    for w in list(recovery_prompt._windows):  # windows opened beside the test's own
        w.stack.setClean()
        w.close()
        w.deleteLater()
    recovery_prompt._windows.clear()


def _autosaved(window) -> dict | None:
    f = window.document.slot.file
    return json.loads(f.read_text()) if f.exists() else None


def _wait_autosave(window, qtbot, check):
    qtbot.waitUntil(lambda: (a := _autosaved(window)) is not None and check(a), timeout=3000)


def _crash(window) -> Path:
    """Leave the window's autosave behind as a dead instance would (no lock holds it)."""
    assert window.autosave()
    dead = window.document.slot.file.with_name("autosave-99999-dead.json")
    os.replace(window.document.slot.file, dead)
    window.stack.setClean()
    return dead


def _batch_by_typing(window, qtbot, n: int):
    box = window.settings_bar.batch
    box.lineEdit().selectAll()
    qtbot.keyClicks(box.lineEdit(), str(n))
    qtbot.keyClick(box.lineEdit(), Qt.Key_Return)
    assert box.value() == n


def test_every_settings_change_is_autosaved(window, qtbot):
    """Run-setting changes after the first were never autosaved."""
    load(window, qtbot, small_cnn())
    _batch_by_typing(window, qtbot, 8)
    _wait_autosave(window, qtbot, lambda a: a["design"]["settings"]["batch"] == 8)
    _batch_by_typing(window, qtbot, 16)
    _wait_autosave(window, qtbot, lambda a: a["design"]["settings"]["batch"] == 16)
    mode = window.settings_bar.mode
    mode.setCurrentIndex(mode.findData("train"))
    _wait_autosave(window, qtbot, lambda a: a["design"]["settings"]["mode"] == "train")


def test_edit_after_undo_at_the_same_depth_is_autosaved(window, qtbot):
    """The autosave keyed on the undo index: undo + a new edit looked like no change."""
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    window.inspector.commit("out_features", 77)
    _wait_autosave(window, qtbot, lambda a: a["design"]["nodes"][4]["props"]["out_features"] == 77)
    window.stack.undo()
    window.inspector.commit("out_features", 55)
    assert window.stack.index() == 1
    _wait_autosave(window, qtbot, lambda a: a["design"]["nodes"][4]["props"]["out_features"] == 55)


def test_untitled_recovery_keeps_the_run_settings(window, qtbot):
    load(window, qtbot, small_cnn())
    window.settings_bar.apply_dict({"mode": "train", "batch": 12, "optimizer": "sgd"})
    _crash(window)
    window.set_design(type(window.design)(), None)  # an empty window, as at start
    window.settings_bar.apply_dict({"mode": "inference", "batch": 1})
    window.stack.setClean()
    assert window.offer_recovery(ask=lambda rec: "recover") == 1
    s = window.settings_bar.settings()
    assert (s.mode, s.batch, s.optimizer) == ("train", 12, "sgd")
    assert window.dirty and window.path is None


def test_each_crashed_autosave_is_offered_and_only_the_chosen_one_goes(window, qtbot, tmp_path):
    """Recovering one instance deleted another instance's autosave without offering it."""
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    window.inspector.commit("out_features", 31)
    first = _crash(window)
    window.inspector.commit("out_features", 32)
    second = window.document.slot.file.with_name("autosave-99998-dead.json")
    assert window.autosave()
    os.replace(window.document.slot.file, second)
    window.stack.setClean()
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.set_design(small_cnn(), None, layout=False)
    offered = []
    assert window.offer_recovery(ask=lambda rec: offered.append(rec.file) or "later") == 0
    assert sorted(offered) == sorted([first, second]) and first.exists() and second.exists()
    offered.clear()
    window.set_design(type(window.design)(), None)
    n = window.offer_recovery(ask=lambda rec: (offered.append(rec.file), "recover" if rec.file == first
                                               else "later")[1])
    assert n == 1 and len(offered) == 2
    assert window.design.nodes["fc"].props["out_features"] == 31
    assert not first.exists() and second.exists()  # the other instance's work is still there
    assert [r.file for r in recovery.find_and_release()] == [second]


def test_no_recovery_after_a_clean_save_and_it_follows_save_as(window, qtbot, tmp_path):
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    window.inspector.commit("out_features", 40)
    _wait_autosave(window, qtbot, lambda a: True)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert window.save_to(str(a))
    qtbot.wait(150)  # past the autosave delay: nothing is written for a clean document
    assert _autosaved(window) is None
    window.inspector.commit("out_features", 41)
    _wait_autosave(window, qtbot, lambda x: x["path"] == str(a))
    assert window.save_to(str(b))  # Save As
    assert _autosaved(window) is None
    window.inspector.commit("out_features", 42)
    _wait_autosave(window, qtbot, lambda x: x["path"] == str(b))


def test_discarded_work_is_not_offered_back(window, qtbot, monkeypatch):
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    window.inspector.commit("out_features", 66)
    _wait_autosave(window, qtbot, lambda a: True)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Discard)
    window.new_design()  # Don't Save
    assert _autosaved(window) is None
    qtbot.wait(150)
    assert _autosaved(window) is None and recovery.find_and_release() == []


def test_discarding_in_the_prompt_deletes_that_autosave(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    window.inspector.commit("out_features", 3)
    dead = _crash(window)
    assert window.offer_recovery(ask=lambda rec: "discard") == 0
    assert not dead.exists()
    assert window.offer_recovery(ask=lambda rec: pytest.fail("offered again")) == 0


def test_a_running_instance_autosave_is_not_offered(window, qtbot):
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    window.inspector.commit("out_features", 9)
    assert window.autosave() and window.document.slot.file.exists()
    assert recovery.find_and_release() == []


def test_command_line_file_opens_after_recovery(window, qtbot, tmp_path):
    from memdesigner._qt.app import start
    from memdesigner._qt.document import recovery_prompt

    load(window, qtbot, small_cnn())
    window.select_node("fc")
    window.inspector.commit("out_features", 23)
    _crash(window)
    window.set_design(type(window.design)(), None)
    named = small_cnn()
    named.nodes["fc"].props["out_features"] = 5
    path = tmp_path / "named.json"
    save_design(named, path)
    start(window, str(path), ask=lambda rec: "recover")
    assert window.design.nodes["fc"].props["out_features"] == 23  # recovered here
    [other] = recovery_prompt._windows
    try:
        assert other.path == str(path) and other.design.nodes["fc"].props["out_features"] == 5
    finally:
        other.close()
        other.deleteLater()
    start(window, None, ask=lambda rec: pytest.fail("nothing left to offer"))


def test_recent_files_are_absolute_and_distinct(window, qtbot, tmp_path, monkeypatch):
    """Recent files stored the path as typed (relative) and opened another folder's file."""
    for sub, width in (("a", 11), ("b", 22)):
        (tmp_path / sub).mkdir()
        d = small_cnn()
        d.nodes["fc"].props["out_features"] = width
        save_design(d, tmp_path / sub / "net.json")
    monkeypatch.chdir(tmp_path / "a")
    assert window.open_path("net.json")
    monkeypatch.chdir(tmp_path / "b")
    assert window.open_path("net.json")
    assert window.open_path(str(tmp_path / "a" / ".." / "b" / "net.json"))  # same file, other spelling
    assert recent.entries() == [str(tmp_path / "b" / "net.json"), str(tmp_path / "a" / "net.json")]
    labels = [a.text() for a in window.recent_menu.actions()]
    assert labels == [f"net.json — {tmp_path / 'b'}", f"net.json — {tmp_path / 'a'}"]
    monkeypatch.chdir(tmp_path)
    window.recent_menu.actions()[1].trigger()
    assert window.design.nodes["fc"].props["out_features"] == 11
    (tmp_path / "b" / "net.json").unlink()
    assert recent.entries() == [str(tmp_path / "a" / "net.json")]  # a missing file is dropped


def test_undo_after_a_settings_change_undoes_that_change(window, qtbot):
    """Ctrl+Z after a run-setting change undid an earlier graph edit."""
    load(window, qtbot, small_cnn())
    window.select_node("fc")
    window.inspector.commit("out_features", 50)
    window.stack.setClean()
    _batch_by_typing(window, qtbot, 24)
    assert window.dirty and window.isWindowModified()  # a settings change is a change to the document
    window.activateWindow()
    window.view.setFocus()
    qtbot.keyClick(window.view, Qt.Key_Z, Qt.ControlModifier)
    assert window.settings_bar.batch.value() == 1 and window.settings_bar.settings().batch == 1
    assert window.design.nodes["fc"].props["out_features"] == 50  # the graph edit stays
    assert not window.dirty
    redo = window.act_redo.shortcut()
    qtbot.keyClick(window.view, redo[0].key(), redo[0].keyboardModifiers())
    assert window.settings_bar.settings().batch == 24

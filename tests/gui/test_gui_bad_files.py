"""File -> Open with broken files (from benchmarks/fuzz_designs.py): one message of one line each,
and the open document stays as it was."""

import sys
from pathlib import Path

from gui_helpers import load, small_cnn
from PySide6.QtWidgets import QMessageBox

from memdesigner.io.design_file import DesignFileError, design_to_dict, load_design

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import fuzz_designs  # noqa: E402


def _bad_files(tmp_path, n=6):
    out = []
    for i, (what, data) in enumerate(fuzz_designs.mutants(400, seed=3)):
        p = tmp_path / f"bad{i}.json"
        p.write_bytes(data)
        try:
            load_design(p)
        except DesignFileError:
            out.append((what, p))
        if len(out) == n:
            break
    p = tmp_path / "deep.json"
    p.write_bytes(b'{"format": "memdesigner-design", "nodes": ' + b"[" * 50_000 + b"]" * 50_000 + b"}")
    out.append(("deep nesting", p))
    p = tmp_path / "latin1.json"
    p.write_bytes('{"format": "memdesigner-design", "name": "caf\xe9"}'.encode("latin-1"))
    out.append(("latin-1", p))
    return out


def test_open_bad_files_one_message_document_untouched(window, qtbot, tmp_path, monkeypatch):
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    window.inspector.commit("out_channels", 24)
    before = design_to_dict(window.design)
    design, path, undo = window.design, window.path, window.stack.count()
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text, *a: shown.append((title, text)))
    files = _bad_files(tmp_path)
    for what, p in files:
        n = len(shown)
        if window.open_path(str(p)):  # a big file (the 100 KB nesting) is read on the worker
            qtbot.waitUntil(lambda: not window.open_task.running, timeout=20000)
            assert window.open_task.outcome == "failed", what
        assert len(shown) == n + 1, what
        title, text = shown[-1]
        assert title == "Cannot open design"
        assert "\n" not in text and str(p) in text, (what, text)
    assert len(shown) == len(files) == 8
    assert window.design is design and window.path == path and window.stack.count() == undo
    assert design_to_dict(window.design) == before


def test_open_a_file_with_an_absurd_position_is_one_message(window, qtbot, tmp_path, monkeypatch):
    """A node at x = 1e308 (or a 400-digit integer) loaded fine and then raised OverflowError in
    the canvas (2 of the first 300 fuzz mutants): the loader names the field now."""
    import json

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text, *a: shown.append(text))
    for bad in ("1e308", "9" * 400):
        p = tmp_path / "far.json"
        p.write_text(json.dumps(design_to_dict(small_cnn())).replace('"pos": [270.0, 0.0]', f'"pos": [{bad}, 0.0]', 1))
        assert window.open_path(str(p)) is False
        assert "nodes[1].pos:" in shown[-1] and "\n" not in shown[-1]
    assert len(shown) == 2


def test_open_a_file_with_an_absurd_batch_setting_opens_it(window, qtbot, tmp_path):
    """settings.batch = 2**63 raised OverflowError out of File -> Open (the batch field is a
    32-bit spin box): an out-of-range setting is skipped like any unknown one (fuzz mutants)."""
    import json

    data = design_to_dict(small_cnn())
    data["settings"] = {"mode": "train", "batch": 2**63}
    p = tmp_path / "huge_batch.json"
    p.write_text(json.dumps(data))
    batch = window.settings_bar.batch.value()
    assert window.open_path(str(p)) is True
    assert window.settings_bar.batch.value() == batch and window.settings_bar.settings().mode == "train"


def test_open_a_fifo_or_a_device_is_one_message(window, qtbot, tmp_path, monkeypatch):
    """File -> Open of a FIFO blocked the window for good, of /dev/zero grew it without end: the
    bounded reader refuses both at once (io/bounded_read.py)."""
    import os
    import threading

    from helpers import unblock_fifo_later

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text, *a: shown.append(text))
    fifo, dev = tmp_path / "pipe.json", tmp_path / "null.json"
    os.mkfifo(fifo)
    dev.symlink_to("/dev/null")  # a character device, as /dev/zero is, without the risk of an unbounded read
    stop = threading.Event()
    unblock_fifo_later(fifo, stop)
    try:
        assert window.open_path(str(fifo)) is False
        assert window.open_path(str(dev)) is False
    finally:
        stop.set()
    assert shown == [f"{fifo}: cannot read: a FIFO (named pipe), not a design file",
                     f"{dev}: cannot read: a character device, not a design file"]

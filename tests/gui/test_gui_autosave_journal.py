"""Issue 10 §3: each edit is on disk as it ends (a full autosave for the first, then one journal
line per edit: io/design_journal.py), so a kill at any later moment loses nothing however late
the event loop runs. Here every kind of edit the window makes is recovered exactly (node and
edge order included), an ordinary edit costs one short line and no full rewrite, and a line a
kill cut short is dropped whole."""

import json

from gui_helpers import autosave_landed, load, small_cnn

from memdesigner._qt.document import recovery
from memdesigner._qt.document.commands import (
    AddEdgeCmd,
    AddNodeCmd,
    MoveNodesCmd,
    RemoveNodeCmd,
    RemoveNodesCmd,
    SetBitsCmd,
    SetNameCmd,
    SetPropCmd,
)
from memdesigner.io.design_file import design_to_dict


def _recovered(window, qtbot=None) -> dict:
    if qtbot is not None:
        autosave_landed(window, qtbot)
    return design_to_dict(recovery.load(recovery.Recoverable(window.document.slot.file, None, 0.0, "")))


def _journal(window, qtbot=None) -> bytes:
    if qtbot is not None:
        autosave_landed(window, qtbot)
    data = json.loads(window.document.slot.file.read_text())
    return (window.document.slot.file.parent / data["journal"]).read_bytes()


def test_every_kind_of_edit_is_recovered_exactly(window, qtbot):
    load(window, qtbot, small_cnn())
    d, push = window.design, window.stack.push
    steps = [
        lambda: push(AddNodeCmd(d, "Linear", {"out_features": 7}, (5.0, 300.0), node_id="extra")),
        lambda: push(AddEdgeCmd(d, "fc", "extra")),
        lambda: push(SetPropCmd(d, "conv", "out_channels", 24)),
        lambda: push(SetNameCmd(d, "relu", "act")),
        lambda: push(SetBitsCmd(d, "fc", 4)),
        lambda: push(MoveNodesCmd(d, {"flat": ((810, 0), (820.5, 40.0))})),
        lambda: push(MoveNodesCmd(d, {"x": ((0, 0), (1, 1)), "conv": ((270, 0), (280, 9))})),
        lambda: push(RemoveNodesCmd(d, ["conv", "flat"])),
        window.stack.undo,  # every node and edge back at its old place in the orders
        lambda: push(RemoveNodeCmd(d, "relu")),
        window.stack.undo,
        window.stack.redo,
        window.stack.undo,
        lambda: window.settings_bar.apply_dict({"mode": "train", "batch": 12}),
        window.stack.undo,
        lambda: (window.scene.select_nodes(["conv", "relu"]), window.copy(), window.paste()),
        lambda: (window.scene.select_nodes(["relu", "flat"]), window.blocks_nav.act_group.trigger()),
    ]
    for k, step in enumerate(steps):
        step()
        assert _recovered(window, qtbot) == design_to_dict(window.design), f"step {k}"
    assert window.design.blocks  # the group made a definition: written in full, then edited inside it
    inst = next(n for n in window.design.nodes.values() if n.type == "Block")
    window.scene.select_nodes([inst.id])
    window.blocks_nav.act_open.trigger()
    inner = window.scene.design
    push(SetPropCmd(inner, next(n.id for n in inner.nodes.values() if n.type == "ReLU"), "inplace", True))
    assert _recovered(window) == design_to_dict(window.design)


def test_an_edit_appends_one_line_and_rewrites_nothing(window, qtbot, monkeypatch):
    load(window, qtbot, small_cnn())
    slot, d = window.document.slot, window.design
    window.stack.push(SetPropCmd(d, "fc", "out_features", 11))  # the first edit: the full autosave
    full = []
    before = _journal(window, qtbot)
    monkeypatch.setattr(slot, "write", lambda *a: full.append(a))
    monkeypatch.setattr(slot, "begin_write", lambda *a: full.append(a))
    window.stack.push(SetPropCmd(d, "fc", "out_features", 12))
    window.stack.push(AddNodeCmd(d, "ReLU", None, (0.0, 200.0)))
    lines = _journal(window)[len(before):].splitlines()
    assert full == [] and len(lines) == 2 and all(len(line) < 300 for line in lines)
    assert _recovered(window)["nodes"][4]["props"]["out_features"] == 12
    # the undo of a bulk delete names the nodes the journal took out, not each node again
    window.stack.push(RemoveNodesCmd(d, ["conv", "relu", "flat"]))
    window.stack.undo()
    undo = _journal(window).splitlines()[-1]
    assert b'"adds"' in undo and b'"type"' not in undo
    assert _recovered(window) == design_to_dict(d)


def test_a_line_cut_by_a_kill_is_dropped_whole(window, qtbot):
    load(window, qtbot, small_cnn())
    d = window.design
    window.stack.push(SetPropCmd(d, "fc", "out_features", 11))
    window.stack.push(SetPropCmd(d, "fc", "out_features", 12))
    autosave_landed(window, qtbot)
    data = json.loads(window.document.slot.file.read_text())
    path = window.document.slot.file.parent / data["journal"]
    line = b'[{"op":"set","node":{"id":"fc","type":"Linear","props":{"out_features":99},"pos":[1080.0,0.0]}}]\n'
    with open(path, "ab") as f:
        f.write(line[:40])  # the step being written when the kill came
    assert _recovered(window)["nodes"][4]["props"]["out_features"] == 12


def test_the_delay_rewrites_the_autosave_and_starts_an_empty_journal(window, qtbot):
    load(window, qtbot, small_cnn())
    window.stack.push(SetPropCmd(window.design, "fc", "out_features", 11))
    window.stack.push(SetPropCmd(window.design, "fc", "out_features", 12))
    window.document._timer.stop()  # (on a loaded machine the delay could run out while we look)
    autosave_landed(window, qtbot)
    first = json.loads(window.document.slot.file.read_text())["journal"]
    assert _journal(window).count(b"\n") == 1
    window.document._timer.start()  # the delay, from here
    gone = window.document.slot.file.parent / first  # (the worker renames, then drops the old journal)
    qtbot.waitUntil(lambda: json.loads(window.document.slot.file.read_text())["journal"] != first
                    and not gone.exists(), timeout=5000)
    assert _journal(window) == b""
    assert _recovered(window)["nodes"][4]["props"]["out_features"] == 12


def test_the_delayed_rewrite_runs_on_the_worker_and_loses_no_edit_meanwhile(window, qtbot, monkeypatch):
    """The full rewrite after the delay is serialised and written off the UI thread (at 10,000
    nodes it took 70-250 ms of it); an edit made while it is being written goes to the
    continuation journal and is recovered before and after the rewrite lands."""
    import threading

    from memdesigner.io import design_journal

    load(window, qtbot, small_cnn())
    doc, slot, d = window.document, window.document.slot, window.design
    doc._timer.stop()
    window.stack.push(SetPropCmd(d, "fc", "out_features", 11))  # the full autosave, here
    window.stack.push(SetPropCmd(d, "fc", "out_features", 12))  # a journal line
    doc._timer.stop()
    autosave_landed(window, qtbot)
    first = json.loads(slot.file.read_text())["journal"]
    threads, gate = [], threading.Event()
    real_envelope, real_apply = recovery._envelope_text, design_journal.apply_steps
    monkeypatch.setattr(recovery, "_envelope_text",
                        lambda *a: threads.append(threading.current_thread() is threading.main_thread())
                        or real_envelope(*a))
    monkeypatch.setattr(design_journal, "apply_steps", lambda *a: gate.wait(10) and real_apply(*a))
    doc._timed_autosave()  # the delay ran out
    window.stack.push(SetPropCmd(d, "conv", "out_channels", 24))  # while the worker writes
    assert json.loads(slot.file.read_text())["journal"] == first  # not landed yet
    assert _recovered(window) == design_to_dict(d)  # the old autosave, its journal and the continuation
    gate.set()
    gone = slot.file.parent / first  # (the worker renames, then drops the old journal)
    qtbot.waitUntil(lambda: json.loads(slot.file.read_text())["journal"] != first and not gone.exists(),
                    timeout=5000)
    assert threads == [False]  # serialised on the worker only
    assert _recovered(window) == design_to_dict(d)
    assert _journal(window).count(b"\n") == 1  # the edit made meanwhile, in the continuation


def test_a_full_write_during_the_rewrite_stands(window, qtbot, monkeypatch):
    """A full write on the UI thread, while the worker's rewrite
    of the older state is still going: that rewrite is dropped, never renamed over it."""
    import threading

    from memdesigner.io import design_journal

    load(window, qtbot, small_cnn())
    doc, slot, d = window.document, window.document.slot, window.design
    window.stack.push(SetPropCmd(d, "fc", "out_features", 11))
    window.stack.push(SetPropCmd(d, "fc", "out_features", 12))
    doc._timer.stop()
    autosave_landed(window, qtbot)
    gate, done = threading.Event(), []
    real_apply = design_journal.apply_steps
    monkeypatch.setattr(design_journal, "apply_steps", lambda *a: gate.wait(10) and real_apply(*a))
    doc._timed_autosave()
    task = doc._compacting
    task.succeeded.connect(done.append)
    d.name = "renamed"
    window.stack.push(SetPropCmd(d, "conv", "out_channels", 24))
    assert doc.autosave()  # a full write here (as recovery's own, or a design with block definitions)
    written = json.loads(slot.file.read_text())["journal"]
    gate.set()
    qtbot.waitUntil(lambda: done != [], timeout=5000)
    assert done == [False]
    assert json.loads(slot.file.read_text())["journal"] == written
    assert _recovered(window) == design_to_dict(d) and _recovered(window)["name"] == "renamed"
    assert [p.name for p in slot.file.parent.glob(f"{slot.file.stem}.*.journal")] == [written]
    assert list(slot.file.parent.glob(f".{slot.file.name}.*.tmp")) == []  # its file removed


def _gate_serialiser(monkeypatch):
    """The worker's full write waits for the gate; returns (gate, threads it ran on)."""
    import threading

    gate, threads = threading.Event(), []
    real = recovery.design_to_dict

    def gated(design):
        threads.append(threading.current_thread() is threading.main_thread())
        gate.wait(10)
        return real(design)

    monkeypatch.setattr(recovery, "design_to_dict", gated)
    return gate, threads


def test_the_design_name_and_flags_are_journalled_not_written_in_full(window, qtbot, monkeypatch):
    load(window, qtbot, small_cnn())
    slot, d = window.document.slot, window.design
    window.stack.push(SetPropCmd(d, "fc", "out_features", 11))
    before = _journal(window, qtbot)
    full = []
    monkeypatch.setattr(slot, "write", lambda *a: full.append(a))
    monkeypatch.setattr(slot, "begin_write", lambda *a: full.append(a))
    d.name, d.channels_last = "renamed", True
    window.stack.push(SetPropCmd(d, "fc", "out_features", 12))
    lines = _journal(window)[len(before):].splitlines()
    assert full == [] and len(lines) == 1 and b'"meta"' in lines[0]
    got = _recovered(window)
    assert got == design_to_dict(d) and got["name"] == "renamed" and got["channels_last"] is True


def test_the_first_edit_is_written_on_the_worker_from_a_frozen_copy(window, qtbot, monkeypatch):
    """The full autosave of an unsaved stretch's first edit is serialised and written on the
    worker (at 10,000 nodes ~90 ms of the UI thread before), from a copy that a later edit of the
    same node does not reach; that edit goes to the new journal at once and is recovered after
    the write lands. Until it lands no autosave names that journal (the state before stands)."""
    gate, threads = _gate_serialiser(monkeypatch)
    load(window, qtbot, small_cnn())
    slot, d = window.document.slot, window.design
    window.stack.push(SetPropCmd(d, "fc", "out_features", 11))
    window.stack.push(SetPropCmd(d, "fc", "out_features", 12))  # the same node, while the worker writes
    assert not slot.file.exists()
    gate.set()
    autosave_landed(window, qtbot)
    assert threads == [False]
    base = json.loads(slot.file.read_text())["design"]
    assert next(n for n in base["nodes"] if n["id"] == "fc")["props"]["out_features"] == 11  # not torn
    assert _journal(window).count(b"\n") == 1
    assert _recovered(window) == design_to_dict(d)


def test_a_clear_before_the_worker_write_lands_wins(window, qtbot, monkeypatch):
    """Undone back to the saved state while the worker writes: nothing to recover, and the
    write that lands late is dropped, never renamed into place."""
    gate, _ = _gate_serialiser(monkeypatch)
    load(window, qtbot, small_cnn())
    slot, d = window.document.slot, window.design
    window.stack.push(SetPropCmd(d, "fc", "out_features", 11))
    window.stack.undo()
    gate.set()
    autosave_landed(window, qtbot)
    qtbot.wait(50)
    assert not slot.file.exists()
    assert list(slot.file.parent.glob(f"{slot.file.stem}.*.journal")) == []
    assert list(slot.file.parent.glob(f".{slot.file.name}.*.tmp")) == []

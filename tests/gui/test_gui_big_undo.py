"""Issue 21 §7: at 10,000 layers an undo of a delete and a Batch change kept the window busy in
single long turns. These tests check the mechanisms without timing (the figures come from
benchmarks/gui_latency.py): what an undo or a new result does in one turn, not how fast."""

from tests.gui.gui_helpers import load
from tests.gui.test_gui_big_graphs import chain


def _rects(path) -> int:
    return path.elementCount() // 5  # (a rectangle is five path elements)


def test_undo_of_deleting_everything_grows_the_overview_instead_of_making_it_anew(window, qtbot):
    d = chain(400, spread=600.0)  # 1,000 items: built in slices, drawn as the overview zoomed out
    d.nodes["fc3"].props["out_features"] = -4  # one layer in error: outlined in the overview
    load(window, qtbot, d)
    qtbot.waitUntil(lambda: not window.scene.building, timeout=10000)
    window.view.resetTransform()
    window.view.zoom_by(0.1)
    scene = window.scene
    assert scene.overview and _rects(scene.overview_blocks()[1]) == 1
    window.select_all()
    window.delete_selection()
    window.stack.undo()  # at once, before any paint (a user's Ctrl+Z)
    qtbot.waitUntil(lambda: not scene.building, timeout=10000)
    # the batches grew as the items came back: the next paint draws them, it makes none
    assert scene._blocks is not None and scene._lines is not None
    by_family, bad = scene._blocks
    assert sum(map(_rects, by_family.values())) == len(d.nodes)
    assert _rects(bad) == 1
    assert scene._lines.elementCount() == 2 * len(d.edges)


def test_a_result_fills_the_layer_table_a_turn_after_the_canvas(window, qtbot, monkeypatch):
    """The canvas's first labelling slice and the table's rows were one turn (30-45 ms of CPU
    after a Batch change at 10,000 layers); the table now has a turn of its own, and the tab's
    count of layers not modelled is the report's (not a count over the rows in the view)."""
    import time

    from PySide6.QtCore import QTimer

    from tests.gui.gui_helpers import small_cnn

    load(window, qtbot, small_cnn())
    window.split_paint = True
    log = []
    real_apply, real_rows = window.scene.apply_result, window.table.set_rows

    def step(name, real):
        def run(*a):
            real(*a)
            log.append(name)
            time.sleep(0.003)  # a turn long enough for the heartbeat to be due when it ends
        return run

    monkeypatch.setattr(window.scene, "apply_result", step("canvas", real_apply))
    monkeypatch.setattr(window.table, "set_rows", step("table", real_rows))
    beat = QTimer()
    beat.setInterval(1)
    beat.timeout.connect(lambda: log and log[-1] != "beat" and log.append("beat"))
    beat.start()
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.settings_bar.apply_dict({"batch": 5})
    beat.stop()
    assert log[:3] == ["canvas", "beat", "table"]
    assert window.table.model_.rows == window.result.report.layers


def test_auto_layout_copies_no_layer_on_the_ui_thread(window, qtbot, monkeypatch):
    """The layout reads the node ids and the edges; the UI thread copied every node for it
    (20-30 ms of CPU at 10,000 layers) before the worker started."""
    import threading

    from memdesigner._qt.canvas.layout import positions
    from memdesigner.model.design import Design

    d = chain(400, spread=0.0)  # every layer on one spot
    load(window, qtbot, d)
    want = positions(d.detached_copy(), "bands")
    copied = []
    real = Design.detached_copy
    monkeypatch.setattr(Design, "detached_copy",
                        lambda self: (copied.append(threading.current_thread()), real(self))[1])
    window.layout_runner.run("bands")
    assert window.layout_runner.running  # on the worker
    assert threading.main_thread() not in copied
    qtbot.waitUntil(lambda: not window.layout_runner.running, timeout=20000)
    assert {nid: n.pos for nid, n in d.nodes.items()} == want


def test_a_selection_of_none_or_many_does_not_walk_the_layer_table(window, qtbot):
    """Deleting or selecting everything clears the table's selection: it walked all its rows
    looking for no layer (10,000 at a time)."""
    from tests.gui.gui_helpers import small_cnn

    load(window, qtbot, small_cnn())
    walked = []

    class Rows(list):
        def __iter__(self):
            walked.append(1)
            return super().__iter__()

    model = window.table.model_
    model.rows = Rows(model.rows)
    window.select_all()
    window.delete_selection()
    assert walked == []
    window.table.select_node(model.rows[0].id)  # one layer: found by its row
    assert walked == [1]


def test_a_big_layouts_cards_move_in_slices_and_all_land(window, qtbot):
    """Applying a layout moved every card in the layout's own turn (10,000 setPos calls, 60-90 ms
    of CPU); the moves now go in the scene's slices, before the edges are re-routed."""
    from memdesigner._qt.document.commands import MoveNodesCmd

    d = chain(700)  # 1,750 items
    load(window, qtbot, d)
    scene = window.scene
    qtbot.waitUntil(lambda: not scene.jobs.busy, timeout=10000)
    scene.jobs.budget = 0.0002
    moves = {nid: (n.pos, (n.pos[0], n.pos[1] + 500.0)) for nid, n in d.nodes.items()}
    window.stack.push(MoveNodesCmd(d, moves, "Auto layout"))
    at = {nid: (it.x(), it.y()) for nid, it in scene.nodes.items()}
    assert sum(at[nid] == d.nodes[nid].pos for nid in at) < len(d.nodes)  # not all in the push's turn
    qtbot.waitUntil(lambda: not scene.jobs.busy, timeout=10000)
    assert all((it.x(), it.y()) == d.nodes[nid].pos for nid, it in scene.nodes.items())
    e = next(iter(scene.edges.values()))
    assert (e._a, e._b) == e._ports()  # routed to where the cards landed

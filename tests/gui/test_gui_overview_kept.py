"""Zooming out into the overview keeps the overview's batches (grown while the canvas was built):
made again in the first paint, they were an 80 ms stall right after a 10,000-layer open."""

from gui_helpers import load

from memdesigner._qt.canvas.scene import OVERVIEW_LOD, OVERVIEW_MIN_EDGES
from memdesigner.model.design import Design


def _chain(n: int) -> Design:
    d = Design("chain")
    prev = d.add_node("Input", {"shape": (4, 8)}, pos=(0.0, 0.0)).id
    for i in range(n):
        nid = d.add_node("ReLU", pos=(300.0 * (i % 40), 200.0 * (i // 40))).id
        d.add_edge(prev, nid, check_cycle=False)
        prev = nid
    return d


def _rects(path):
    r = path.boundingRect()
    return path.elementCount(), (r.x(), r.y(), r.width(), r.height())


def test_overview_keeps_the_batches_built_with_the_canvas(window, qtbot):
    load(window, qtbot, _chain(OVERVIEW_MIN_EDGES + 20))
    scene = window.scene
    scene.finish_pending()
    scene.set_zoom(1.0)
    blocks, lines = scene.overview_blocks(), scene._overview_lines()
    scene.set_zoom(OVERVIEW_LOD / 2)
    assert scene.overview
    assert scene.overview_blocks() is blocks and scene._overview_lines() is lines  # not made again
    kept = {f: _rects(p) for f, p in blocks[0].items()}
    kept_lines = _rects(lines)
    scene._blocks = scene._lines = None  # what a fresh build of the batches gives
    assert {f: _rects(p) for f, p in scene.overview_blocks()[0].items()} == kept
    assert _rects(scene._overview_lines()) == kept_lines
    assert sum(_rects(p)[0] for p in blocks[0].values()) == 5 * len(scene.nodes)  # a rect is 5 elements

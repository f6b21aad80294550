"""The timeline's stack is drawn from a few ready-made polygons, decimated to the pixel width by
the maximum per column (the engine's peak drawn at its exact height), and a new estimate
touches only the plot items whose content changed."""

import numpy as np

import memdesigner as md
from memdesigner._qt.memory import timeline_data
from memdesigner._qt.memory.timeline import StackItem, TimelinePlot, headroom_top
from memdesigner.model.design import Design


def deep_mlp(layers: int) -> Design:
    d = Design("deep")
    prev = d.add_node("Input", {"shape": (64,)}).id
    for i in range(layers):
        a = d.add_node("Linear", {"out_features": 64 + 8 * (i % 7)}).id
        d.add_edge(prev, a)
        prev = d.add_node("ReLU").id
        d.add_edge(a, prev)
    return d


def polygon_ys(poly) -> np.ndarray:
    return np.array([poly.at(i).y() for i in range(poly.size())])


def test_decimating_keeps_each_columns_highest_value():
    rng = np.random.default_rng(7)
    cum = rng.integers(0, 1 << 40, size=(10_007, 5)).cumsum(axis=1).astype(float)
    edges, tops = timeline_data.decimate_max(cum, 1000)
    assert len(tops) <= 1000 and edges[0] == 0 and edges[-1] == len(cum)
    for j in (0, 1, 499, len(tops) - 1):
        a, b = int(edges[j]), int(edges[j + 1])
        assert (tops[j] == cum[a:b].max(axis=0)).all()
    assert tops.max() == cum.max()  # the highest op is drawn at its height, wherever it falls
    assert (np.diff(tops, axis=1) >= 0).all()  # the stack stays stacked
    e, t = timeline_data.decimate_max(cum[:500], 1000)  # fewer ops than columns: every op drawn
    assert (e == np.arange(501)).all() and (t == cum[:500]).all()


def polygon_xs(poly) -> np.ndarray:
    return np.array([poly.at(i).x() for i in range(poly.size())])


def test_the_zoomed_out_stack_reaches_the_reports_exact_peak(qtbot):
    rep = md.estimate(deep_mlp(300), mode="train", optimizer="adam", batch=4)
    n = len(rep.timeline)
    assert n > 1000
    fig = timeline_data.build(rep.timeline, rep.peak_event, columns=200)
    assert fig.peak_index == rep.peak_event
    top = max(k for k, used in enumerate(fig.used) if used)  # the category on top of the stack
    fill, line = fig.whole[top]
    assert line.size() <= 2 * 200 and polygon_ys(line).max() == rep.peak_bytes
    item = StackItem()
    item.set_figure(fig, 1.0)
    assert item.polygons(px_per_op=200 / n) is fig.whole  # the whole step on 200 pixels


def test_zoomed_in_only_the_visible_ops_are_drawn(qtbot):
    rep = md.estimate(deep_mlp(300), mode="train", optimizer="adam", batch=4)
    n = len(rep.timeline)
    fig = timeline_data.build(rep.timeline, rep.peak_event, columns=200)
    top = max(k for k, used in enumerate(fig.used) if used)
    totals = np.array([e.bytes for e in rep.timeline], dtype=float)
    item = StackItem()
    item.set_figure(fig, 1.0)
    a, b = 100, 100 + n // 20  # zoomed in 20 times: 4 pixels per op, each op drawn
    line = item.polygons(4.0, a, b)[top][1]
    xs, ys = polygon_xs(line), polygon_ys(line)
    assert xs.min() == a and xs.max() == b and line.size() == 2 * (b - a)
    assert (ys[::2] == totals[a:b]).all()  # each visible op at its own height
    # zoomed in twice: still more ops than pixels, decimated to the pixels of the visible half
    line = item.polygons(200 / n * 2, 0, n // 2)[top][1]
    assert line.size() <= 2 * 200 + 2 and polygon_xs(line).max() == n // 2
    assert polygon_ys(line).max() == totals[: n // 2].max()
    assert item.polygons(4.0, a, b) is item.polygons(4.0, a, b)  # a repaint (hover) reuses them


def test_a_similar_estimate_leaves_the_axes_and_range_alone(qtbot, monkeypatch):
    d = deep_mlp(40)
    rep = md.estimate(d, mode="train", optimizer="adam", batch=8)
    d.set_prop(d.topo_order()[3], "out_features", 65)  # a small edit: the peak moves a little
    rep2 = md.estimate(d, mode="train", optimizer="adam", batch=8)
    assert rep2.peak_bytes != rep.peak_bytes and len(rep2.timeline) == len(rep.timeline)
    plot = TimelinePlot()
    qtbot.addWidget(plot)
    plot.set_report(rep)
    calls = []
    for name in ("setRange", "setLimits", "setLabel", "setTitle"):
        monkeypatch.setattr(plot, name, lambda *a, _n=name, **k: calls.append(_n))
    plot.set_report(rep2)
    assert calls == []  # the same unit, ops and rounded top: no axis relaid out, no range reset
    xs, ys = plot._peak_mark.getData()
    assert xs[0] == rep2.peak_event + 0.5 and np.isclose(ys[0] * plot.scale, rep2.peak_bytes)


def test_the_plot_top_rounds_up_by_at_most_four_per_cent_onto_fixed_steps():
    for y in (0.0123, 1.68, 9.05, 9.07, 10.03, 1234.0, 7.0e9):
        top = headroom_top(y)
        assert y <= top <= y * 1.04 * (1 + 1e-9)
        assert headroom_top(top) == top and headroom_top(top / 1.04 * 1.001) == top  # one step holds them
    assert headroom_top(0.0) == 1.0


def test_the_layer_table_updates_changed_rows_without_a_reset(qtbot):
    from memdesigner._qt.memory.layer_table import LayerTable

    d = deep_mlp(5)
    rows = md.estimate(d, batch=2).layers
    d.set_prop(d.topo_order()[1], "out_features", 99)
    rows2 = md.estimate(d, batch=2).layers
    table = LayerTable()
    qtbot.addWidget(table)
    table.set_rows(rows)
    resets, changed = [], []
    table.model_.modelReset.connect(lambda: resets.append(1))
    table.model_.dataChanged.connect(lambda a, b, *_: changed.append((a.row(), b.row())))
    table.set_rows(rows2)
    # the edited Linear, its ReLU and the Linear it feeds (more weights): rows 1 to 3
    assert resets == [] and changed == [(1, 3)]
    assert table.model_.rows[1].output_shape[-1] == 99


def test_a_repaint_blits_the_axes_until_their_ticks_change(qtbot, monkeypatch):
    """The axes' picture (labels and the translucent grid across the plot) was replayed on every
    repaint, a hover's included: half of each. Now each axis is drawn once per tick change."""
    plot = TimelinePlot()
    qtbot.addWidget(plot)
    plot.resize(900, 300)
    plot.show()
    plot.set_report(md.estimate(deep_mlp(40), mode="train", optimizer="adam", batch=8))
    qtbot.waitExposed(plot)
    qtbot.wait(50)  # laid out and painted once
    plot.viewport().repaint()
    played = []

    class Picture:  # the axis's recorded drawing, replayed by its paint()
        def __init__(self, name, pic):
            self.name, self.pic = name, pic

        def play(self, p):
            played.append(self.name)
            return self.pic.play(p)

    for name in ("left", "bottom"):
        axis = plot.getAxis(name)
        assert axis.picture is not None
        axis.picture = Picture(name, axis.picture)
    plot.viewport().repaint()
    assert played == []  # nothing changed: both axes from their pixmaps
    plot.getAxis("left").update()  # what a change of its ticks does
    plot.viewport().repaint()
    assert played == ["left"]


def test_a_new_y_range_redraws_an_axis_strip_and_the_grid_as_lines(qtbot):
    """A batch or settings change moves the plot's top: the left axis is drawn again. With
    pyqtgraph's grid it spanned the whole plot, so its cached pixmap (replayed into on each
    change, ~4 ms) was plot-sized; now the axis is a strip and the grid its own few lines, at the
    axis's major tick values; the phase bands are opaque fills of the colour they showed."""
    from memdesigner._qt import theme
    from memdesigner._qt.memory.timeline import _over_background

    plot = TimelinePlot()
    qtbot.addWidget(plot)
    plot.resize(900, 300)
    plot.show()
    plot.set_report(md.estimate(deep_mlp(40), mode="train", optimizer="adam", batch=8))
    qtbot.waitExposed(plot)
    plot.set_report(md.estimate(deep_mlp(40), mode="train", optimizer="adam", batch=512))  # a higher top
    plot.viewport().repaint()
    axis = plot.getAxis("left")
    assert axis.grid is False and axis.boundingRect().width() < 150  # its strip, not the 900-pixel plot
    (y0, y1) = plot.plotItem.vb.viewRange()[1]
    major = [v for v in axis.tickValues(y0, y1, axis.geometry().height())[0][1] if y0 <= v <= y1]
    lines = dict(plot.y_grid.lines())
    assert major and set(major) <= set(lines) and all(0 < a < 255 for a in lines.values())
    reg, _ = plot._phases[0]
    brush = reg.brush
    ph = plot.figure.spans[0][0]
    assert brush.color().alpha() == 255 and brush.color() == _over_background(theme.PHASE_COLORS[ph], 22)
    # white under #RRGGBB at 22/255: the colour the translucent band showed there
    c = _over_background("#FF0000", 22)
    if not theme.is_dark():
        assert (c.red(), c.green(), c.blue()) == (255, 233, 233)

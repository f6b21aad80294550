"""Imports people can trust in the window: every import laid out, importer warnings and
unmodelled layers reach the verdict and the layer table, jobs on the worker with Cancel."""

import json

from PySide6.QtCore import Qt

KERAS_UNKNOWN = {"class_name": "Sequential", "config": {"name": "s", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 32], "dtype": "float32", "name": "in"}},
    {"class_name": "Dense", "config": {"name": "d1", "units": 64, "activation": "relu", "use_bias": True}},
    {"class_name": "FancyMixer", "config": {"name": "mix"}},
    {"class_name": "Dense", "config": {"name": "d2", "units": 10, "activation": "linear", "use_bias": True}}]},
    "keras_version": "2.15.0"}


def _keras_file(tmp_path, layers=None):
    data = json.loads(json.dumps(KERAS_UNKNOWN))
    if layers is not None:
        data["config"]["layers"] = layers
    p = tmp_path / "model.json"
    p.write_text(json.dumps(data))
    return p


def _import_keras(window, qtbot, path):
    from memdesigner._qt import hooks

    with qtbot.waitSignal(window.result_applied, timeout=20000):
        window._import(lambda: hooks.import_keras(str(path)), "Keras")
    qtbot.waitUntil(lambda: window.result is not None and window.result.report is not None
                    and len(window.result.report.layers) > 1, timeout=20000)
    return window.result.report


def test_an_unsupported_keras_layer_is_named_in_the_verdict_and_the_table(window, qtbot, tmp_path):
    """A Keras layer memdesigner has no rule for becomes a Generic node: the verdict says
    "1 layer not modelled" instead of a plain green "Fits", the Layers tab counts it and its
    row says it is not modelled; the importer's warning is shown beside the verdict."""
    from conftest import BIG

    window.settings_bar.apply_dict({"device": BIG.id})
    rep = _import_keras(window, qtbot, _keras_file(tmp_path))
    assert rep.device is not None and rep.device["fits"]
    assert "1 layer not modelled" in window.summary.verdict.text()
    assert not window.summary.verdict.text().startswith("✓")
    tab = window.tabs.tabText(window.tabs.indexOf(window.table))
    assert tab == "Layers (⚠ 1 not modelled)"
    m = window.table.model_
    rows = [r for r in range(m.rowCount()) if "not modelled" in m.data(m.index(r, 1), Qt.DisplayRole)]
    assert [m.rows[r].type for r in rows] == ["Generic"]
    assert window.summary.import_note.isVisibleTo(window.summary)
    assert "FancyMixer" in window.summary.import_note.toolTip()


def test_a_fully_modelled_import_says_nothing_of_the_kind(window, qtbot, tmp_path):
    layers = [x for x in KERAS_UNKNOWN["config"]["layers"] if x["class_name"] != "FancyMixer"]
    _import_keras(window, qtbot, _keras_file(tmp_path, layers))
    assert "not modelled" not in window.summary.verdict.text()
    assert window.tabs.tabText(window.tabs.indexOf(window.table)) == "Layers"
    assert not window.summary.import_note.isVisibleTo(window.summary)


def test_a_deep_import_is_laid_out_not_a_column(window, qtbot, tmp_path):
    """A 516-layer import opened as one overlapping column (1 pixel wide when fitted): every
    import is laid out now, whatever positions the importer wrote."""
    from memdesigner._qt import hooks

    layers = [{"class_name": "InputLayer", "config": {"batch_input_shape": [None, 16], "name": "in"}}]
    for i in range(515):
        layers.append({"class_name": "Dense", "config": {"name": f"d{i}", "units": 16, "activation": "linear"}})
    path = _keras_file(tmp_path, layers)
    d = hooks.import_keras(str(path))
    xs = {round(n.pos[0]) for n in d.nodes.values()}
    ys = {round(n.pos[1]) for n in d.nodes.values()}
    _import_keras(window, qtbot, path)
    nodes = window.design.nodes.values()
    w = max(n.pos[0] for n in nodes) - min(n.pos[0] for n in nodes)
    h = max(n.pos[1] for n in nodes) - min(n.pos[1] for n in nodes)
    assert len(window.design.nodes) == 516 or window.design.blocks  # repeats may fold into a block
    if len(window.design.nodes) > 20:
        # laid out in bands: neither a single row nor a single column, and no two nodes on one spot
        assert w > 0 and h > 0 and 0.2 < w / h < 5, (w, h, len(xs), len(ys))
        spots = {(round(n.pos[0]), round(n.pos[1])) for n in nodes}
        assert len(spots) == len(window.design.nodes)

"""A big canvas composes layer and edge texts only where they are needed (issue 10 §5): an estimate
formats nothing for cards nobody can read (zoomed out on 900 layers), a card asked for its texts
composes them from the last result, and a card shown in detail before is re-labelled at once when a
new result comes (its cached picture would show the old numbers)."""

from memdesigner._qt.canvas import scene as scene_mod
from memdesigner.units import format_bytes
from tests.gui.gui_helpers import load
from tests.gui.test_gui_big_graphs import chain


def _spy_format(monkeypatch) -> list:
    calls = []

    def counting(n, *a, **k):
        calls.append(n)
        return format_bytes(n, *a, **k)

    monkeypatch.setattr(scene_mod, "format_bytes", counting)
    return calls


def test_zoomed_out_results_format_nothing_until_asked(window, qtbot, monkeypatch):
    d = chain(900)
    calls = _spy_format(monkeypatch)
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.set_design(d, None, layout="always")  # in bands: the whole of it fits zoomed out
    qtbot.waitUntil(lambda: not window.scene.jobs.busy, timeout=30000)
    window.view.viewport().repaint()
    assert window.scene.overview
    assert calls == []  # 900 cards and 1,300 edges labelled with an estimate: none formatted
    item = window.scene.nodes["fc400"]
    assert item.shape_text == "1×16" and item.params_text == "272 params"  # composed when asked
    assert len(calls) == 1 + 3  # its badge and its tooltip's three figures, nobody else's
    row = next(r for r in window.result.report.layers if r.id == "fc400")
    assert item.mem_text == format_bytes(row.activation_bytes + row.kept_bytes)
    edge = next(e for k, e in window.scene.edges.items() if k.src == "fc400")
    assert edge.label == "1×16"


def test_a_card_shown_in_detail_is_relabelled_when_the_result_changes(window, qtbot):
    d = chain(900)
    load(window, qtbot, d)
    qtbot.waitUntil(lambda: not window.scene.jobs.busy, timeout=30000)
    view, item = window.view, window.scene.nodes["fc10"]
    view.resetTransform()
    view.zoom_by(1.0)  # (tells the scene the zoom: out of the overview)
    view.centerOn(item)
    view.viewport().repaint()  # painted in detail: its texts composed and its picture cached
    assert item._shape_text == "1×16"
    edge = next(e for k, e in window.scene.edges.items() if k.src == "fc10")
    assert edge._label == "1×16"
    far = window.scene.nodes["fc400"]
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.settings_bar.batch.setValue(3)
    qtbot.waitUntil(lambda: not window.scene.jobs.busy, timeout=30000)
    assert item._shape_text == "3×16" and edge._label == "3×16"  # at once, not when next asked
    assert far._shape_text in ("", "1×16")  # never shown: still waiting to be asked
    assert far.shape_text == "3×16"

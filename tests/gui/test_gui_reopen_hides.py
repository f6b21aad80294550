"""Opening another design over a big one: the previous design's items are hidden at once (they
leave the scene index in slices later, and must not be painted over the new design meanwhile)."""

from tests.gui.test_gui_big_graphs import chain


def test_the_previous_designs_items_are_hidden_before_they_are_removed(window, qtbot):
    window.set_design(chain(400), None, layout="always")
    qtbot.waitUntil(lambda: not window.scene.jobs.busy, timeout=30000)
    old = list(window.scene.nodes.values()) + list(window.scene.edges.values())
    assert len(old) > 600  # (more than the scene clears at once)
    assert any(it.isVisible() for it in old)  # (zoomed out, the edges are drawn by the scene: hidden)
    window.set_design(chain(3), None, layout="always")
    assert window.scene.jobs.has("remove")
    still = [it for it in old if it.scene() is window.scene]
    assert len(still) == len(old)  # nothing removed yet: all of them still in the scene, and hidden
    assert not any(it.isVisible() for it in still)

"""Undo restores the design exactly: node order, edge order, props and positions. The node order
picks which of two ready branches runs first, so a node put back at the end moves the peak."""

import json

import pytest
from gui_helpers import load

import memdesigner as md
from memdesigner.io.design_file import design_to_dict
from memdesigner.model.design import Design


def two_branches() -> Design:
    d = Design("branches")
    d.add_node("Input", {"shape": (4096,)}, id="x", pos=(0, 0))
    d.add_node("Linear", {"out_features": 16384}, id="a1", pos=(270, -100))
    d.add_node("Linear", {"out_features": 4096}, id="a2", pos=(540, -100))
    d.add_node("Linear", {"out_features": 1024, "bias": False}, id="b1", pos=(270, 100), bits=8)
    d.add_node("Linear", {"out_features": 4096}, id="b2", pos=(540, 100))
    d.add_node("Add", id="add", pos=(810, 0))
    for a, b, port in (("x", "a1", 0), ("a1", "a2", 0), ("x", "b1", 0), ("b1", "b2", 0), ("a2", "add", 0),
                       ("b2", "add", 1)):
        d.add_edge(a, b, dst_port=port)
    return d


def snapshot(design):
    text = json.dumps(design_to_dict(design), indent=2)
    peak = md.estimate(design, mode="train", batch=256, optimizer="sgd").peak_bytes
    return text, peak


def test_node_order_changes_the_peak():
    """Why the order must come back: a1 moved last runs after branch b and the peak changes."""
    d = two_branches()
    moved = Design("branches")
    for nid in ("x", "a2", "b1", "b2", "add", "a1"):
        moved.insert_node(d.nodes[nid])
    moved.edges = list(d.edges)
    assert snapshot(moved)[1] != snapshot(d)[1]


@pytest.mark.parametrize("how", ["one_branch_node", "several_nodes_and_an_edge", "cut"])
def test_delete_then_undo_restores_design_and_estimate_byte_for_byte(window, qtbot, how):
    load(window, qtbot, two_branches())
    before = snapshot(window.design)
    report_before = window.result.report.peak_bytes
    if how == "one_branch_node":
        window.scene.select_nodes(["a1"])
        window.delete_selection()
    elif how == "several_nodes_and_an_edge":
        edge = next(e for e in window.design.edges if e.src == "b2")
        window.scene.select_nodes(["a1", "b1"])
        window.scene.edges[edge].setSelected(True)
        window.delete_selection()
        assert edge not in window.design.edges
    else:
        window.scene.select_nodes(["a2", "x"])
        window.cut()
    assert snapshot(window.design) != before
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.stack.undo()
    assert snapshot(window.design) == before
    assert window.result.report.peak_bytes == report_before
    window.stack.redo()
    window.stack.undo()
    assert snapshot(window.design) == before

"""The engine's memos (engine_speed.py, llm_window.py): a design with blocks is expanded and
analysed once per content, and an edit anywhere, even in place, is seen."""

import memdesigner
from memdesigner.model import blocks
from memdesigner.model.design import Design


def _stack(repeat: int = 3, bias: bool = True) -> Design:
    d = Design("stack")
    d.add_node("Input", {"shape": (16,)}, id="x")
    bd = blocks.new_definition(d, "layer", stack=True)
    bd.graph.add_node("BlockInput", {"shape": (16,)}, id="h")
    bd.graph.add_node("Linear", {"out_features": 16, "bias": bias}, id="fc")
    bd.graph.add_node("BlockOutput", {}, id="out")
    bd.graph.add_edge("h", "fc")
    bd.graph.add_edge("fc", "out")
    d.add_node("Block", {"definition": "layer", "repeat": repeat}, id="layers")
    d.add_edge("x", "layers")
    return d


def test_equal_designs_share_one_expansion():
    """The window estimates a fresh snapshot after every edit: one of the same content reuses the
    expansion and its analysis instead of rebuilding every repetition."""
    a, b = _stack(), _stack()
    flat_a, an_a = blocks.engine_view(a)
    flat_b, an_b = blocks.engine_view(b)
    assert flat_a is flat_b and an_a is an_b
    assert flat_a is not blocks.engine_view(_stack(repeat=4))[0]


def test_an_in_place_edit_inside_a_definition_is_seen():
    d = _stack()
    # 3 x (16*16 weights + 16 biases)
    assert memdesigner.estimate(d, mode="train", optimizer="adam").params == 3 * (16 * 16 + 16)
    d.blocks["layer"].graph.nodes["fc"].props["bias"] = False  # not through Design: no revision bump
    assert memdesigner.estimate(d, mode="train", optimizer="adam").params == 3 * 16 * 16
    d.nodes["layers"].props["repeat"] = 5
    rep = memdesigner.estimate(d, mode="train", optimizer="adam")
    assert rep.params == 5 * 16 * 16
    assert rep.peak_bytes == memdesigner.estimate(_stack(5, bias=False), mode="train", optimizer="adam").peak_bytes


def test_an_expansion_shares_no_dict_with_the_design_it_came_from():
    """Cached expansions are built from a private copy: editing the design's dicts afterwards
    cannot change what a later, equal design is given."""
    d = _stack(repeat=7)  # a content no other test expands
    flat, _ = blocks.engine_view(d)
    fc = next(n for n in flat.nodes.values() if n.type == "Linear")
    assert fc.props is not d.blocks["layer"].graph.nodes["fc"].props
    d.blocks["layer"].graph.nodes["fc"].props["bias"] = False
    assert fc.props["bias"] is True
    assert memdesigner.estimate(_stack(repeat=7), mode="inference").params == 7 * (16 * 16 + 16)

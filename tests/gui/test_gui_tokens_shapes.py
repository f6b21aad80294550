"""With the Tokens (seq_len) setting set, the shapes on the canvas are the run's: the cards at
the top level, a block card's outputs (they showed the import length, 64 here, at every Tokens
value: the canvas took the design's own analysis) and the layers inside the opened block."""

from gui_helpers import choose, type_into
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from memdesigner.importers.hf_config import design_from_config

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
         "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 2,
         "vocab_size": 512, "max_position_embeddings": 4096, "tie_word_embeddings": False}


def settled(window, qtbot):
    svc = window.service
    qtbot.waitUntil(lambda: not svc.busy and window.result is not None and window.result.gen == svc.gen, timeout=20000)
    qtbot.wait(50)  # (the second turn: canvas labels)


def double_click(window, qtbot, nid):
    view, item = window.view, window.scene.nodes[nid]
    view.centerOn(item)
    at = view.mapFromScene(item.sceneBoundingRect().center())
    QTest.mouseDClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, at)


def test_shapes_follow_the_tokens_setting(window, qtbot):
    d = design_from_config(LLAMA, seq_len=64)
    inst = next(n.id for n in d.nodes.values() if n.type == "Block")
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.set_design(d, None, layout="always")  # (laid out: the cards do not overlap)
    bar, scene = window.settings_bar, window.scene
    qtbot.waitUntil(bar.seq.isVisible, timeout=10000)
    emb = next(n.id for n in d.nodes.values() if n.type == "Embedding")
    assert scene.nodes[emb].shape_text == "1×64×64"
    type_into(qtbot, bar.seq, 512)
    settled(window, qtbot)
    assert window.result.report.sequence_length == 512
    assert scene.nodes[emb].shape_text == "1×512×64"
    assert scene.nodes[inst].shape_text.startswith("1×512×64, 1×512×16, 1×512×16 · ")  # (rotary tables too)
    double_click(window, qtbot, inst)
    qtbot.waitUntil(lambda: window.blocks_nav.path != [], timeout=5000)
    settled(window, qtbot)
    graph = window.scene.design
    q = next(n.id for n in graph.nodes.values() if n.name == "self_attn.q_proj")
    assert window.scene.nodes[q].shape_text == "1×512×64"
    ports = [n for n in graph.nodes.values() if n.type == "BlockInput"]
    assert (64, 64) in {tuple(p.props["shape"]) for p in ports}  # the definition itself is not edited


def test_block_card_follows_the_tokens_setting_in_generate(window, qtbot):
    """Generate mode has no per-block totals: the card's texts were cached on them and kept the
    first length's shapes."""
    d = design_from_config(LLAMA, seq_len=64)
    inst = next(n.id for n in d.nodes.values() if n.type == "Block")
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.set_design(d, None, layout="always")
    bar = window.settings_bar
    choose(qtbot, bar.mode, "generate")
    settled(window, qtbot)
    assert window.scene.nodes[inst].shape_text == "1×64×64, 1×64×16, 1×64×16"
    type_into(qtbot, bar.seq, 512)
    settled(window, qtbot)
    assert window.scene.nodes[inst].shape_text == "1×512×64, 1×512×16, 1×512×16"

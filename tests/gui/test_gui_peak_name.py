"""The timeline's peak label names the peak layer as the design does: inside a block instance
it showed the expanded id, the instance's call doubled up with the definition's node id
("model.layers.3.model.layers.0.mlp.mul"), not the layer ("model.layers.3.mlp.mul")."""

from gui_helpers import choose

from memdesigner.importers.hf_config import design_from_config

# a wide MLP and a small vocabulary: the peak is inside a decoder layer
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
         "intermediate_size": 2048, "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 2,
         "vocab_size": 64, "max_position_embeddings": 4096, "tie_word_embeddings": False}


def test_peak_label_names_the_layer_not_its_expanded_id(window, qtbot):
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.set_design(design_from_config(LLAMA, seq_len=256), None, layout=False)
    svc = window.service
    for mode in ("inference", "generate"):
        choose(qtbot, window.settings_bar.mode, mode)
        qtbot.waitUntil(lambda: not svc.busy and window.result.gen == svc.gen, timeout=20000)
        rep = window.result.report
        assert rep.peak_layer.startswith("model.layers.") and ".model.layers." in rep.peak_layer  # (an id)
        text = window.timeline.peak_label.textItem.toPlainText()
        name = text.split("\n")[1].rsplit(" · ", 1)[0]
        want = next(r.name for r in rep.layers if r.id == rep.peak_layer)  # the layer table's name
        assert name == want and want.count("layers.") == 1, (text, want)

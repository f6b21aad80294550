"""`memdesigner estimate` names the peak layer inside a block instance by its layer's name
(it named none: the expanded id is not a node of the saved, collapsed design)."""

from memdesigner.cli import main
from memdesigner.importers.hf_config import design_from_config
from memdesigner.io.design_file import save_design

# a wide MLP and a small vocabulary: the peak is inside a decoder layer
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
         "intermediate_size": 2048, "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 2,
         "vocab_size": 64, "max_position_embeddings": 4096, "tie_word_embeddings": False}


def test_table_names_a_peak_inside_a_block(tmp_path, capsys):
    path = tmp_path / "llama.json"
    save_design(design_from_config(LLAMA, seq_len=256), path)
    assert main(["estimate", str(path)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("peak memory"))
    assert line.endswith(" in forward at model.layers.1.mlp.mul"), line

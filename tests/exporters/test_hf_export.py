"""Export → PyTorch of `import hf` designs: the module runs, returns the logits' shape and has
the design's parameter count (tied embeddings shared, not copied)."""

import pytest

torch = pytest.importorskip("torch")

from memdesigner.exporters.torch_code import to_python  # noqa: E402
from memdesigner.importers.hf_config import design_from_config  # noqa: E402
from memdesigner.model.analysis import analyze  # noqa: E402

SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=100)


@pytest.mark.parametrize("mt,extra", [("llama", {}), ("mistral", {"sliding_window": 8}), ("phi3", {}),
                                      ("qwen2", {"tie_word_embeddings": True}),
                                      ("gemma2", {"head_dim": 16, "sliding_window": 8})], ids=lambda v: str(v))
def test_exported_module_runs_with_the_design_parameters(mt, extra):
    d = design_from_config(dict(SMALL, model_type=mt, **extra), seq_len=16)
    ns = {}
    exec(compile(to_python(d), "exported", "exec"), ns)
    m, shape = ns["make"]()
    assert shape == (16,)
    out = m(torch.randint(0, 100, (2, 16)))
    assert tuple(out.shape) == (2, 16, 100)
    an = analyze(d)
    want = sum(p.numel for nid in an.order for p in an.nodes[nid].params
               if p.trainable and p.name not in d.nodes[nid].tied)
    assert sum(p.numel() for p in m.parameters()) == want

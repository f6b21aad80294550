"""benchmarks/sweep.py shrinks every enumerated config through one table of known size keys; two
sizes that are equal (hidden 64, image 64) must both stay in it (a dict keyed by the size lost the
hidden sizes, and HF models were built at their full width)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import sweep  # noqa: E402


def test_shrink_sets_every_known_size_key_and_keeps_stage_counts():
    d = {"hidden_size": 2560, "image_size": 224, "num_hidden_layers": 32, "num_attention_heads": 32,
         "vocab_size": 32000, "bos_token_id": 31996, "depths": [3, 4, 6, 3], "hidden_sizes": [96, 192, 384, 768],
         "text_config": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008}, "patch_size": 16}
    s = sweep.shrink(d)
    assert (s["hidden_size"], s["image_size"], s["num_hidden_layers"], s["num_attention_heads"]) == (64, 64, 2, 4)
    assert (s["vocab_size"], s["bos_token_id"], s["use_cache"]) == (1000, 2, False)
    assert s["depths"] == [1, 1, 1, 1] and s["hidden_sizes"] == [32, 64, 128, 256]
    assert s["text_config"] == {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                "use_cache": False}
    assert "patch_size" not in s

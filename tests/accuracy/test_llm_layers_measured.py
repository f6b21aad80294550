"""The LLM layer types against the truth harness's measurement of the Hugging Face modules
(LlamaRMSNorm, GemmaRMSNorm, LlamaRotaryEmbedding + apply_rotary_pos_emb, Phi-3's with a full and a
3/4 partial rotary), stored in
tests/fixtures/hf/layers_measured.json by benchmarks/hf_layers_measure.py: inference and SGD
training, fp32 and bf16 autocast on the CPU, batch 4. Grouped-query attention, repeat_kv, masks
and gated MLPs are measured inside whole models by benchmarks/hf_llm.py (tests/accuracy/test_hf_llm_accuracy.py)."""

import json
from pathlib import Path

import pytest
from hf_layer_cases import BATCH, KINDS, MODES, design

import memdesigner

# byte-exact but for these: RMSNorm's training backward (+512 B: autograd frees the saved rsqrt
# per row before the pow backward's temporaries, the rule keeps it to the end of the op's
# backward), the loss scalar's dtype under AMP (2 B) and the rotary case (position ids / one
# (T, head_dim) fp32 table, 256 / 4096 B)
RESIDUAL = {"rmsnorm_llama/train-sgd-fp32": 512, "rmsnorm_gemma/train-sgd-fp32": 512,
            "rmsnorm_torch/train-sgd-fp32": 512, "rotary/inference-fp32": 256, "rotary/inference-amp": 256,
            "rmsnorm_llama/train-sgd-amp": 2, "rmsnorm_torch/train-sgd-amp": 2,
            "rotary/train-sgd-fp32": 4096, "rotary/train-sgd-amp": 4096,
            "rotary_phi3/inference-fp32": 256, "rotary_phi3/inference-amp": 256, "rotary_phi3/train-sgd-fp32": 4096,
            "rotary_phi3/train-sgd-amp": 4094, "rotary_phi3_partial/inference-fp32": 256,
            "rotary_phi3_partial/inference-amp": 256, "rotary_phi3_partial/train-sgd-fp32": 3072,
            "rotary_phi3_partial/train-sgd-amp": 5122}
FIX = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "layers_measured.json").read_text())["peaks"]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m[0])
@pytest.mark.parametrize("kind", KINDS)
def test_layer_matches_measurement(kind, mode):
    key, m, opt, amp = mode
    rep = memdesigner.estimate(design(kind), mode=m, batch=BATCH, optimizer=opt or "none", dtype="fp32", amp=amp,
                               backend="cpu")
    k = f"{kind}/{key}"
    assert abs(rep.peak_bytes - FIX[k]) <= RESIDUAL.get(k, 0), rep.peak_bytes - FIX[k]

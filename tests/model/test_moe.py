"""SparseMoE (Mixtral / Qwen2-MoE blocks): parameters as transformers names and counts them, and
the estimate against the truth harness's measurement of the transformers blocks themselves
(benchmarks/hf_moe.py -> hf_moe_truth.json; routing balanced by construction), byte for byte."""

import json
import sys
from pathlib import Path

import pytest

import memdesigner
from memdesigner.engine.settings import Settings
from memdesigner.model.analysis import analyze
from memdesigner.model.design import Design
from memdesigner.model.layers.moe import expert_rows

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
TRUTH = json.loads((BENCH / "hf_moe_truth.json").read_text())
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import hf_moe  # noqa: E402

CASES = sorted(k for k in TRUTH if not k.startswith("_"))


def test_truth_covers_both_blocks_both_impls_and_modes():
    """grouped_mm and eager measured under transformers 5.25.0, modulelist (4.x's ModuleList of
    expert MLPs) under 4.57.6; torch 2.14.1 CPU."""
    assert len(CASES) == 36
    assert {k.split("/")[1] for k in CASES} == {"grouped_mm", "eager", "modulelist"}
    assert TRUTH["_meta4"]["transformers"].startswith("4.")


@pytest.mark.parametrize("key", CASES)
def test_estimate_equals_measured_hf_block(key):
    name, impl, cfg = key.split("/")
    mode, opt, batch = next((m, o, b) for k, m, o, b in hf_moe.GRID if k == cfg)
    s = Settings(backend="cpu", batch=batch, mode=mode, optimizer=opt or "none")
    est = memdesigner.estimate(hf_moe.design_for(name, impl), s)
    assert est.params == TRUTH[key]["params"]
    assert est.peak_bytes == TRUTH[key]["peak_overall"]


def _moe(props, tokens=16, hidden=32):
    d = Design("moe")
    d.add_node("Input", {"shape": (tokens, hidden)}, id="x")
    d.add_node("SparseMoE", props, id="model.layers.0.mlp")
    d.add_edge("x", "model.layers.0.mlp")
    return d


def test_params_are_hf_names_and_shapes():
    qwen = {"num_experts": 60, "top_k": 4, "intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
            "norm_topk_prob": False}
    info = analyze(_moe(qwen, hidden=2048)).nodes["model.layers.0.mlp"]
    got = [(p.name, p.shape) for p in info.params]
    assert got == [("gate.weight", (60, 2048)), ("experts.gate_up_proj", (60, 2816, 2048)),
                   ("experts.down_proj", (60, 2048, 1408)), ("shared_expert.gate_proj.weight", (5632, 2048)),
                   ("shared_expert.up_proj.weight", (5632, 2048)), ("shared_expert.down_proj.weight", (2048, 5632)),
                   ("shared_expert_gate.weight", (1, 2048))]
    # Qwen1.5-MoE-A2.7B's sparse block: 60 x 3 x 2048 x 1408 + router + shared expert + its gate
    assert sum(p.numel for p in info.params) == 60 * 3 * 2048 * 1408 + 60 * 2048 + 3 * 2048 * 5632 + 2048
    mixtral = analyze(_moe({"num_experts": 8, "top_k": 2, "intermediate_size": 14336}, hidden=4096))
    assert sum(p.numel for p in mixtral.nodes["model.layers.0.mlp"].params) == 8 * 3 * 4096 * 14336 + 8 * 4096


def test_balanced_rows_and_capacity_factor():
    assert expert_rows(16, {"num_experts": 4, "top_k": 2, "capacity_factor": 1.0}) == [8, 8, 8, 8]
    assert expert_rows(5, {"num_experts": 4, "top_k": 2, "capacity_factor": 1.0}) == [3, 3, 2, 2]
    # capacity 1.5: ceil(1.5 x 32 / 4) = 12 rows in every expert's buffer, at most one per token
    assert expert_rows(16, {"num_experts": 4, "top_k": 2, "capacity_factor": 1.5}) == [12, 12, 12, 12]
    assert expert_rows(4, {"num_experts": 2, "top_k": 2, "capacity_factor": 4.0}) == [4, 4]


def test_capacity_factor_grows_the_gathered_rows():
    """Inference peak of the grouped_mm path: 1.5x the rows adds half of every row-sized tensor
    (gathered rows, expert activations, weighted outputs) at the block's peak."""
    base = {"num_experts": 4, "top_k": 2, "intermediate_size": 48}
    s = Settings(backend="cpu", batch=2, mode="inference")
    p1 = memdesigner.estimate(_moe(base), s).peak_bytes
    p15 = memdesigner.estimate(_moe(dict(base, capacity_factor=1.5)), s).peak_bytes
    # rows 64 -> 96: at the gate's peak, sorted ids and permutation (2 x 8 B; the token index
    # died after the gather), gathered rows (32 x 4 B), weights and histc input (2 x 4 B),
    # gate_up (96 x 4 B) and two activations (2 x 48 x 4 B)
    per_row = 2 * 8 + 32 * 4 + 2 * 4 + 96 * 4 + 2 * 48 * 4
    assert p15 - p1 == 32 * per_row


def test_topk_larger_than_experts_is_a_node_error():
    an = analyze(_moe({"num_experts": 2, "top_k": 3}))
    assert [i.field for i in an.issues] == ["top_k"]


def test_params_match_transformers_when_installed():
    pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from transformers import Qwen2MoeConfig
    from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock

    cfg = Qwen2MoeConfig(hidden_size=64, moe_intermediate_size=24, shared_expert_intermediate_size=40,
                         num_experts=6, num_experts_per_tok=2)
    with torch.device("meta"):
        block = Qwen2MoeSparseMoeBlock(cfg)
    info = analyze(_moe({"num_experts": 6, "top_k": 2, "intermediate_size": 24,
                         "shared_expert_intermediate_size": 40}, hidden=64)).nodes["model.layers.0.mlp"]
    assert [(p.name, p.shape) for p in info.params] == [(n, tuple(p.shape)) for n, p in block.named_parameters()]



# The blocks of hf_moe.py with every MoE weight frozen (requires_grad_(False), as a LoRA base), the
# input still requiring grad, SGD, batch 2: peak_overall measured with shared/truth/measure.py
# (method a, torch 2.14.1 CPU, transformers 5.25.0). A frozen 3-D expert weight gets no
# select_backward gradients nor their sums (before: +85.7 KB / +47.1 KB over). What is left over
# (+22 ... +26 KB, as grouped_mm) is what the block keeps for weight gradients: PyTorch keeps
# none for frozen weights, but peft's adapters on the experts and router (not modelled inside
# SparseMoE yet) read those inputs, so the block keeps them (LoRA on 4.57 Mixtral -3.0 -> -12.3 %
# without).
FROZEN_SGD = {"mixtral_e4k2/eager": 155104, "mixtral_e4k2/grouped_mm": 165144,
              "qwen2moe_e4k2/eager": 149376, "qwen2moe_e4k2/grouped_mm": 157208}


@pytest.mark.parametrize("case", sorted(FROZEN_SGD))
def test_frozen_experts_get_no_gradient_sums(case):
    name, impl = case.split("/")
    s = Settings(backend="cpu", batch=2, mode="train", optimizer="sgd", freeze=("moe",))
    over = memdesigner.estimate(hf_moe.design_for(name, impl), s).peak_bytes - FROZEN_SGD[case]
    assert 0 <= over <= 26 * 1024, over

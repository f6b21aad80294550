"""Mixture-of-experts blocks of Hugging Face transformers (MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock)
measured with the truth harness (shared/truth/measure.py, method a), against memdesigner's SparseMoE
layer type.

Each case is ``Linear(H, H) -> + position table (T, H) -> MoE block`` (the Linear makes the block's
input require grad, as inside a model). The router reads only the position table, which is set so
that token t goes to experts (t*k .. t*k+k-1) mod E: routing is exactly balanced (tokens x top_k /
num_experts per expert), whatever the random input. The experts run as transformers runs them:
``grouped_mm`` (what a PreTrainedModel selects by default) or ``eager`` (the per-expert loop) under
transformers 5.x, ``modulelist`` (a ModuleList of expert MLPs) under 4.x: run --measure once per major.

    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/hf_moe.py --measure   # -> benchmarks/hf_moe_truth.json
    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/hf_moe.py             # compare
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TRUTH_JSON = HERE / "hf_moe_truth.json"
TRUTH_DIR = Path("/work/shared/truth")

# name -> (family, config kwargs, seq_len)
CASES = {
    "mixtral_e4k2": ("mixtral", dict(hidden_size=32, intermediate_size=48, num_local_experts=4,
                                     num_experts_per_tok=2), 16),
    "mixtral_e8k2": ("mixtral", dict(hidden_size=24, intermediate_size=40, num_local_experts=8,
                                     num_experts_per_tok=2), 12),
    "qwen2moe_e4k2": ("qwen2_moe", dict(hidden_size=32, moe_intermediate_size=24, shared_expert_intermediate_size=56,
                                        num_experts=4, num_experts_per_tok=2, norm_topk_prob=False), 16),
    "qwen2moe_e6k3_norm": ("qwen2_moe", dict(hidden_size=24, moe_intermediate_size=20,
                                             shared_expert_intermediate_size=40, num_experts=6,
                                             num_experts_per_tok=3, norm_topk_prob=True), 8),
}
IMPLS = ("grouped_mm", "eager", "modulelist")
# what each transformers major runs: 5.x fuses the experts in 3-D weights; 4.x (measured 4.57.6)
# keeps a ModuleList of expert MLPs, each with its own Linear weights
IMPLS_OF_MAJOR = {5: ("grouped_mm", "eager"), 4: ("modulelist",)}
# (key, mode, optimizer, batch)
GRID = [("inference-b2", "inference", None, 2), ("train-sgd-b2", "train", "sgd", 2),
        ("train-adam-b2", "train", "adam", 2)]


def layer_props(name: str, impl: str) -> dict:
    """The SparseMoE props of a case, as an HF config builder would set them."""
    fam, kw, _t = CASES[name]
    if fam == "mixtral":
        return {"num_experts": kw["num_local_experts"], "top_k": kw["num_experts_per_tok"],
                "intermediate_size": kw["intermediate_size"], "norm_topk_prob": True,
                "shared_expert_intermediate_size": 0, "impl": impl}
    return {"num_experts": kw["num_experts"], "top_k": kw["num_experts_per_tok"],
            "intermediate_size": kw["moe_intermediate_size"], "norm_topk_prob": kw["norm_topk_prob"],
            "shared_expert_intermediate_size": kw["shared_expert_intermediate_size"], "impl": impl}


def design_for(name: str, impl: str):
    """The memdesigner design of a case: Input -> Linear -> PositionEmbedding -> SparseMoE."""
    from memdesigner.model.design import Design

    _fam, kw, t = CASES[name]
    h = kw["hidden_size"]
    d = Design(name=f"{name}_{impl}")
    d.add_node("Input", {"shape": (t, h)}, id="x", name="x")
    d.add_node("Linear", {"out_features": h}, id="proj", name="proj")
    d.add_node("PositionEmbedding", {}, id="pos", name="pos")
    d.add_node("SparseMoE", layer_props(name, impl), id="moe", name="moe")
    d.add_edge("x", "proj")
    d.add_edge("proj", "pos")
    d.add_edge("pos", "moe")
    return d


def factory_for(name: str, impl: str):
    def make():
        import torch
        from torch import nn

        fam, kw, t = CASES[name]
        if fam == "mixtral":
            from transformers import MixtralConfig
            from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock as Block
            cfg = MixtralConfig(**kw)
            e = kw["num_local_experts"]
        else:
            from transformers import Qwen2MoeConfig
            from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock as Block
            cfg = Qwen2MoeConfig(**kw)
            e = kw["num_experts"]
        cfg._experts_implementation = impl
        tuple_out = impl == "modulelist"  # 4.x blocks return (hidden states, router logits)
        k, h = kw["num_experts_per_tok"], kw["hidden_size"]

        class Case(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(h, h)
                self.pos = nn.Parameter(torch.zeros(1, t, h))
                self.moe = Block(cfg)
                with torch.no_grad():
                    self.proj.weight.mul_(0.01)
                    if not tuple_out:  # a bare 5.x experts module holds torch.empty weights
                        self.moe.experts.gate_up_proj.normal_(0.0, 0.02)
                        self.moe.experts.down_proj.normal_(0.0, 0.02)
                    self.moe.gate.weight.zero_()
                    for ex in range(e):
                        self.moe.gate.weight[ex, ex] = 1.0
                    for tok in range(t):
                        for j in range(k):
                            self.pos[0, tok, (tok * k + j) % e] = 10.0

            def forward(self, x):
                y = self.moe(self.proj(x) + self.pos)
                return y[0] if tuple_out else y

        return Case(), (t, h)
    return make


def measure_all(out: Path) -> dict:
    sys.path.insert(0, str(TRUTH_DIR))
    import transformers
    from measure import measure

    major = int(transformers.__version__.split(".")[0])
    truth = json.loads(out.read_text()) if out.exists() else {}
    for name in CASES:
        for impl in IMPLS_OF_MAJOR[major]:
            for key, mode, opt, batch in GRID:
                k = f"{name}/{impl}/{key}"
                rec = measure(factory_for(name, impl), batch=batch, mode=mode, optimizer=opt or "sgd",
                              dtype="fp32", methods="a", name=k)
                a = rec["method_a"]
                truth[k] = {"params": rec["params"], "peak_overall": a["peak_overall"], "steady": a["steady"],
                            "torch": rec["torch"]}
                print(k, rec["params"], a["peak_overall"], flush=True)
    truth["_meta" if major == 5 else f"_meta{major}"] = {"transformers": transformers.__version__,
                      "routing": "balanced by construction (router reads a position table)"}
    out.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")
    return truth


def compare(truth: dict) -> list:
    import memdesigner
    from memdesigner.engine.settings import Settings

    rows = []
    for name in CASES:
        for impl in IMPLS:
            for key, mode, opt, batch in GRID:
                rec = truth.get(f"{name}/{impl}/{key}")
                if rec is None:
                    continue
                s = Settings(backend="cpu", batch=batch, mode=mode, optimizer=opt or "none")
                est = memdesigner.estimate(design_for(name, impl), s)
                err = (est.peak_bytes - rec["peak_overall"]) / rec["peak_overall"]
                rows.append((f"{name}/{impl}/{key}", rec["peak_overall"], est.peak_bytes, err,
                             rec["params"], est.params))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help="measure with transformers into the truth JSON")
    args = ap.parse_args(argv)
    truth = measure_all(TRUTH_JSON) if args.measure else json.loads(TRUTH_JSON.read_text())
    rows = compare(truth)
    print(f"{'case':44s} {'measured':>10s} {'estimate':>10s} {'error':>8s}  params")
    for k, m, e, err, p, ep in rows:
        print(f"{k:44s} {m:10d} {e:10d} {err * 100:7.2f}%  {p}{'' if p == ep else f' (design {ep})'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

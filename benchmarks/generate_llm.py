"""Generation of Llama (grouped-query attention) and Qwen2 (tied embeddings) designs from
`memdesigner import hf`, against transformers' ``model.generate(ids, attention_mask=mask,
max_new_tokens=N, do_sample=False, use_cache=True)`` on the CPU, measured with the truth harness's
storage tracker (weights included), like benchmarks/generate.py does for GPT-2.

    /work/bench-venv/bin/python benchmarks/generate_llm.py --measure   # rewrite generate_llm_truth.json
    /work/bench-venv/bin/python benchmarks/generate_llm.py             # compare with the stored truths
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
TRUTH = HERE / "generate_llm_truth.json"

_SMALL = dict(vocab_size=2048, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=512)
CONFIGS = {
    "llama-256x4-gqa": ("llama", "LlamaForCausalLM", "LlamaConfig", dict(_SMALL)),
    "qwen2-256x4-tied": ("qwen2", "Qwen2ForCausalLM", "Qwen2Config", dict(_SMALL, tie_word_embeddings=True)),
}
CASES = [{"config": c, "batch": b, "prompt": 32, "new": n, "cache": "dynamic"}
         for c in CONFIGS for b in (1, 4) for n in (16, 64)]
CASES += [{"config": c, "batch": 4, "prompt": 32, "new": 16, "cache": "static"} for c in CONFIGS]


def _measure() -> dict:
    import torch
    import transformers

    sys.path.insert(0, "/work/shared/truth")
    from measure import DispatchStorageTracker

    out = {"generate": []}
    for case in CASES:
        _mt, mcls, ccls, cfg = CONFIGS[case["config"]]
        torch.manual_seed(0)
        model = getattr(transformers, mcls)(getattr(transformers, ccls)(**cfg)).eval()
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
        ids = torch.randint(0, cfg["vocab_size"], (case["batch"], case["prompt"]))
        am = torch.ones_like(ids)
        kw = {"cache_implementation": "static"} if case["cache"] == "static" else {}
        tr = DispatchStorageTracker("cpu")
        with torch.no_grad():
            tr.register(list(model.parameters()) + list(model.buffers()), "param")
            tr.register([ids, am], "input")
            with tr:
                res = model.generate(ids, attention_mask=am, max_new_tokens=case["new"], do_sample=False,
                                     use_cache=True, **kw)
        del res
        out["generate"].append({**case, "peak": tr.peak})
        print(case, tr.peak, flush=True)
    out["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    return out


def estimate_case(case: dict) -> int:
    import memdesigner
    from memdesigner.importers.hf_config import design_from_config

    mt, _mcls, _ccls, cfg = CONFIGS[case["config"]]
    design = design_from_config(dict(cfg, model_type=mt), seq_len=case["prompt"])
    return memdesigner.estimate(design, mode="generate", batch=case["batch"], backend="cpu",
                                new_tokens=case["new"], kv_cache=case["cache"]).peak_bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help="measure with transformers and rewrite the truth JSON")
    a = ap.parse_args(argv)
    if a.measure:
        TRUTH.write_text(json.dumps(_measure(), indent=1) + "\n")
    truth = json.loads(TRUTH.read_text())
    errs = []
    print(f"{'config':18} {'cache':8} {'B':>2} {'prompt':>6} {'new':>4} {'measured':>11} {'estimate':>11} {'error':>8}")
    for case in truth["generate"]:
        est = estimate_case(case)
        err = (est - case["peak"]) / case["peak"]
        errs.append(err)
        print(f"{case['config']:18} {case['cache']:8} {case['batch']:>2} {case['prompt']:>6} {case['new']:>4} "
              f"{case['peak']:>11,} {est:>11,} {err * 100:>7.2f}%")
    print(f"\n{len(errs)} cases: median |error| {statistics.median(abs(e) for e in errs) * 100:.2f} %, worst "
          f"{max(abs(e) for e in errs) * 100:.2f} %, largest under-estimate {max(0.0, -min(errs)) * 100:.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

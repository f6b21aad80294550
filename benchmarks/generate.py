"""Generation (prefill + decode with a KV cache) against transformers' ``model.generate`` on the CPU.

    python benchmarks/generate.py              # estimates vs benchmarks/generate_truth.json
    python benchmarks/generate.py --measure    # re-measure (needs transformers; the bench venv)

Truth: the shared harness's DispatchStorageTracker (live tensor storages, weights included) around
``model.generate(ids, attention_mask=ones, max_new_tokens=N, do_sample=False, use_cache=True)``
of a GPT2LMHeadModel built from its config (random weights, eval mode, no_grad); the static cache
is ``cache_implementation="static"``. ``forward`` cases are a plain ``model(ids, use_cache=...)``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRUTH = HERE / "generate_truth.json"
CONFIGS = {
    "gpt2-256x4": {"n_embd": 256, "n_layer": 4, "n_head": 4, "vocab_size": 2048},
    "gpt2-128x2-v8k": {"n_embd": 128, "n_layer": 2, "n_head": 2, "vocab_size": 8192},
}
CASES = [
    {"config": "gpt2-256x4", "batch": b, "prompt": p, "new": n, "cache": c}
    for c in ("dynamic", "static") for b in (1, 4) for p in (32, 128) for n in (16, 64)
] + [  # the decode steps above the prefill (a short prompt), a vocabulary-heavy config, bf16
    {"config": "gpt2-256x4", "batch": 4, "prompt": 8, "new": 64, "cache": c} for c in ("dynamic", "static")
] + [
    {"config": "gpt2-128x2-v8k", "batch": b, "prompt": p, "new": n, "cache": c}
    for (b, p, n) in ((4, 32, 16), (1, 128, 64), (4, 8, 64)) for c in ("dynamic", "static")
] + [
    {"config": "gpt2-256x4", "batch": 4, "prompt": 32, "new": 16, "cache": c, "dtype": "bf16"}
    for c in ("dynamic", "static")
]
FORWARD = [{"config": "gpt2-256x4", "batch": b, "prompt": 128, "use_cache": u} for b in (1, 4) for u in (False, True)]


def _measure(only: str = "") -> dict:
    import torch

    sys.path.insert(0, "/work/shared/truth")
    from measure import DispatchStorageTracker
    from transformers import GPT2Config, GPT2LMHeadModel

    def model_for(name, dtype="fp32"):
        torch.manual_seed(0)
        m = GPT2LMHeadModel(GPT2Config(**CONFIGS[name])).eval()
        m = m.to({"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype])
        m.generation_config.eos_token_id = None
        m.generation_config.pad_token_id = 0
        return m

    def track(model, ids, fn):
        tr = DispatchStorageTracker("cpu")
        calls = []

        def pre(mod, a, k):
            if tr.phase:
                tr.exit(*tr.phase)
            tr.enter(len(calls), "prefill" if not calls else "decode")
            calls.append(1)

        hook = model.register_forward_pre_hook(pre, with_kwargs=True)
        am = torch.ones_like(ids)
        with torch.no_grad():
            tr.register(list(model.parameters()) + list(model.buffers()), "param")
            tr.register([ids, am], "input")
            with tr:
                out = fn(ids, am)
            if tr.phase:
                tr.exit(*tr.phase)
        del out
        hook.remove()
        steps = [v["peak"] for _, v in sorted(tr.phase_stats.items())]
        return tr.peak, steps

    out = {"generate": [], "forward": []}
    for case in CASES:
        if only and only not in (case["cache"], "generate"):
            continue
        model = model_for(case["config"], case.get("dtype", "fp32"))
        ids = torch.randint(0, CONFIGS[case["config"]]["vocab_size"], (case["batch"], case["prompt"]))
        kw = {"cache_implementation": "static"} if case["cache"] == "static" else {}
        peak, steps = track(model, ids, lambda i, a, model=model, case=case, kw=kw: model.generate(
            i, attention_mask=a, max_new_tokens=case["new"], do_sample=False, use_cache=True, **kw))
        out["generate"].append({**case, "peak": peak, "prefill_peak": steps[0], "last_step_peak": steps[-1]})
        print(case, peak, flush=True)
    for case in FORWARD if only in ("", "forward") else ():
        model = model_for(case["config"])
        ids = torch.randint(0, CONFIGS[case["config"]]["vocab_size"], (case["batch"], case["prompt"]))
        peak, _ = track(model, ids, lambda i, a, model=model, case=case: model(i, use_cache=case["use_cache"]))
        out["forward"].append({**case, "peak": peak})
        print(case, peak, flush=True)
    import transformers

    out["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    return out


def estimate_case(case: dict):
    from memdesigner.engine.generate import generate
    from memdesigner.engine.settings import Settings
    from memdesigner.importers.hf_config import gpt2

    design = gpt2.build(CONFIGS[case["config"]], seq_len=case["prompt"], task="causal-lm")
    s = Settings(mode="generate", batch=case["batch"], backend="cpu", new_tokens=case["new"], kv_cache=case["cache"],
                 dtype=case.get("dtype", "fp32"))
    return generate(design, s)


def estimate_forward(case: dict) -> int:
    from memdesigner.engine.estimate import estimate
    from memdesigner.importers.hf_config import gpt2

    design = gpt2.build(CONFIGS[case["config"]], seq_len=case["prompt"], task="causal-lm")
    if case["use_cache"]:
        from memdesigner.engine.generate import with_cache

        design = with_cache(design, "dynamic")
    return estimate(design, mode="inference", batch=case["batch"], backend="cpu").peak_bytes


def compare(truth: dict) -> list[dict]:
    rows = []
    for case in truth["generate"]:
        rep = estimate_case(case)
        rows.append({**case, "kind": "generate", "est": rep.peak_bytes, "err": (rep.peak_bytes - case["peak"]) / case["peak"]})
        if case.get("last_step_peak"):  # the last decode step alone (the cache at its largest)
            last, est = case["last_step_peak"], rep.phase_peaks["decode"]
            rows.append({**case, "kind": "decode", "peak": last, "est": est, "err": (est - last) / last})
    for case in truth["forward"]:
        est = estimate_forward(case)
        rows.append({**case, "kind": "forward", "est": est, "err": (est - case["peak"]) / case["peak"]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help="measure with transformers and rewrite the truth JSON")
    a = ap.parse_args(argv)
    if a.measure:
        TRUTH.write_text(json.dumps(_measure(), indent=1) + "\n")
    truth = json.loads(TRUTH.read_text())
    rows = compare(truth)
    print(f"{'kind':8} {'config':15} {'cache':13} {'B':>2} {'prompt':>6} {'new':>4} {'measured':>11} {'estimate':>11} "
          f"{'error':>8}")
    for r in rows:
        cache = r.get("cache") or ("use_cache" if r.get("use_cache") else "no cache")
        cache += f" {r['dtype']}" if r.get("dtype") else ""
        print(f"{r['kind']:8} {r['config']:15} {cache:13} {r['batch']:>2} {r['prompt']:>6} {r.get('new', ''):>4} "
              f"{r['peak']:>11,} {r['est']:>11,} {r['err'] * 100:>7.2f}%")
    errs = [abs(r["err"]) for r in rows]
    print(f"\n{len(rows)} cases: median |error| {statistics.median(errs) * 100:.2f} %, worst {max(errs) * 100:.2f} %, "
          f"largest under-estimate {max(0.0, -min(r['err'] for r in rows)) * 100:.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

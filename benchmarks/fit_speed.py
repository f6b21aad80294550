"""How long "Make it fit" takes on a Llama-3-8B design (`import hf resources/examples/hf/llama-3-8b.json`,
2,048 tokens; issue 9 target: <= 1 s over 20+ candidate changes), and one estimate of the same design
for scale (the advice is a few dozen of them).

    python3 benchmarks/fit_speed.py [--repeat 5]

Prints JSON: per scenario the median and p95 seconds, the changes estimated (each a complete
settings set), the suggestions kept (those that lower the peak), the engine runs (changes plus
the points of the exact searches: fewest GPUs, longest sequence, the checkpoint plan's layers),
and the median milliseconds of one estimate of the design as given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import memdesigner as md  # noqa: E402
from memdesigner.engine.fit import make_it_fit  # noqa: E402
from memdesigner.importers.hf_config import import_file  # noqa: E402

SCENARIOS = {
    # activations too big: planned checkpointing, LoRA/QLoRA + checkpointing, accumulation, sequence
    "h100-80gb bf16 AdamW batch 8": dict(device="h100-80gb", mode="train", optimizer="adamw", dtype="bf16", batch=8),
    # fp32 Adam: every precision, optimizer and pair of them, plans on top
    "h100-80gb fp32 Adam batch 4": dict(device="h100-80gb", mode="train", optimizer="adam", dtype="fp32", batch=4),
    # model states too big: optimizers, LoRA/QLoRA, sharding, offload
    "a100-40gb bf16 AdamW batch 1": dict(device="a100-40gb", mode="train", optimizer="adamw", dtype="bf16", batch=1),
}


def _stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"median_s": round(statistics.median(xs), 3), "p95_s": round(xs[int(0.95 * (len(xs) - 1))], 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    design = import_file(HERE.parent / "resources" / "examples" / "hf" / "llama-3-8b.json", seq_len=2048)
    out = {"design": "llama-3-8b, 2,048 tokens", "repeat": args.repeat, "scenarios": {}}
    for name, kw in SCENARIOS.items():
        make_it_fit(design, **kw)  # warm: rule caches, imports
        times, advice = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            advice = make_it_fit(design, **kw)
            times.append(time.perf_counter() - t0)
        one = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            md.estimate(design, **kw)
            one.append(time.perf_counter() - t0)
        out["scenarios"][name] = {**_stats(times), "changes_estimated": advice.candidates,
                                  "suggestions": len(advice.suggestions), "engine_runs": advice.engine_runs,
                                  "one_estimate_ms": round(1000 * statistics.median(one), 1)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

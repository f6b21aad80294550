"""How long "Make it fit" takes on a Llama-3-8B design (`import hf resources/examples/hf/llama-3-8b.json`,
2,048 tokens; issue 9 target: <= 1 s over 20+ candidate changes), optionally against another
checkout (the engine before), the two measured alternately in one run so that both see the same
load on a shared machine.

    python3 benchmarks/fit_speed.py [--repeat 7] [--against /path/to/old/checkout] [--json]

Per scenario: median and p95 seconds (wall clock, and the worker's CPU time), the changes
estimated (each a complete settings set), the suggestions kept (those that lower the peak) and
the engine runs (changes plus the points of the exact searches: fewest GPUs, longest sequence,
the checkpoint plans' layers). Each engine runs in its own worker process (``--worker``, with
PYTHONPATH at its checkout), warmed once per scenario; the machine's load average is printed
before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

SCENARIOS = {
    # activations too big: planned checkpointing, LoRA/QLoRA + checkpointing, accumulation, sequence
    "h100-80gb bf16 AdamW batch 8": dict(device="h100-80gb", mode="train", optimizer="adamw", dtype="bf16", batch=8),
    # fp32 Adam: every precision, optimizer and pair of them, plans on top
    "h100-80gb fp32 Adam batch 4": dict(device="h100-80gb", mode="train", optimizer="adam", dtype="fp32", batch=4),
    # model states too big: optimizers, LoRA/QLoRA, sharding, offload
    "a100-40gb bf16 AdamW batch 1": dict(device="a100-40gb", mode="train", optimizer="adamw", dtype="bf16", batch=1),
}


def _worker() -> int:
    """Read scenario names from stdin, answer each with one JSON line of its figures."""
    from memdesigner.engine.fit import make_it_fit
    from memdesigner.importers.hf_config import import_file

    design = import_file(ROOT / "resources" / "examples" / "hf" / "llama-3-8b.json", seq_len=2048)
    for name in SCENARIOS:
        make_it_fit(design, **SCENARIOS[name])  # warm: rule caches, imports
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        name = line.strip()
        w0, c0 = time.perf_counter(), time.process_time()
        advice = make_it_fit(design, **SCENARIOS[name])
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        print(json.dumps({"wall": wall, "cpu": cpu, "changes": advice.candidates,
                          "suggestions": len(advice.suggestions), "runs": advice.engine_runs}), flush=True)
    return 0


class _Engine:
    def __init__(self, checkout: Path):
        env = dict(os.environ, PYTHONPATH=str(checkout))
        self.p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"], env=env,
                                  cwd=str(ROOT), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert json.loads(self.p.stdout.readline())["ready"]

    def run(self, name: str) -> dict:
        self.p.stdin.write(name + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def _stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"median_s": round(statistics.median(xs), 3), "p95_s": round(xs[round(0.95 * (len(xs) - 1))], 3)}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--against", help="another checkout: its engine is measured alternately in the same run")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker()
    engines = {"after": _Engine(ROOT)}
    if args.against:
        engines = {"before": _Engine(Path(args.against).resolve()), **engines}
    load_before = _load()
    res = {e: {n: [] for n in SCENARIOS} for e in engines}
    order = list(engines)
    for r in range(args.repeat):
        for name in SCENARIOS:
            for e in (order if r % 2 == 0 else order[::-1]):
                res[e][name].append(engines[e].run(name))
    for eng in engines.values():
        eng.close()
    out = {"design": "llama-3-8b, 2,048 tokens", "repeat": args.repeat, "load_before": load_before,
           "load_after": _load(), "scenarios": {}}
    for name in SCENARIOS:
        row = {}
        for e in engines:
            xs = res[e][name]
            row[e] = {**_stats([x["wall"] for x in xs]), "cpu": _stats([x["cpu"] for x in xs]),
                      "changes_estimated": xs[-1]["changes"], "suggestions": xs[-1]["suggestions"],
                      "engine_runs": xs[-1]["runs"]}
        out["scenarios"][name] = row
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"llama-3-8b, 2,048 tokens; {args.repeat} repeats, alternating; load average before "
          f"{out['load_before']}, after {out['load_after']}\n")
    print("| scenario | engine | median s | p95 s | CPU median s | CPU p95 s | changes | suggestions | engine runs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, row in out["scenarios"].items():
        for e, v in row.items():
            print(f"| {name} | {e} | {v['median_s']:.3f} | {v['p95_s']:.3f} | {v['cpu']['median_s']:.3f} | "
                  f"{v['cpu']['p95_s']:.3f} | {v['changes_estimated']} | {v['suggestions']} | {v['engine_runs']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long one estimate takes on generated 1,000- and 10,000-op designs (targets: <= 10 ms and
<= 100 ms, inference and Adam training), optionally against another checkout (the engine before).

    python3 benchmarks/engine_speed.py [--layers 1000,10000] [--repeat 30] [--against /path/to/old/checkout]

Prints a table of median and p95 milliseconds of the process's CPU time (the machine is shared;
``--wall``: wall clock; ``--json``: the figures as JSON).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import memdesigner as md  # noqa: E402
from memdesigner.model.design import Design  # noqa: E402


def make_design(n_layers: int) -> Design:
    """Residual MLP-ish CNN mix: conv/bn/relu blocks with adds, then a dense head."""
    d = Design(f"generated-{n_layers}")
    d.add_node("Input", {"shape": (64, 32, 32)}, id="in")
    prev = "in"
    i = 0
    while len(d.nodes) < n_layers - 3:
        a = d.add_node("Conv2d", {"out_channels": 64, "kernel": 3, "padding": 1, "bias": False}, id=f"c{i}").id
        d.add_edge(prev, a)
        b = d.add_node("BatchNorm2d", {}, id=f"b{i}").id
        d.add_edge(a, b)
        r = d.add_node("ReLU", {"inplace": True}, id=f"r{i}").id
        d.add_edge(b, r)
        s = d.add_node("Add", {}, id=f"s{i}").id
        d.add_edge(r, s, dst_port=0)
        d.add_edge(prev, s, dst_port=1)
        prev = s
        i += 1
    g = d.add_node("AdaptiveAvgPool2d", {}, id="gap").id
    d.add_edge(prev, g)
    f = d.add_node("Flatten", {}, id="flat").id
    d.add_edge(g, f)
    h = d.add_node("Linear", {"out_features": 10}, id="head").id
    d.add_edge(f, h)
    return d


CLOCK = time.process_time  # CPU seconds of this process: the machine is shared (--wall: wall clock)


def timeit(fn, repeat: int) -> dict:
    fn()
    times = []
    for _ in range(repeat):
        t0 = CLOCK()
        fn()
        times.append((CLOCK() - t0) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 2), "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2)}


def measure(layers: list[int], repeat: int) -> dict:
    out = {}
    for n in layers:
        d = make_design(n)
        reps = max(5, repeat * 1000 // n) if n > 1000 else repeat
        out[str(n)] = {
            "ops": len(d.nodes),
            "inference": timeit(lambda d=d: md.estimate(d, mode="inference", batch=32), reps),
            "train_adam": timeit(lambda d=d: md.estimate(d, mode="train", batch=32, optimizer="adam"), reps),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="1000,10000", help="comma-separated design sizes")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--against", help="another checkout: its engine is measured in the same run")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--wall", action="store_true", help="wall-clock time instead of the process's CPU time")
    args = ap.parse_args()
    if args.wall:
        global CLOCK
        CLOCK = time.perf_counter
    layers = [int(x) for x in args.layers.split(",")]
    ours = measure(layers, args.repeat)
    if args.json:
        print(json.dumps(ours))
        return
    from _against import run_against, speedup

    before = run_against(args.against, __file__, ["--layers", args.layers, "--repeat", str(args.repeat)]
                         + (["--wall"] if args.wall else [])) if args.against else None
    print(f"{'ops':>6} {'mode':<11} {'median ms':>10} {'p95 ms':>8}" +
          (f" {'before median':>14} {'before p95':>11} {'speedup':>8}" if before else ""))
    for n, r in ours.items():
        for mode in ("inference", "train_adam"):
            a = r[mode]
            line = f"{r['ops']:>6} {mode:<11} {a['median_ms']:>10} {a['p95_ms']:>8}"
            if before:
                b = before[n][mode]
                line += f" {b['median_ms']:>14} {b['p95_ms']:>11} {speedup(b['median_ms'], a['median_ms']):>8}"
            print(line)


if __name__ == "__main__":
    main()

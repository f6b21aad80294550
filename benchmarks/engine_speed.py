"""How long one estimate takes on a generated 1,000-layer design (target: <= 10 ms).

    python3 benchmarks/engine_speed.py [--layers 1000] [--repeat 30]

Prints JSON: median and p95 milliseconds for inference and for Adam training.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import memdesigner as md
from memdesigner.model.design import Design


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


def timeit(fn, repeat: int) -> dict:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 2), "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    d = make_design(args.layers)
    out = {"layers": len(d.nodes)}
    out["inference"] = timeit(lambda: md.estimate(d, mode="inference", batch=32), args.repeat)
    out["train_adam"] = timeit(lambda: md.estimate(d, mode="train", batch=32, optimizer="adam"), args.repeat)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

"""One estimate's CPU time, this engine against another checkout's, alternating in one run: two
worker processes (one per checkout) take turns, so a load spike on the shared machine hits both.

    python benchmarks/engine_ab.py --against /path/to/old/checkout [--layers 1000,10000] [--rounds 15] [--read]

Prints median and p95 milliseconds (process CPU time) per design size and mode, before and after.
``--read``: each timed estimate also reads the report's timeline and layer rows (as the window's
worker and ``--format json`` do), which an engine may build only when first read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
READ = "--read" in sys.argv
MODES = {"inference": dict(mode="inference", batch=32), "train_adam": dict(mode="train", batch=32, optimizer="adam")}


def _worker() -> None:
    """Reads 'layers mode repeat' lines; answers with the CPU milliseconds of each estimate."""
    import time

    sys.path.insert(0, str(HERE))
    from engine_speed import make_design

    import memdesigner as md

    designs: dict = {}
    for line in sys.stdin:
        n, mode, reps = line.split()
        d = designs.get(n) or designs.setdefault(n, make_design(int(n)))
        kw = MODES[mode]
        out = []
        for _ in range(int(reps)):
            t0 = time.process_time()
            rep = md.estimate(d, **kw)
            if READ:
                rep.timeline, rep.layers  # noqa: B018
            del rep
            out.append((time.process_time() - t0) * 1000)
        print(json.dumps(out), flush=True)


def _start(root: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(Path(root).resolve()))
    return subprocess.Popen([sys.executable, __file__, "--worker", *(["--read"] if READ else [])], env=env, cwd=root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _ask(p: subprocess.Popen, n: int, mode: str, reps: int) -> list:
    p.stdin.write(f"{n} {mode} {reps}\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def _stats(ts: list) -> tuple:
    ts = sorted(ts)
    return round(statistics.median(ts), 2), round(ts[int(0.95 * (len(ts) - 1))], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", help="the other checkout")
    ap.add_argument("--layers", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=15, help="alternations per size and mode")
    ap.add_argument("--read", action="store_true", help="also read each report's timeline and layer rows")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        _worker()
        return
    ours, theirs = _start(str(HERE.parent)), _start(a.against)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (2 cores)")
    print(f"{'ops':>6} {'mode':<11} {'before median':>13} {'before p95':>10} {'after median':>12} {'after p95':>9}"
          f" {'speedup':>7}")
    for n in [int(x) for x in a.layers.split(",")]:
        reps = 3 if n <= 1000 else 1
        for mode in MODES:
            for p in (ours, theirs):
                _ask(p, n, mode, 1)  # warm: the rule caches, the design
            new, old = [], []
            for _ in range(a.rounds):
                old += _ask(theirs, n, mode, reps)
                new += _ask(ours, n, mode, reps)
            (om, op), (nm, np_) = _stats(old), _stats(new)
            print(f"{n:>6} {mode:<11} {om:>13} {op:>10} {nm:>12} {np_:>9} {om / nm:>6.2f}x", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (2 cores)")
    for p in (ours, theirs):
        p.stdin.close()
        p.wait()


if __name__ == "__main__":
    main()

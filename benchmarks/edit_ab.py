"""The estimate the window pays after an EDIT, this engine against another checkout's, alternating
in one run (as benchmarks/engine_ab.py, whose estimates of an unchanged design reuse its analysis).

Before every timed estimate one layer's property changes (a mid-network Conv2d's bias, the head
Linear's out_features, a ReLU's inplace: shapes downstream stay valid), so the design is analysed
again (shape inference, the graph facts, the simulation's graph structure) and the report's layer
rows are built, as the window does. Two paths:

- ``edit``: ``design.set_prop(...)`` then ``estimate(design)`` on the same design object (scripts,
  the CLI's repeated runs) and the report's layer rows (``--no-rows``: not those);
- ``window``: the same edit, then what the window's worker does (memdesigner/_qt/jobs/estimator.py
  compute(), with the cyclic collector paused): a detached snapshot of the design (reusing the
  last snapshot's unchanged nodes where the checkout has model/snapshots.py),
  ``analyze(snapshot)``, ``estimate(snapshot, analysis=...)``, the layer rows, and what it keeps
  promoted to the oldest generation (gc_pause.promote_survivors, where the checkout has it), as
  compute() does: without it the collection set off after the pause walked all of it (~18 ms of
  a 10,000-op Adam edit, which the window does not pay).

    python benchmarks/edit_ab.py --against /path/to/old/checkout [--layers 1000,10000] [--rounds 15] [--check]

Prints median and p95 milliseconds (process CPU time) per design size, path and mode, before and after.
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
MODES = {"inference": dict(mode="inference", batch=32), "train_adam": dict(mode="train", batch=32, optimizer="adam")}
PATHS = ("edit", "window")


def edits(n_ops: int) -> list:
    """(node, prop, value) edits that flip back and forth and keep the design valid: a Conv2d's
    bias mid-network (new parameters, same shapes), the head's out_features (the last op's shape),
    a ReLU's inplace (its memory rule, nothing else)."""
    blocks = (n_ops - 4) // 4
    mid, quarter = f"c{blocks // 2}", f"r{blocks // 4}"
    return [(mid, "bias", True), ("head", "out_features", 11), (quarter, "inplace", False),
            (mid, "bias", False), ("head", "out_features", 10), (quarter, "inplace", True)]


def _worker() -> None:
    """Reads 'layers path mode repeat check' lines; answers with the CPU milliseconds of each edit +
    estimate, and with ``check`` 1 the SHA-256 of each report's JSON (taken after the clock stopped)."""
    import hashlib
    import time

    sys.path.insert(0, str(HERE))
    from engine_speed import make_design

    import memdesigner as md
    from memdesigner.engine.gc_pause import gc_paused

    try:
        from memdesigner.engine.gc_pause import promote_survivors
    except ImportError:  # a checkout whose worker did not promote what it kept
        def promote_survivors():
            return None
    from memdesigner.model.analysis import analyze

    try:
        from memdesigner.model.snapshots import Snapshots
    except ImportError:  # a checkout whose window copied every node per snapshot
        Snapshots = None
    designs: dict = {}
    takes: dict = {}  # size -> the window's snapshot taker (one per design, as the window's service)
    step: dict = {}
    rows = "--no-rows" not in sys.argv
    for line in sys.stdin:
        n, path, mode, reps, check = line.split()
        d = designs.get(n) or designs.setdefault(n, make_design(int(n)))
        take = takes.get(n) or takes.setdefault(n, Snapshots().take if Snapshots else type(d).detached_copy)
        todo = edits(len(d.nodes))
        kw = MODES[mode]
        out, digests = [], []
        for _ in range(int(reps)):
            i = step[n] = step.get(n, -1) + 1
            nid, key, value = todo[i % len(todo)]
            t0 = time.process_time()
            d.set_prop(nid, key, value)
            if path == "window":  # the worker's compute(): the collector paused around it all
                with gc_paused():
                    snap = take(d)
                    rep = md.estimate(snap, analysis=analyze(snap), **kw)
                    rep.layers  # noqa: B018
                    promote_survivors()  # as compute(): no young collection over what it keeps
            else:
                rep = md.estimate(d, **kw)
                if rows:
                    rep.layers  # noqa: B018  (built when first read, as the window's worker reads them)
            out.append((time.process_time() - t0) * 1000)
            if check == "1":
                text = json.dumps(rep.to_dict(), sort_keys=True, default=str)
                digests.append(hashlib.sha256(text.encode()).hexdigest())
        print(json.dumps([out, digests]), flush=True)


def _start(root: str, rows: bool) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(Path(root).resolve()))
    args = [sys.executable, __file__, "--worker"] + ([] if rows else ["--no-rows"])
    return subprocess.Popen(args, env=env, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _ask(p: subprocess.Popen, n: int, path: str, mode: str, reps: int, check: bool = False) -> tuple:
    p.stdin.write(f"{n} {path} {mode} {reps} {int(check)}\n")
    p.stdin.flush()
    return tuple(json.loads(p.stdout.readline()))


def _stats(ts: list) -> tuple:
    ts = sorted(ts)
    return round(statistics.median(ts), 2), round(ts[int(0.95 * (len(ts) - 1))], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required="--worker" not in sys.argv, help="the other checkout")
    ap.add_argument("--layers", default="1000,10000")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--rounds", type=int, default=15, help="alternations per size, path and mode")
    ap.add_argument("--check", action="store_true",
                    help="also compare every report with the other checkout's (byte-identical JSON)")
    ap.add_argument("--no-rows", action="store_true", help="edit path: leave the report's layer rows unbuilt")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        _worker()
        return
    ours, theirs = _start(str(HERE.parent), not a.no_rows), _start(a.against, not a.no_rows)
    load = os.getloadavg
    print(f"load average {load()[0]:.2f} {load()[1]:.2f} {load()[2]:.2f}")
    print(f"{'ops':>6} {'path':<7} {'mode':<11} {'before median':>13} {'before p95':>10} {'after median':>12}"
          f" {'after p95':>9} {'speedup':>7}")
    compared = differ = 0
    for n in [int(x) for x in a.layers.split(",")]:
        reps = 3 if n <= 1000 else 1
        for path in a.paths.split(","):
            for mode in a.modes.split(","):
                for p in (ours, theirs):
                    _ask(p, n, path, mode, 6)  # warm: the rule caches, the design, both values of each edit
                new, old = [], []
                for _ in range(a.rounds):
                    o_ms, o_dig = _ask(theirs, n, path, mode, reps, a.check)
                    n_ms, n_dig = _ask(ours, n, path, mode, reps, a.check)
                    old += o_ms
                    new += n_ms
                    compared += len(o_dig)
                    differ += sum(x != y for x, y in zip(o_dig, n_dig))
                (om, op), (nm, np_) = _stats(old), _stats(new)
                print(f"{n:>6} {path:<7} {mode:<11} {om:>13} {op:>10} {nm:>12} {np_:>9} {om / nm:>6.2f}x", flush=True)
    print(f"load average {load()[0]:.2f} {load()[1]:.2f} {load()[2]:.2f}")
    if a.check:
        print(f"{compared} reports compared after edits, {differ} differ")
    for p in (ours, theirs):
        p.stdin.close()
        p.wait()


if __name__ == "__main__":
    main()

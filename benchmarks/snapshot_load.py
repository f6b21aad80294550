"""How long a big PyTorch memory snapshot takes to open: read (restricted unpickler), replay,
align onto an estimate and downsample for drawing, and how often the UI thread got the GIL
while a worker thread read it.

    python3 benchmarks/snapshot_load.py [--steps 400] [--out big.pickle]

Writes a synthetic snapshot of many steps of tests/fixtures/snapshots' MLP (frames as deep as
a real eager run's: ~20 per event), then prints JSON: file size, events and seconds per stage,
and the UI thread's longest wait (ms) for the GIL during the threaded read.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "snapshots"))

import make_snapshots as ms  # noqa: E402

from memdesigner.engine.estimate import estimate  # noqa: E402
from memdesigner.io.design_file import load_design  # noqa: E402
from memdesigner.snapshot import load_snapshot, replay  # noqa: E402
from memdesigner.snapshot.align import align  # noqa: E402
from memdesigner.snapshot.replay import open_replay  # noqa: E402


def big_snapshot(steps: int) -> dict:
    deep = [{"filename": f"{ms.TORCH}/nn/modules/module.py", "line": 1750 + i, "name": "_call_impl"} for i in range(16)]
    a = ms.Allocator(0x7F3A5C000000, record=True, cpp=True)
    for p, nb in ms.PARAMS:
        a.malloc(p, nb, ms.TO_CUDA)
    a.malloc("x", ms.B * ms.IN * ms.F, ms.BATCH)
    for s in range(steps):
        ms.step(a, first=s == 0)
        a.free("out", ms.LOSS)
        a.free("loss", ms.LOSS)
    def own(f):  # distinct strings, as torch's C++ side creates them (pickle memoizes shared ones)
        return {"filename": "".join(list(f["filename"])), "line": f["line"], "name": "".join(list(f["name"]))}

    for e in a.trace:  # a real stack is deeper: distinct frame lists, as torch writes them
        e["frames"] = [own(f) for f in e["frames"][:1]] + [own(f) for f in deep] + [own(f) for f in e["frames"][1:]]
    return a.snapshot()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = Path(args.out or Path(tempfile.mkdtemp()) / "big.pickle")
    t = time.perf_counter()
    snap = big_snapshot(args.steps)
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    del snap
    make_s = time.perf_counter() - t

    # threaded read, as the window does: how long does the UI thread wait for the GIL?
    waits = []
    done = threading.Event()
    box = {}

    def work():
        t0 = time.perf_counter()
        box["rp"] = open_replay(out)  # what File -> Open Memory Snapshot runs on its worker
        box["open_s"] = time.perf_counter() - t0
        done.set()

    th = threading.Thread(target=work)
    th.start()
    last = time.perf_counter()
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        waits.append(now - last)
        last = now
    th.join()
    waits.sort()
    rp = box["rp"]
    t0 = time.perf_counter()
    snap = load_snapshot(out)
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    replay(snap)
    replay_s = time.perf_counter() - t0
    del snap
    rep = estimate(load_design(ROOT / "tests" / "fixtures" / "snapshots" / "mlp.json"), mode="train",
                   optimizer="adam", batch=64)
    t0 = time.perf_counter()
    ov = align(rp, [e.phase for e in rep.timeline])
    align_s = time.perf_counter() - t0
    print(json.dumps({
        "file_mb": round(out.stat().st_size / 1e6, 1), "events": rp.n_events, "write_s": round(make_s, 2),
        "read_s": round(read_s, 2), "replay_s": round(replay_s, 2), "open_in_worker_s": round(box["open_s"], 2),
        "align_draw_s": round(align_s, 3),
        "points_drawn": int(len(ov.x)), "ui_longest_wait_ms": round(waits[-1] * 1000, 1),
        "ui_wait_p99_ms": round(waits[int(len(waits) * 0.99)] * 1000, 1),
        "peak_allocated": rp.peak_allocated,
    }, indent=2))


if __name__ == "__main__":
    main()

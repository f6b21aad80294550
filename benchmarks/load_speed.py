"""How long loading a design file takes as it grows (target: 10,000 nodes in <= 1 s, linear).

    python3 benchmarks/load_speed.py [--sizes 1000,5000,10000,20000] [--repeat 5] [--early-error]

Generated files are residual conv blocks (Conv2d, BatchNorm2d, ReLU, Add: about 1.25 edges per
node) saved with save_design. Prints one row per size: median and best wall seconds of load_design
(JSON parse, schema validation, graph build, cycle check), median CPU seconds and CPU
microseconds per node (flat when loading is linear).
--early-error also times how soon a 10^6-edge file whose edges[9] is bad is refused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_speed import make_design  # noqa: E402

from memdesigner.io.design_file import DesignFileError, load_design, save_design  # noqa: E402


def time_load(path: Path, repeat: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) per repeat: on a shared machine CPU time is the steadier one."""
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        load_design(path)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return wall, cpu


def early_error(folder: Path, n_edges: int = 1_000_000) -> float:
    nodes = [{"id": "in", "type": "Input", "props": {"shape": [8]}}, {"id": "x", "type": "ReLU"}]
    edges = [{"from": "in", "to": "x"}] * n_edges
    edges[9] = {"from": "in", "to": "x", "to_port": -1}
    path = folder / "million.json"
    path.write_text(json.dumps({"format": "memdesigner-design", "version": 1, "nodes": nodes, "edges": edges}))
    t = time.perf_counter()
    try:
        load_design(path)
    except DesignFileError as err:
        assert "edges[9]" in str(err), err
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,10000,20000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--early-error", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        load_design(_write(folder, 100))  # warm up: imports, schema compile
        print(f"{'nodes':>7} {'edges':>7} {'median s':>9} {'best s':>8} {'CPU s':>7} {'us/node':>8}")
        for n in (int(s) for s in args.sizes.split(",")):
            path = _write(folder, n)
            d = load_design(path)
            times, cpu = time_load(path, args.repeat)
            med, cpu_med = statistics.median(times), statistics.median(cpu)
            print(f"{len(d.nodes):>7} {len(d.edges):>7} {med:>9.3f} {min(times):>8.3f} {cpu_med:>7.3f} "
                  f"{cpu_med / len(d.nodes) * 1e6:>8.1f}")
        if args.early_error:
            print(f"10^6-edge file, bad edges[9]: refused after {early_error(folder):.2f} s (incl. JSON parse)")
    return 0


def _write(folder: Path, n: int) -> Path:
    path = folder / f"design-{n}.json"
    save_design(make_design(n), path)
    return path


if __name__ == "__main__":
    raise SystemExit(main())

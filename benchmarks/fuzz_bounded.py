"""Fuzz the bounded readers and the block budget (issue 22): devices.json, Keras JSON and designs
with nested blocks, mutated and made hostile (a FIFO, /dev/zero, /dev/null, a directory, a file
over MEMDESIGNER_MAX_FILE_MB, 100,000-deep nesting), each case run through
``memdesigner.cli.main`` in this process under a time limit. Every case must end with exit 0 and
only one-line warnings (``devices`` always; ``estimate`` / ``import`` of a valid input) or exit 2
and exactly one stderr line; a traceback, a multi-line message or a hang is a failure.

    python benchmarks/fuzz_bounded.py devices -n 20000
    python benchmarks/fuzz_bounded.py keras -n 20000
    python benchmarks/fuzz_bounded.py blocks -n 20000 [--seed 22] [--limit 10] [--show 10]

Prints per family: cases, exit codes, tracebacks, multi-line messages, hangs, the slowest case
and the process's peak RSS (a case that grew it shows there); exit 1 if any case failed. The
blocks cases run with MEMDESIGNER_MAX_LAYERS=20000 (BLOCKS_BUDGET), so the largest accepted
expansion costs a second, not the minute of the default budget's largest.
Mutations come from benchmarks/_fuzz.py (shared with fuzz_designs.py) and, for Keras,
fuzz_importers.keras_cases.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fuzz import (  # noqa: E402
    DEEP,
    HOSTILE,
    Tally,
    _deepen,
    _dump,
    _mutate_bytes,
    make_hostile,
    mutate_json,
    odd_value,
    outcome,
    remove,
    run_main,
)

ROOT = Path(__file__).resolve().parent.parent
LENET = str(ROOT / "resources" / "examples" / "lenet5.json")


# -- devices.json -------------------------------------------------------------------------------

def device_seeds() -> list[dict]:
    """Eight shipped profiles as a user file (ids prefixed, so they do not clash; all of them made
    each case validate 30 entries) and a small one."""
    shipped = json.loads((ROOT / "resources" / "devices.json").read_text())["devices"]
    return [{"devices": [dict(d, id=f"u-{d['id']}") for d in shipped[::4][:8]]},
            {"devices": [{"id": "lab", "name": "Lab GPU", "kind": "cuda", "memory_bytes": 2 * 2**30,
                          "runtime_overhead_bytes": 300 * 2**20, "peak_flops": {"fp32": 1e13}}]}]


def device_cases(n: int, seed: int):
    """(family, description, bytes or a hostile kind, argv) per case, the same for a seed."""
    rng = random.Random(seed)
    seeds = device_seeds()
    for i in range(n):
        doc = json.loads(json.dumps(seeds[i % len(seeds)]))
        ids = [d["id"] for d in doc["devices"]]
        argv = ["estimate", LENET, "--device", rng.choice(ids)] if i % 5 == 0 else \
            ["devices", "--format", rng.choice(("table", "json"))]
        family = ("tree", "tree", "entry", "bytes", "hostile")[i % 5 if i % 5 else rng.randrange(5)]
        if family == "hostile":
            kind = HOSTILE[(i // 5) % len(HOSTILE)]
            yield family + ":" + kind, kind, kind, argv
            continue
        steps = []
        if family == "entry":  # one field of one entry made odd
            entry = rng.choice(doc["devices"])
            key = rng.choice(["id", "name", "kind", "memory_bytes", "runtime_overhead_bytes", "allocator_rounding",
                              "bandwidth_bytes_per_s", "peak_flops", "notes", "extra"])
            entry[key] = odd_value(rng) if rng.random() < 0.9 else DEEP
            steps.append(f"{entry.get('id')!r}.{key}")
        else:
            for _ in range(rng.choice((1, 1, 2, 3))):
                what, doc = mutate_json(rng, doc)
                steps.append(what)
        data = _deepen(rng, _dump(doc))
        if family == "bytes":
            what, data = _mutate_bytes(rng, data)
            steps.append(what)
        yield family, "; ".join(steps), data, argv


def run_devices(n: int, seed: int, limit_s: float, tally: Tally) -> None:
    from memdesigner.engine import devices

    with tempfile.TemporaryDirectory(prefix="memdesigner-fuzz-") as tmp:
        path = Path(tmp) / "devices.json"
        real = devices.user_devices_path
        devices.user_devices_path = lambda: path
        try:
            for family, what, data, argv in device_cases(n, seed):
                env = make_hostile(data, path) if isinstance(data, str) else (remove(path), path.write_bytes(data),
                                                                              {})[2]
                res = run_main(argv, limit_s, env)
                ok = (0,) if argv[0] == "devices" else (0, 2)
                tally.add(family, res, outcome(res, ok), f"{' '.join(argv[:1])} {what}")
                remove(path)
        finally:
            devices.user_devices_path = real


# -- Keras JSON ---------------------------------------------------------------------------------

def run_keras(n: int, seed: int, limit_s: float, tally: Tally) -> None:
    import os

    import fuzz_importers

    from memdesigner.io.design_file import DesignFileError, load_design

    os.fsync = lambda fd: None  # the output's durability is not what is fuzzed: 20,000 fsyncs are minutes
    cases = fuzz_importers.keras_cases(n - n // 50, seed)
    with tempfile.TemporaryDirectory(prefix="memdesigner-fuzz-") as tmp:
        src, out = Path(tmp) / "model.json", Path(tmp) / "out.json"
        jobs = [(c.family, c.ident, c.data) for c in cases]
        for i in range(n // 50):  # every 50th case a hostile file (interleaved: a run cut short has them too)
            kind = HOSTILE[i % len(HOSTILE)]
            jobs.insert(i * 50, (f"hostile:{kind}", kind, kind))
        for family, what, data in jobs:
            env = make_hostile(data, src, b'{"class_name": "Sequential"}') if isinstance(data, str) else \
                (remove(src), src.write_bytes(data), {})[2]
            remove(out)
            res = run_main(["import", "keras", str(src), "-o", str(out)], limit_s, env)
            verdict = outcome(res)
            if verdict == "ok" and res.code == 2 and out.exists():
                verdict = "exit 2 but the output was written"
            elif verdict == "ok" and res.code == 0:
                try:
                    load_design(out)
                except DesignFileError:
                    verdict = "exit 0 but the output does not load"
            tally.add(family, res, verdict, what)
            remove(src)


# -- designs with nested blocks -----------------------------------------------------------------

REPEATS = [1, 1, 2, 3, 1000, 100_000, 10**6, 0, -1, 2**63, "x", None, 1.5]
# the budget the blocks cases run under: what is refused is the same as at the default, and the
# largest accepted expansion costs about a second instead of a minute per case
BLOCKS_BUDGET = 20_000


def block_design(rng: random.Random) -> tuple[str, dict]:
    """A design of nested definitions: depth, repeat counts, width (instances per definition)
    and references (cycles, unknown names) drawn at random."""
    depth = rng.choice([1, 2, 3, 5, 32, 33, 100, 1000])
    width = rng.choice([1, 1, 2, 10])
    defs = []
    for k in range(depth):
        nodes = [{"id": "i", "type": "BlockInput", "props": {"shape": [4]}}]
        for w in range(width if k + 1 < depth else 0):
            target = f"d{k + 1}"
            if rng.random() < 0.05:
                target = rng.choice([f"d{rng.randrange(k + 1)}", "nowhere", ""])
            nodes.append({"id": f"b{w}", "type": "Block", "props": {"definition": target,
                                                                     "repeat": rng.choice(REPEATS)}})
        if k + 1 == depth:
            nodes.append({"id": "r", "type": "ReLU"})
        nodes.append({"id": "o", "type": "BlockOutput"})
        ids = [nd["id"] for nd in nodes]
        defs.append({"name": f"d{k}", "nodes": nodes, "edges": [{"from": a, "to": b} for a, b in zip(ids, ids[1:])]})
    top = [{"id": "x", "type": "Input", "props": {"shape": [4]}},
           {"id": "b", "type": "Block", "props": {"definition": "d0", "repeat": rng.choice(REPEATS)}}]
    doc = {"format": "memdesigner-design", "version": 2, "name": "blocks", "nodes": top,
           "edges": [{"from": "x", "to": "b"}], "blocks": defs}
    return f"depth {depth} width {width}", doc


def run_blocks(n: int, seed: int, limit_s: float, tally: Tally) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="memdesigner-fuzz-") as tmp:
        path = Path(tmp) / "design.json"
        for i in range(n):
            what, doc = block_design(rng)
            family = "nesting"
            if i % 4 == 3:  # and a generic mutation on top
                family = "nesting+mutation"
                step, doc = mutate_json(rng, doc)
                what += f"; {step}"
            path.write_bytes(_deepen(rng, _dump(doc)))
            res = run_main(["estimate", str(path)], limit_s, {"MEMDESIGNER_MAX_LAYERS": str(BLOCKS_BUDGET)})
            tally.add(family, res, outcome(res), what)


TARGETS = {"devices": run_devices, "keras": run_keras, "blocks": run_blocks}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", choices=sorted(TARGETS))
    ap.add_argument("-n", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--limit", type=float, default=10.0, help="seconds one case may run (else: a hang)")
    ap.add_argument("--show", type=int, default=10, help="failures to print")
    a = ap.parse_args(argv)
    tally = Tally()
    t0 = time.perf_counter()
    try:
        TARGETS[a.target](a.n, a.seed, a.limit, tally)
    except KeyboardInterrupt:  # Ctrl+C or SIGINT: the table of the cases run so far
        pass
    n = sum(r["cases"] for r in tally.rows.values())
    print(f"{a.target}: {n} cases (seed {a.seed}) in {time.perf_counter() - t0:.0f} s, {a.limit:g} s limit per case")
    print(tally.table())
    for line in tally.bad[:a.show]:
        print(f"FAIL {line}")
    return 1 if tally.bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

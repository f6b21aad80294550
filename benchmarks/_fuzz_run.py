"""What the per-format fuzzers (fuzz_hf.py, fuzz_onnx.py, fuzz_snapshot.py) share: run one
command line through ``memdesigner.cli.main`` in this process under a time limit, measure its
time and peak RSS, classify the outcome as fuzz_designs.classify does, and print the table.

The time limit (_fuzz.run_cli) is an interval timer whose signal raises ``Hang`` (a BaseException, so no
``except Exception`` in the code under test swallows it) in the main thread; the peak RSS of one
case is the kernel's high-water mark (VmHWM), reset before each case via /proc/self/clear_refs.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzz import run_cli  # noqa: E402
from fuzz_designs import classify  # noqa: E402


@dataclass
class Result:
    family: str
    what: str
    kind: str  # classify()'s words, or "hang"
    seconds: float
    rss_mb: float
    err: str


def _reset_peak_rss() -> None:
    with contextlib.suppress(OSError):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")


def peak_rss_mb() -> float:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_argv(argv: list, family: str, what: str, time_limit: float = 10.0) -> Result:
    """``memdesigner ARGV`` in-process (_fuzz.run_cli, no memory cap: the peak RSS is measured
    instead), classified."""
    _reset_peak_rss()
    code, stderr, dt = run_cli(argv, time_limit, guard=contextlib.nullcontext)
    kind = "hang" if code == "hang" else classify(code, stderr)
    return Result(family, what, kind, dt, peak_rss_mb(), stderr)


def good(r: Result) -> bool:
    return r.kind in ("valid (exit 0)", "exit 2, one line")


COLUMNS = ("cases", "exit 0", "exit 2 (1 line)", "tracebacks", "multi-line", "other exit", "hangs", "max s",
           "max RSS MB")


def table(results: list, title: str) -> str:
    """Markdown: per family and in total, the outcomes, the slowest case and the largest peak RSS."""
    fams: dict = {}
    for r in results:
        fams.setdefault(r.family, []).append(r)
    fams["total"] = list(results)

    def row(name, rs):
        c = [len(rs), sum(r.kind == "valid (exit 0)" for r in rs), sum(r.kind == "exit 2, one line" for r in rs),
             sum(r.kind.startswith("traceback") for r in rs), sum(r.kind == "exit 2, not exactly one line" for r in rs),
             sum(r.kind.startswith("exit ") and r.kind[5:6].isdigit() and not r.kind.startswith("exit 2") for r in rs),
             sum(r.kind == "hang" for r in rs)]
        mt = max((r.seconds for r in rs), default=0.0)
        mr = max((r.rss_mb for r in rs), default=0.0)
        return f"| {name:<16} | " + " | ".join(f"{v:>{len(h)}}" for v, h in zip(c, COLUMNS)) + \
            f" | {mt:>5.2f} | {mr:>10.0f} |"

    head = f"| {'family':<16} | " + " | ".join(COLUMNS) + " |"
    sep = "|" + "-" * 18 + "|" + "|".join("-" * (len(h) + 1) + ":" for h in COLUMNS) + "|"
    lines = [title, "", head, sep] + [row(k, v) for k, v in fams.items()]
    return "\n".join(lines)


def failures(results: list, show: int) -> str:
    bad = [r for r in results if not good(r)]
    slow = sorted(results, key=lambda r: -r.seconds)[:3]
    out = ["slowest: " + "; ".join(f"{r.what} {r.seconds:.2f} s" for r in slow)]
    for r in bad[:show]:
        out.append(f"FAIL {r.family} {r.what}: {r.kind}: {r.err.strip()[-400:]!r}")
    return "\n".join(out)


def fuzz_main(doc: str, command: str, run, seed: int, argv=None) -> int:
    """The command line every per-format fuzzer shares: ``run(n, seed, limit, budget=...)`` makes
    and runs the cases; prints the table and the first failures; exit 1 when any case failed."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("-n", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--limit", type=float, default=10.0, help="seconds per case")
    ap.add_argument("--show", type=int, default=10)
    ap.add_argument("--budget", type=float, default=0, help="seconds for the whole run (0: none): fewer cases then")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = run(a.n, a.seed, a.limit, budget=a.budget)
    print(table(results, f"memdesigner {command}: {len(results)} cases (seed {a.seed}) in "
                         f"{time.perf_counter() - t0:.0f} s, {a.limit:g} s limit each"))
    print(failures(results, a.show))
    return 0 if all(good(r) for r in results) else 1


def mutate_binary(rng, data: bytes, insert) -> tuple[str, bytes]:
    """One mutation of a binary file (ONNX protobuf, snapshot pickle): truncate, flip a bit, insert
    ``insert(rng)`` (what, bytes) or drop a byte, at one random offset."""
    k = rng.randrange(4)
    i = rng.randrange(max(len(data), 1))
    if k == 0:
        return "truncate", data[:i]
    if k == 1:
        return "bit flip", data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    if k == 2:
        what, ins = insert(rng)
        return what, data[:i] + ins + data[i:]
    return "drop byte", data[:i] + data[i + 1:]

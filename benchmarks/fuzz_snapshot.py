"""Fuzz ``memdesigner snapshot show`` with mutated and hostile PyTorch memory snapshot pickles.

Every bad file must give exactly one stderr line and exit 2 (a mutant that is still a snapshot
may give exit 0), within the time limit: a traceback, a second line or a hang is a bug.
Deterministic for a seed; runs in this process through ``memdesigner.cli.main``:

    python benchmarks/fuzz_snapshot.py [-n 20000] [--seed 5] [--limit 10] [--show 10]

Families: ``tree`` (the fixtures' dicts with values swapped, deleted, made huge/negative/NaN,
through fuzz_importers' mutation helpers), ``bytes`` (truncated, bit-flipped, opcode bytes
inserted), ``hostile`` (memo bombs that repeat one event, frame or block list thousands of
times, tuples nested up to a million deep as dict keys, 2^20000 sizes, None frames, lengths of
2^63, globals that would run code, a FIFO, /dev/zero).
"""

from __future__ import annotations

import os
import pickle
import random
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_importers  # noqa: E402
from _fuzz_run import fuzz_main, mutate_binary, run_argv  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "snapshots"
TREE_FAMILIES = ("type_swap", "delete", "numbers")


def seeds() -> list:
    """The fixtures as plain dicts (the two-step one cut to 30 events: mutating is per path)."""
    out = []
    for p in sorted(FIX.glob("*.pickle")):
        snap = pickle.loads(p.read_bytes())  # our own fixtures: plain data
        snap["device_traces"] = [t[:30] for t in snap["device_traces"]]
        out.append((p.name, snap))
    return out


def _ev(i, frames=None, size=512, action="alloc"):
    e = {"action": action, "addr": 0x7F0000000000 + 512 * i, "size": size, "stream": 0, "time_us": i}
    if frames is not None:
        e["frames"] = frames
    return e


def _frame(i=0):
    return {"filename": "/home/user/train.py", "line": 10 + i, "name": "forward"}


class _Global:
    """Pickles as a call of os.system (the reader must refuse it without running it)."""

    def __reduce__(self):
        return (os.system, ("true",))


def _deep_key(depth: int, op: bytes = b"\x85") -> bytes:
    """A dict whose key is a tuple nested ``depth`` deep (TUPLE1 chains, or MARK ... TUPLE)."""
    if op == b"t":
        return b"\x80\x04}" + b"(" * depth + b"N" + b"t" * depth + b"Ns."
    return b"\x80\x04}N" + op * depth + b"Ns."


_MADE: dict = {}


def hostile(rng: random.Random) -> tuple[str, bytes]:
    """One hostile file; the big ones are made once per run (building a memo bomb is slower
    than refusing it)."""
    k = rng.randrange(16)
    if k in (0, 1, 2, 12):
        sub = rng.randrange(3)
        key = (k, sub)
        if key not in _MADE:
            _MADE[key] = _hostile(random.Random(hash(key) & 0xFFFF), k)
        return _MADE[key]
    return _hostile(rng, k)


def _hostile(rng: random.Random, k: int) -> tuple[str, bytes]:
    if k == 0:  # one event list named by many devices: events after memo sharing
        n, m = rng.choice([(10_000, 10_000), (1000, 6000), (5000, 1001)])
        trace = [_ev(i) for i in range(n)]
        return f"memo bomb {n}x{m} events", pickle.dumps({"segments": [], "device_traces": [trace] * m}, protocol=4)
    if k == 1:  # one frame list under every event
        n, m = rng.choice([(10_000, 10_000), (2000, 30_000)])
        fr = [_frame()] * m
        return f"frames bomb {n}x{m}", pickle.dumps({"segments": [], "device_traces": [[_ev(i, fr) for i in range(n)]]},
                                                    protocol=4)
    if k == 2:  # one block list under every segment
        blocks = [{"size": 512, "state": "active_allocated", "address": i} for i in range(5000)]
        segs = [{"device": 0, "address": 0, "total_size": 2 << 20, "blocks": blocks}] * 5000
        return "blocks bomb 5000x5000", pickle.dumps({"segments": segs, "device_traces": []}, protocol=4)
    if k == 3:
        depth = rng.choice([10_000, 100_000, 1_000_000])
        op = rng.choice([b"\x85", b"t"])
        return f"tuple key {depth} deep ({op!r})", _deep_key(depth, op)
    if k == 4:
        v = rng.choice([2**20000, 2**63, -1, -(2**70), 2**48 + 1, True, 1.5, float("nan"), "512", None, [512]])
        field = rng.choice(["size", "addr", "time_us"])
        e = _ev(1)
        e[field] = v
        return f"event {field}={type(v).__name__} {v if not isinstance(v, int) or abs(v) < 2**80 else 'huge'}", pickle.dumps({"segments": [], "device_traces": [[e]]}, protocol=4)
    if k == 5:
        fr = rng.choice([[None], None, "x", 7, [{"filename": None}], [{"filename": ["a"] * 3, "line": "x"}], [[]],
                         [{"filename": "a.py", "line": 2**70, "name": 5}], {"a": 1}])
        return f"frames {str(fr)[:30]}", pickle.dumps({"segments": [], "device_traces": [[_ev(1, fr)]]}, protocol=4)
    if k == 6:
        op = rng.choice([b"\x8e", b"\x8d", b"\x96"])  # BINBYTES8, BINUNICODE8, BYTEARRAY8
        ln = rng.choice([2**63, 2**64 - 1, 2**40, 10**9])
        return f"opcode {op!r} length {ln}", b"\x80\x04" + op + struct.pack("<Q", ln) + b"xx."
    if k == 7:
        return "os.system global", pickle.dumps({"segments": [], "device_traces": [[_Global()]]}, protocol=4)
    if k == 8:  # nesting where the reader looks: deep lists as values
        depth = rng.choice([1000, 100_000])
        lst = b"(" * depth + b"l" * depth  # MARK ... LIST: lists nested ``depth`` deep
        data = b"\x80\x04}(\x8c\x08segments]\x8c\x0edevice_traces]" + lst + b"au."
        return f"lists {depth} deep in device_traces", data
    if k == 9:
        segs = [{"device": rng.choice([-1, 2**40, "0", None, 1.5]), "address": 0, "total_size": 512, "blocks": []}]
        return "segment device", pickle.dumps({"segments": segs, "device_traces": []}, protocol=4)
    if k == 10:
        segs = [{"address": 0, "total_size": rng.choice([2**20000, -5, 2**63, "1"]), "blocks": []}]
        return "segment total_size", pickle.dumps({"segments": segs, "device_traces": []}, protocol=4)
    if k == 11:
        n = rng.choice([100, 3000])
        trace = [_ev(i, size=2**48) for i in range(n)]
        return f"{n} events of 2^48 bytes", pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=4)
    if k == 12:
        return "many devices", pickle.dumps({"segments": [], "device_traces": [[]] * 1_000_000}, protocol=4)
    if k == 13:
        return "empty file", b""
    if k == 14:
        ev = {"action": rng.choice(["alloc", "free_completed", "segment_map"]), "size": 5, "addr": rng.choice(
            [[1], {"a": 1}, (1, [2]), 1.5, "x"])}
        return f"addr {ev['addr']!r}", pickle.dumps({"segments": [], "device_traces": [[ev]]}, protocol=4)
    return "top-level types", pickle.dumps(rng.choice([[1, 2], "x", 5, None, {"segments": 5}, {"device_traces": {}},
                                                       {"segments": [], "device_traces": [5]}]), protocol=4)


_INSERTS = [b"\x85" * 50, b"(", b"t", b"\x94", b"h\xff", b"c", b"\x93", b"R", b"\x8e\xff\xff\xff\xff",
            b"J\xff\xff\xff\x7f", b"\x8a\x08" + b"\xff" * 8, b"0", b"2", b"."]  # pickle opcodes and lengths


def _insert(rng):
    ins = rng.choice(_INSERTS)
    return f"insert {ins[:6]!r}", ins


def _mutate_bytes(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    return mutate_binary(rng, data, _insert)


def cases(n: int, seed: int):
    """``n`` (family, description, bytes) cases, the same for the same seed."""
    rng = random.Random(seed)
    base = seeds()
    for i in range(n):
        r = i % 10
        name, snap = base[i % len(base)]
        if r < 4:
            fam = TREE_FAMILIES[r % 3]
            obj = pickle.loads(pickle.dumps(snap))
            for _ in range(rng.choice((1, 1, 2, 3))):
                obj = fuzz_importers._mutate_tree(rng, obj, fam)
            yield "tree " + fam, f"{name} {fam}", pickle.dumps(obj, protocol=rng.choice((2, 4, 5)))
        elif r < 9:
            what, data = _mutate_bytes(rng, pickle.dumps(snap, protocol=4))
            yield "bytes", f"{name} {what}", data
        else:
            what, data = hostile(rng)
            yield "hostile", what, data


def run(n: int, seed: int, time_limit: float, specials: bool = True, budget: float = 0) -> list:
    """The cases, then the special files; ``budget`` (s, 0: none): stop generating cases then."""
    results = []
    stop = time.perf_counter() + budget if budget else None
    with tempfile.TemporaryDirectory(prefix="memdesigner-fuzz-snap-") as tmp:
        path = Path(tmp) / "snap.pickle"
        for fam, what, data in cases(n, seed):
            if stop is not None and time.perf_counter() > stop:
                break
            path.write_bytes(data)
            results.append(run_argv(["snapshot", "show", str(path)], fam, what, time_limit))
        if specials:
            fifo = Path(tmp) / "fifo.pickle"
            os.mkfifo(fifo)
            results.append(run_argv(["snapshot", "show", str(fifo)], "special files", "a FIFO", time_limit))
            zero = Path(tmp) / "zero.pickle"
            zero.symlink_to("/dev/zero")
            results.append(run_argv(["snapshot", "show", str(zero)], "special files", "/dev/zero", time_limit))
            results.append(run_argv(["snapshot", "show", tmp], "special files", "a folder", time_limit))
    return results


def main(argv=None) -> int:
    return fuzz_main(__doc__, "snapshot show", run, seed=5, argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())

"""What the fuzzers share: JSON tree and byte mutations (from fuzz_designs.py, where they began),
hostile files (a FIFO, /dev/zero, a directory, an oversized file) and an in-process runner that
bounds each case's time and notes its cost, with the table the fuzzers print.

Cases run through ``memdesigner.cli.main`` in this process (a child per case would take an hour
on two cores); SIGALRM ends a case that runs past its time limit (counted as a hang).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import resource
import signal
import sys
import time
from dataclasses import dataclass

ODD_VALUES = [None, True, False, 0, -1, 1.5, -7, 2**63, 10**400, 1e308, "x", "", [], {}, [1], {"a": 1},
              float("nan"), float("inf"), float("-inf"), "\u00e9\u6f22", [0, 0], [-1, 3], 3.0]
NUMBERS = [0, -1, -(2**31), 2**31, 2**63, 10**40, 10**400, 1e308, 1e-308, 0.5, float("nan"), float("inf"),
           float("-inf"), 3.0]


def _paths(obj, prefix=()):
    """Every (path, value) in a JSON tree."""
    yield prefix, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _set(root, path, value):
    if not path:
        return value
    cur = root
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return root


def _delete(root, path):
    if not path:
        return root
    cur = root
    for p in path[:-1]:
        cur = cur[p]
    del cur[path[-1]]
    return root


def _dump(doc) -> bytes:
    return json.dumps(doc, indent=1, ensure_ascii=False).encode("utf-8")  # NaN/Infinity as JSON5-ish words


DEEP = "@@DEEP@@"


def _deepen(rng: random.Random, data: bytes) -> bytes:
    depth = rng.choice((200, 1000, 5000, 100_000))
    o, c = ("[", "]") if rng.random() < 0.5 else ('{"a":', "}")
    return data.replace(json.dumps(DEEP).encode(), (o * depth + "1" + c * depth).encode())


def _mutate_bytes(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    kind = rng.choice(("truncate", "utf16", "latin1", "badbyte", "flip", "bom", "utf16le", "nul"))
    if kind == "truncate":
        return "truncate", data[: rng.randrange(len(data))]
    if kind == "utf16":
        return "utf-16", data.decode("utf-8").encode("utf-16")
    if kind == "utf16le":
        return "utf-16-le", data.decode("utf-8").encode("utf-16-le")
    if kind == "latin1":
        return "latin-1 e-acute", data.replace(b'"name": "', '"name": "\u00e9'.encode("latin-1"), 1)
    if kind == "badbyte":
        i = rng.randrange(len(data))
        return "byte 0xff", data[:i] + bytes([rng.choice((0xFF, 0xC3, 0x80, 0xFE))]) + data[i:]
    if kind == "bom":
        return "utf-8 BOM", b"\xef\xbb\xbf" + data
    if kind == "nul":
        i = rng.randrange(len(data))
        return "NUL byte", data[:i] + b"\x00" + data[i:]
    i = rng.randrange(len(data))
    return "bit flip", data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]



# -- hostile files: what no mutation of the bytes can make ------------------------------------------

HOSTILE = ("fifo", "dev_zero", "dev_null", "directory", "over_size", "deep_100000")


def make_hostile(kind: str, path, data: bytes = b"{}") -> dict:
    """Put a hostile file of ``kind`` at ``path`` (removing what was there); returns the
    environment variables the case runs with (over_size: a 1 MB MEMDESIGNER_MAX_FILE_MB)."""
    remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        os.symlink("/dev/zero", path)
    elif kind == "dev_null":
        os.symlink("/dev/null", path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "over_size":
        with open(path, "wb") as f:
            f.write(data + b" " * 1_100_000)
        return {"MEMDESIGNER_MAX_FILE_MB": "1"}
    elif kind == "deep_100000":
        with open(path, "wb") as f:
            f.write(b"[" * 100_000 + b"]" * 100_000)
    else:
        raise AssertionError(kind)
    return {}


def remove(path) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        os.rmdir(path)
    elif os.path.lexists(path):
        os.unlink(path)


# -- running one case ---------------------------------------------------------------------------

class Hang(BaseException):
    """Raised by SIGALRM in a case that ran past its time limit."""


@dataclass
class Result:
    code: int | str  # exit code, or the name of the exception that escaped (a traceback)
    stderr: str
    seconds: float
    rss_kb: int  # the process's peak resident set after the case


def _alarm(_signum, _frame):
    raise Hang()


MEMORY_HEADROOM = 1 << 30  # address space a case may add: an unbounded read fails (MemoryError), not the machine


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))


@contextlib.contextmanager
def memory_capped(extra: int = MEMORY_HEADROOM):
    """RLIMIT_AS lowered to this process's size + ``extra`` for the block, then restored (a soft
    limit may be raised again): a regression that reads /dev/zero to the end gives a MemoryError
    in the case instead of the kernel's OOM killer on a shared machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _vm_bytes() + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_cli(argv: list, limit_s: float, env: dict | None = None, guard=memory_capped) -> tuple:
    """``memdesigner.cli.main(argv)`` in this process with captured output, ended after ``limit_s``
    seconds (code "hang"), inside ``guard()`` (default: MEMORY_HEADROOM more address space, a
    MemoryError past it); ``env``: variables set for this case only. (code, stderr, seconds): the
    code is the exit code or the name of the exception that escaped (a traceback in a real run).
    The one runner every fuzzer uses (run_main here, _fuzz_run.run_argv)."""
    from memdesigner.cli import main

    err, out = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    old = signal.signal(signal.SIGALRM, _alarm)
    limit = sys.getrecursionlimit()
    t = time.perf_counter()
    try:
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        with guard(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except Hang:
        code = "hang"
    except BaseException as exc:  # what would be a traceback in a real run  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        code = type(exc).__name__
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        sys.setrecursionlimit(limit)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, err.getvalue(), time.perf_counter() - t


def run_main(argv: list, limit_s: float = 10.0, env: dict | None = None) -> Result:
    """run_cli under the memory cap, with the process's peak resident set after the case."""
    code, stderr, dt = run_cli(argv, limit_s, env)
    return Result(code, stderr, dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def outcome(res: Result, ok_codes=(0, 2)) -> str:
    """"ok" or what is wrong: a hang, a traceback, an unexpected exit code, or a stderr that is not
    one-line messages (one-line warnings, then on exit 2 exactly one error line, the last)."""
    if res.code == "hang":
        return "hang"
    if isinstance(res.code, str):
        return f"traceback {res.code}"
    if res.code not in ok_codes:
        return f"exit {res.code}"
    lines = res.stderr.splitlines()
    if res.stderr and not res.stderr.endswith("\n"):
        return "multi-line error" if res.code == 2 else "multi-line warning"
    if res.code == 2:
        if not lines or not lines[-1].startswith("memdesigner: error: "):
            return "multi-line error"
        lines = lines[:-1]
    if any(not ln.startswith("memdesigner: warning: ") for ln in lines):
        return "multi-line error" if res.code == 2 else "multi-line warning"
    return "ok"


class Tally:
    """Per family: cases, exit codes, tracebacks, multi-line messages, hangs, the slowest case and
    the process's peak RSS; ``table()`` is the Markdown the fuzzers print."""

    def __init__(self):
        self.rows: dict = {}
        self.bad: list = []

    def add(self, family: str, res: Result, verdict: str, what: str = "") -> None:
        r = self.rows.setdefault(family, {"cases": 0, "exit 0": 0, "exit 2": 0, "tracebacks": 0, "multi-line": 0,
                                          "hangs": 0, "other": 0, "max s": 0.0, "max RSS MB": 0.0})
        r["cases"] += 1
        if verdict == "hang":
            r["hangs"] += 1
        elif verdict.startswith("traceback"):
            r["tracebacks"] += 1
        elif verdict.startswith("multi-line"):
            r["multi-line"] += 1
        elif verdict != "ok":
            r["other"] += 1
        elif res.code in (0, 2):
            r[f"exit {res.code}"] += 1
        r["max s"] = max(r["max s"], res.seconds)
        r["max RSS MB"] = max(r["max RSS MB"], res.rss_kb / 1024)
        if verdict != "ok":
            self.bad.append(f"{family}: {what}: {verdict}: {res.stderr.strip()[:300]!r}")

    def table(self) -> str:
        cols = ["cases", "exit 0", "exit 2", "tracebacks", "multi-line", "hangs", "other", "max s", "max RSS MB"]
        lines = ["| family | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
        total = dict.fromkeys(cols, 0)
        for fam, r in sorted(self.rows.items()):
            lines.append(f"| {fam} | " + " | ".join(_cell(r[c]) for c in cols) + " |")
            for c in cols:
                total[c] = max(total[c], r[c]) if c.startswith("max") else total[c] + r[c]
        lines.append("| **total** | " + " | ".join(_cell(total[c]) for c in cols) + " |")
        return "\n".join(lines)


def _cell(v) -> str:
    return f"{v:.2f}" if isinstance(v, float) and v < 10 else f"{v:,.0f}" if isinstance(v, float) else f"{v:,}"


def odd_value(rng: random.Random):
    """One of ODD_VALUES, copied: a shared list set into a document and mutated later would
    change every later case (or contain itself)."""
    return copy.deepcopy(rng.choice(ODD_VALUES))


def mutate_json(rng: random.Random, doc):
    """One generic tree mutation: a value swapped for an odd one, deleted, a number made absurd,
    or a value replaced by the DEEP marker (``_deepen`` makes it deep nesting)."""
    paths = list(_paths(doc))
    path, _ = rng.choice(paths)
    kind = rng.choice(("swap", "swap", "delete", "number", "number", "deep"))
    try:
        if kind == "delete":
            return f"delete {path}", _delete(doc, path)
        if kind == "number":
            nums = [p for p, v in paths if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if nums:
                p = rng.choice(nums)
                return f"number {p}", _set(doc, p, rng.choice(NUMBERS))
        if kind == "deep":
            return f"deep {path}", _set(doc, path, DEEP)
        return f"swap {path}", _set(doc, path, odd_value(rng))
    except (KeyError, IndexError, TypeError):
        return "none", doc


__all__ = ["DEEP", "HOSTILE", "NUMBERS", "ODD_VALUES", "Result", "Tally", "make_hostile", "mutate_json", "odd_value",
           "outcome", "remove", "run_main"]

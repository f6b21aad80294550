"""Fuzz the design loader and ``memdesigner estimate`` with mutated example files.

Every bad file must give exactly one stderr line and exit code 2 (a mutant that is still a valid
design may give exit 0); a Python traceback or a second line is a bug. Mutants come from
resources/examples/*.json with a fixed seed, so a run is reproducible:

    python benchmarks/fuzz_designs.py                 # 10,500 mutants
    python benchmarks/fuzz_designs.py -n 2000 --seed 7 --show 5
    python benchmarks/fuzz_designs.py --api --window  # also memdesigner.load_design and File -> Open

``--api``: ``memdesigner.load_design`` must raise only ``memdesigner.DesignFileError`` (one line)
for a file the CLI rejects. ``--window``: File -> Open (``MainWindow.open_path``, offscreen) must
show exactly one message box of one line, naming the file, and keep the open design.

The mutations are those people's files go through: type swaps, deleted keys and items, huge /
NaN / infinite / negative numbers, deep nesting, non-UTF-8 bytes, UTF-16, truncation, duplicate
ids, cycles and dangling edges. memdesigner.cli.main runs in-process with captured output (a
subprocess per file would take an hour on two cores).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fuzz import DEEP, NUMBERS, ODD_VALUES, _deepen, _delete, _dump, _mutate_bytes, _paths, _set  # noqa: E402, F401

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "resources" / "examples").glob("*.json"))


def _mutate_tree(rng: random.Random, doc):
    paths = list(_paths(doc))
    path, value = rng.choice(paths)
    kind = rng.choice(("swap", "delete", "number", "number", "deep", "dup_node", "cycle", "edge_end",
                       "dup_id", "swap", "number_list"))
    if kind == "swap":
        return f"swap {path}", _set(doc, path, rng.choice(ODD_VALUES))
    if kind == "delete":
        return f"delete {path}", _delete(doc, path)
    if kind == "number":
        nums = [p for p, v in paths if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if nums:
            p = rng.choice(nums)
            return f"number {p}", _set(doc, p, rng.choice(NUMBERS))
    if kind == "number_list":
        lists = [p for p, v in paths if isinstance(v, list) and v and all(isinstance(x, int) for x in v)]
        if lists:
            p = rng.choice(lists)
            return f"numbers {p}", _set(doc, p, [rng.choice(NUMBERS) for _ in range(rng.randint(0, 5))])
    if kind == "deep":
        return f"deep {path}", _set(doc, path, DEEP)
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    edges = doc.get("edges") if isinstance(doc, dict) else None
    if kind == "dup_node" and isinstance(nodes, list) and nodes:
        nodes.insert(rng.randrange(len(nodes) + 1), json.loads(json.dumps(rng.choice(nodes))))
        return "duplicate node", doc
    if kind == "dup_id" and isinstance(nodes, list) and len(nodes) > 1:
        a, b = rng.sample(range(len(nodes)), 2)
        if isinstance(nodes[a], dict) and isinstance(nodes[b], dict):
            nodes[b]["id"] = nodes[a].get("id")
        return "duplicate id", doc
    if kind in ("cycle", "edge_end") and isinstance(edges, list) and isinstance(nodes, list) and len(nodes) > 1:
        ids = [n.get("id") for n in nodes if isinstance(n, dict)]
        if kind == "cycle" and len(ids) > 1:
            edges.append({"from": ids[-1], "to": ids[rng.randrange(len(ids) - 1)]})
            return "cycle", doc
        if edges and isinstance(edges[0], dict):
            e = rng.choice(edges)
            if isinstance(e, dict):
                e[rng.choice(("from", "to"))] = rng.choice([*ids, "nowhere", ""])
            return "edge end", doc
    return f"swap {path}", _set(doc, path, rng.choice(ODD_VALUES))


def mutants(n: int, seed: int = 10, examples=None):
    """``n`` (description, bytes) mutants of the examples, the same for the same seed."""
    rng = random.Random(seed)
    sources = [(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in (examples or EXAMPLES)]
    for i in range(n):
        name, base = sources[i % len(sources)]
        doc = json.loads(json.dumps(base))
        steps = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            what, doc = _mutate_tree(rng, doc)
            steps.append(what)
        data = _deepen(rng, _dump(doc))
        if rng.random() < 0.3:
            what, data = _mutate_bytes(rng, data)
            steps.append(what)
        yield f"{name}: {'; '.join(steps)}", data


def run_cli(path: str) -> tuple[int | str, str]:
    """memdesigner estimate PATH in-process: (exit code or the escaping exception's name, stderr)."""
    from memdesigner.cli import main

    err, out = io.StringIO(), io.StringIO()
    limit = sys.getrecursionlimit()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(["estimate", path])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # what would be a traceback in a real run  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        code = type(exc).__name__
    finally:
        sys.setrecursionlimit(limit)
    return code, err.getvalue()


def classify(code, err: str) -> str:
    if isinstance(code, str):
        return f"traceback {code}"
    if code == 0:
        return "valid (exit 0)"
    if code != 2:
        return f"exit {code}"
    if not err.endswith("\n") or err.count("\n") != 1 or not err.startswith("memdesigner: error: "):
        return "exit 2, not exactly one line"
    return "exit 2, one line"


def run_api(path: str) -> str:
    """memdesigner.load_design(PATH): "ok", "DesignFileError, one line" or what went wrong."""
    import memdesigner

    limit = sys.getrecursionlimit()
    try:
        memdesigner.load_design(path)
    except memdesigner.DesignFileError as err:
        msg = str(err)
        return "DesignFileError, one line" if msg and "\n" not in msg and path in msg else "DesignFileError, bad text"
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        return f"raised {type(exc).__name__}"
    finally:
        sys.setrecursionlimit(limit)
    return "ok"


class WindowOpen:
    """File -> Open in one offscreen MainWindow: the message boxes it shows are counted."""

    def __init__(self):
        import os

        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        from PySide6.QtWidgets import QApplication, QMessageBox

        from memdesigner._qt.main_window import MainWindow

        self.app = QApplication.instance() or QApplication([])
        self.shown: list = []
        QMessageBox.warning = staticmethod(lambda parent, title, text, *a, **k: self.shown.append((title, text)))
        self.win = MainWindow(headless=False)
        self.win.autosave_timer.stop()
        self.keep = self.win.design

    def close(self) -> None:
        self.win.close()
        self.win.service.shutdown()

    def open(self, path: str) -> str:
        self.shown.clear()
        limit = sys.getrecursionlimit()
        try:
            ok = self.win.open_path(path, remember=False)
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, KeyboardInterrupt):
                raise
            return f"raised {type(exc).__name__}"
        finally:
            sys.setrecursionlimit(limit)
        if ok:
            self.win.stack.setClean()
            self.win._settings_dirty = False
            return "opened" if not self.shown else "opened, with a message"
        if len(self.shown) != 1:
            return f"{len(self.shown)} message boxes"
        text = self.shown[0][1]
        return "one message, one line" if "\n" not in text and path in text else "one message, bad text"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10_500)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--show", type=int, default=3, help="examples to print per bad outcome")
    ap.add_argument("--api", action="store_true", help="also memdesigner.load_design on every mutant")
    ap.add_argument("--window", action="store_true", help="also File -> Open in an offscreen window")
    args = ap.parse_args(argv)
    counts = collections.Counter()
    api_counts, win_counts = collections.Counter(), collections.Counter()
    shown = collections.defaultdict(list)
    window = WindowOpen() if args.window else None
    bad = 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "design.json"
        for what, data in mutants(args.n, args.seed):
            path.write_bytes(data)
            code, err = run_cli(str(path))
            kind = classify(code, err)
            counts[kind] += 1
            good = kind.startswith(("valid", "exit 2, one"))
            if not good and len(shown[kind]) < args.show:
                shown[kind].append(f"{what} -> {err.strip()[:300]!r}")
            bad += not good
            if args.api:
                a = run_api(str(path))
                api_counts[a] += 1
                # "ok" where the CLI said exit 2: a loadable design the engine rejects (a cycle)
                ok_a = a in ("DesignFileError, one line", "ok")
                bad += not ok_a
                if not ok_a and len(shown["api " + a]) < args.show:
                    shown["api " + a].append(what)
            if window is not None:
                w = window.open(str(path))
                win_counts[w] += 1
                ok_w = w in ("one message, one line", "opened")
                bad += not ok_w
                if not ok_w and len(shown["window " + w]) < args.show:
                    shown["window " + w].append(f"{what} -> {window.shown[:2]!r}"[:300])
    dt = time.perf_counter() - t0
    if window is not None:
        window.close()
    print(f"{args.n} mutants (seed {args.seed}) in {dt:.1f} s")
    print("memdesigner estimate:")
    for kind, c in counts.most_common():
        print(f"  {c:>6}  {kind}")
    if args.api:
        print("memdesigner.load_design:")
        for kind, c in api_counts.most_common():
            print(f"  {c:>6}  {kind}")
    if window is not None:
        print("File -> Open:")
        for kind, c in win_counts.most_common():
            print(f"  {c:>6}  {kind}")
    for kind, rows in shown.items():
        print(f"{kind}:")
        for r in rows:
            print(f"    {r}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Issue 22's re-checks of every output being atomic (the fast parts are tests/io/test_full_disk.py
and tests/gui/test_gui_hostile_outputs.py):

1. ``kill``: a child process writes the same file over and over, alternating two contents (a
   big design through save_design; the same with its text made once, so that the kill mostly
   lands in the write itself; a report through write_report, rendered once); killed with SIGKILL at
   a random moment, N times per kind. After each kill the file must be one of the two contents
   byte for byte (never torn, never empty, never missing) and, for a design, load.
2. ``race``: two processes save the same file at once (designs; the user device list), a third
   reads it all the while: every read is one of the two contents, and the file ends as the one
   whose last save finished last.
3. ``autosave``: the recovery file swapped for a link to another file, then written (in the
   window's thread and on the worker): the other file must stay as it was; a folder in its
   place must be one error line.

    python benchmarks/atomic_checks.py [--kills 50] [--code DIR]   # DIR: the memdesigner tree to test
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r'''
import sys, time
from pathlib import Path
kind, target, refs, k = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
from memdesigner.model.design import Design

def chain(n, width):
    d = Design(f"chain{n}")
    d.add_node("Input", {"shape": (width,)}, id="in")
    prev = "in"
    for i in range(n):
        d.add_node("Linear", {"out_features": width}, id=f"l{i}", name=f"linear number {i} of {n}")
        d.add_edge(prev, f"l{i}")
        prev = f"l{i}"
    return d

if kind in ("design", "design_write"):
    from memdesigner.io.design_file import design_text, save_design
    items = [chain(6000, 64), chain(3000, 32)]
    texts = [design_text(d).encode() for d in items]
    write = save_design
    if kind == "design_write":  # the text made once: nearly all the loop's time is the write itself
        import memdesigner.io.design_file as df
        made = {id(d): t.decode() for d, t in zip(items, texts)}
        df.design_text = lambda d: made[id(d)]
elif kind == "report":
    import memdesigner.reports.html as html
    from memdesigner.engine.settings import Settings
    from memdesigner.reports import collect
    from memdesigner.reports.write import write_report
    items = [collect(chain(n, 32), Settings(), None, max_batch=False) for n in (1600, 800)]
    texts = [html.render_html(c).encode() for c in items]
    made = {id(c): t.decode() for c, t in zip(items, texts)}
    html.render_html = lambda c: made[id(c)]  # rendered once: the loop is the write
    write = lambda c, p: write_report(c, p, "html")
elif kind == "devices":
    from memdesigner.engine import devices
    items = [[devices.Device(f"gpu-{k}-{i}", f"instance {k} GPU {i}", "cuda", (i + 1) * 2**30)
              for i in range(3000)]]
    texts = None  # the race check tells the two instances apart by the ids
    write = lambda devs, p: devices.save_user_devices(devs, p)
for i, t in enumerate(texts or []):
    (refs / f"ref{i}").write_bytes(t)
if kind != "devices":
    write(items[1], target)
if len(sys.argv) > 5:  # the race: this instance saves its own content only
    items = [items[k % len(items)]]
print("ready", flush=True)
i = 0
began = ended = 0.0
for _ in range(int(sys.argv[5]) if len(sys.argv) > 5 else 10**9):
    began = time.monotonic()
    write(items[i % len(items)], target)
    ended = time.monotonic()
    i += 1
print(f"done {began!r} {ended!r}", flush=True)
'''


def _child(code: Path, kind: str, target: Path, refs: Path, k: int = 0, rounds: int | None = None):
    env = dict(os.environ, PYTHONPATH=str(code), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    argv = [sys.executable, "-c", "import json\n" + CHILD, kind, str(target), str(refs), str(k)]
    if rounds is not None:
        argv.append(str(rounds))
    # cwd: a folder with no memdesigner in it (-c puts the working folder first on sys.path)
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(refs))


def kill_check(code: Path, kind: str, kills: int, rng: random.Random) -> dict:
    torn = missing = bad_load = mid_write = 0
    with tempfile.TemporaryDirectory(prefix="memdesigner-kill-") as tmp:
        tmp = Path(tmp)
        target = tmp / ("r.html" if kind == "report" else "d.json")
        t0 = time.perf_counter()
        for n in range(kills):
            p = _child(code, kind, target, tmp)
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
            if n == 0:
                first = time.perf_counter() - t0
            time.sleep(rng.uniform(0.0, 0.6))  # a few rounds of writing: any moment of one
            p.send_signal(signal.SIGKILL)
            p.wait()
            refs = {(tmp / "ref0").read_bytes(), (tmp / "ref1").read_bytes()}
            if not target.exists():
                missing += 1
            else:
                data = target.read_bytes()
                torn += data not in refs
                if kind != "report" and data in refs:
                    from memdesigner.io.design_file import load_design

                    try:
                        load_design(target)
                    except Exception:
                        bad_load += 1
            left = [q for q in tmp.iterdir() if q.name.endswith(".tmp")]
            mid_write += bool(left)
            for q in left:
                q.unlink()
        size = max(len(r) for r in refs)
    return {"kills": kills, "torn": torn, "missing": missing, "bad_load": bad_load, "mid_write": mid_write,
            "size": size, "start_s": first}


def race_check(code: Path, kind: str, rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="memdesigner-race-") as tmp:
        tmp = Path(tmp)
        target = tmp / ("d.json" if kind == "design" else "devices.json")
        folders = [tmp / "a", tmp / "b"]
        for f in folders:
            f.mkdir()
        procs = [_child(code, kind, target, folders[k], k, rounds) for k in range(2)]
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        reads = torn = 0
        seen = set()
        while any(p.poll() is None for p in procs):
            try:
                data = target.read_bytes()
            except FileNotFoundError:
                continue
            reads += 1
            try:
                doc = json.loads(data)
                seen.add(_owner(kind, doc))
            except ValueError:
                torn += 1
        outs = [p.communicate() for p in procs]
        crashed = [k for k, p in enumerate(procs) if p.returncode != 0]
        last = [tuple(map(float, o[0].split("done ")[-1].split())) if "done " in o[0] else (-1.0, -1.0)
                for o in outs]  # (began, ended) of each instance's last save
        final = _owner(kind, json.loads(target.read_bytes()))
        winner = max(range(2), key=lambda k: last[k][1])
        if last[winner][0] < last[1 - winner][1]:
            winner = final  # the two last saves overlapped: either may rename last
        errors = [o[1].strip().splitlines()[-1] for k, o in enumerate(outs) if k in crashed]
        leftover = sorted(p.name for p in tmp.iterdir() if p.is_file() and p != target)
    return {"rounds": rounds, "reads": reads, "torn": torn, "owners_seen": sorted(seen), "final": final,
            "last_finisher": winner, "crashed": crashed, "errors": errors, "leftover": leftover}


def _owner(kind: str, doc: dict):
    if kind == "design":
        return {"chain6000": 0, "chain3000": 1}.get(doc.get("name"), "?")
    ids = {d["id"].split("-")[1] for d in doc["devices"]}
    return int(ids.pop()) if len(ids) == 1 else "mixed"


AUTOSAVE = r'''
import os, sys
from pathlib import Path
tmp = Path(sys.argv[1])
os.environ["MEMDESIGNER_RECOVERY_DIR"] = str(tmp / "recovery")
from memdesigner._qt.document import recovery
from memdesigner.io.design_freeze import freeze
from memdesigner.model.design import Design
def design(name):
    d = Design(name)
    d.add_node("Input", {"shape": (8,)}, id="in")
    return d
out = {}
for way in ("write", "worker"):
    slot = recovery.Slot()
    slot.write(design("first"), None)
    victim = tmp / f"victim-{way}.txt"
    victim.write_text("someone else's file\n")
    slot.file.unlink()
    slot.file.symlink_to(victim)
    try:
        if way == "write":
            slot.write(design("second"), None)
        else:
            slot.begin_write(freeze(design("second")), None)()
        err = ""
    except OSError as e:
        err = str(e)
    out[f"link_{way}"] = {"victim_kept": victim.read_text() == "someone else's file\n",
                          "autosave_is_link": slot.file.is_symlink(), "error": err}
    slot.file.unlink()
    slot.file.mkdir()
    try:
        if way == "write":
            slot.write(design("third"), None)
        else:
            slot.begin_write(freeze(design("third")), None)()
        msg = "no error"
    except OSError as e:
        try:
            from memdesigner.io.atomic_write import cannot_write
            msg = cannot_write(slot.file, e)
        except ImportError:
            msg = f"{type(e).__name__}: {e}"
    out[f"dir_{way}"] = {"message": msg, "temp_left": len(list(slot.file.parent.glob(".*.tmp")))}
    slot.file.rmdir()
    slot.release()
import json
print(json.dumps(out))
'''


def autosave_check(code: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="memdesigner-autosave-") as tmp:
        r = subprocess.run([sys.executable, "-c", AUTOSAVE, tmp], env=dict(os.environ, PYTHONPATH=str(code)),
                           capture_output=True, text=True, timeout=120, cwd=tmp)
        if r.returncode != 0:
            return {"crashed": r.stderr.strip().splitlines()[-1]}
        return json.loads(r.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=150, help="saves per instance in the race")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--code", default=str(ROOT))
    args = ap.parse_args(argv)
    code = Path(args.code)
    rng = random.Random(args.seed)
    print(f"code: {code}")
    bad = 0
    print(f"{'kill -9 during':<16} {'kills':>5} {'hit a write':>11} {'torn':>5} {'missing':>7} {'not loading':>11} {'file':>12}")
    for kind in ("design", "design_write", "report"):
        r = kill_check(code, kind, args.kills, rng)
        bad += r["torn"] + r["missing"] + r["bad_load"]
        print(f"{kind:<16} {r['kills']:>5} {r['mid_write']:>11} {r['torn']:>5} {r['missing']:>7} {r['bad_load']:>11} "
              f"{r['size']:>10,} B")
    print(f"{'two instances':<16} {'saves':>5} {'reads':>6} {'torn':>5} {'seen':>7} {'final':>5} {'last':>4}  crashed / left")
    for kind in ("design", "devices"):
        r = race_check(code, kind, args.rounds)
        ok = not r["torn"] and not r["crashed"] and r["final"] == r["last_finisher"] and not r["leftover"]
        bad += not ok
        print(f"{kind:<16} {r['rounds']:>5} {r['reads']:>6} {r['torn']:>5} {','.join(map(str, r['owners_seen'])):>7} "
              f"{r['final']!s:>5} {r['last_finisher']:>4}  {r['errors'] or '-'} {r['leftover'] or ''}")
    a = autosave_check(code)
    print("autosave:", json.dumps(a))
    if "crashed" in a:
        bad += 1
    else:
        bad += sum(not a[f"link_{w}"]["victim_kept"] for w in ("write", "worker"))
        bad += sum(a[f"dir_{w}"]["message"] == "no error" or a[f"dir_{w}"]["temp_left"] > 0 for w in ("write", "worker"))
    print("all checks passed" if not bad else f"{bad} check(s) FAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

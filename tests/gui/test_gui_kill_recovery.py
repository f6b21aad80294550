"""Issue 10 §3: kill the window with SIGKILL at random moments while it is being edited (graph
and run settings, undo and redo); the next instance must recover every edit older than the
autosave delay, and no autosave on disk is ever torn. Deterministic seed; each instance recovers
its predecessor's work through the real start-up path, then is edited and killed in turn."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from crash_driver import __file__ as DRIVER

from memdesigner._qt.document import recovery
from memdesigner.io import design_journal

KILLS = 21  # the issue asks for at least 20
DELAY_MS = 150
WARM = 3  # instances started ahead


def _log(path: Path) -> list[tuple[str, float, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:  # a line cut by the kill has fewer fields
            out.append((parts[0], float(parts[1]), parts[2]))
    return out


def _check_files(folder: Path) -> int:
    """Every autosave on disk parses and loads with every complete step of its journal (only a
    last line without its newline, the step a kill cut short, may be dropped); returns how many
    autosaves there are."""
    files = sorted(folder.glob("autosave-*.json"))
    for f in files:
        data = json.loads(f.read_text())  # raises on a torn file
        journal = (folder / data["journal"]).read_bytes()
        complete = journal[:journal.rfind(b"\n") + 1]
        assert len(design_journal.read_steps(journal)) == complete.count(b"\n")
        recovery.load(recovery.Recoverable(f, None, 0.0, ""))  # raises on an invalid file
    return len(files)


class Instances:
    """The driver's zygote: each instance is a fork of one warm process."""

    def __init__(self, tmp_path: Path, env: dict):
        self.tmp_path = tmp_path
        self.pids: list[int] = []
        self.proc = subprocess.Popen([sys.executable, DRIVER], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def start(self, k: int) -> tuple[int, Path]:
        log = self.tmp_path / f"run{k}.log"
        self.proc.stdin.write(f"{log} {k}\n")
        self.proc.stdin.flush()
        pid = int(self.proc.stdout.readline())
        self.pids.append(pid)
        return pid, log

    def reap(self, pid: int) -> None:
        self.proc.stdin.write(f"reap {pid}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "ok\n"
        self.pids.remove(pid)

    def close(self):
        for pid in self.pids:  # whatever is still running (a failed check ends the test early)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.stdin.close()
        self.proc.wait(30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_kill_minus_nine_loses_no_edit_older_than_the_autosave_delay(tmp_path):
    rng = random.Random(20261201)
    folder = tmp_path / "recovery"
    env = dict(os.environ, MEMDESIGNER_RECOVERY_DIR=str(folder), MEMDESIGNER_AUTOSAVE_MS=str(DELAY_MS),
               QT_QPA_PLATFORM="offscreen", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    zygote = Instances(tmp_path, env)
    warm = [zygote.start(k) for k in range(WARM)]  # instances start up while others are edited
    try:
        _run(zygote, warm, folder, rng)
    finally:
        zygote.close()


def _run(zygote, warm, folder, rng):
    checked = made = recovered_edits = old = old_recovered = 0
    newest_lost = []  # per kill: the age of each edit not recovered
    previous = None  # (log lines, kill time) of the instance killed last
    for k in range(KILLS + 1):
        pid, log = warm.pop(0)
        if k + WARM <= KILLS:
            warm.append(zygote.start(k + WARM))
        Path(f"{log}.go").touch()
        deadline = time.time() + 120
        while not _log(log):
            assert _alive(pid), f"instance {k} died"
            assert time.time() < deadline, "the driver did not start"
            time.sleep(0.01)
        recovered = _log(log)[0]
        assert recovered[0] == "R"
        if previous is not None:
            lines, killed_at = previous
            # R (recovered and rewritten) and D lines: states known to be on disk; a W line (a
            # write begun) may have reached the disk before the kill too
            last = max(i for i, line in enumerate(lines) if line[0] in "RD")
            candidates = {sig for kind, _, sig in lines[last:] if kind in "RDW"}
            assert recovered[2] in candidates, f"kill {k}: not a state written last"
            # the newest place that state was in (an undo can come back to an earlier state)
            pos = max(i for i in range(last, len(lines)) if lines[i][2] == recovered[2])
            for i, (kind, t, _) in enumerate(lines):
                if kind != "E":
                    continue
                made += 1
                saved = i <= pos
                recovered_edits += saved
                if not saved:
                    newest_lost.append(killed_at - t)
                if t < killed_at - DELAY_MS / 1000:
                    old += 1
                    old_recovered += saved
                    assert saved, f"kill {k}: an edit {killed_at - t:.3f} s old was not recovered"
            checked += 1
        if k == KILLS:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(rng.uniform(0.1, 1.5))
        killed_at = time.time()
        os.kill(pid, signal.SIGKILL)
        zygote.reap(pid)
        assert _check_files(folder) <= 1  # never torn, and the recovered one is not left beside it
        previous = (_log(log), killed_at)
    assert checked == KILLS and old_recovered == old > 0
    oldest = max(newest_lost, default=0.0)
    print(f"\n{KILLS} kills, {made} edits, {recovered_edits} recovered; all {old} older than the {DELAY_MS} ms "
          f"autosave delay; {len(newest_lost)} lost, the oldest {oldest * 1000:.1f} ms old")

"""The window under a crash test (tests/gui/test_gui_kill_recovery.py): it recovers what the
previous, killed instance left, logs the recovered state, then edits the graph and the run
settings at random until it is killed with SIGKILL, logging each edit's time and resulting state
(E) and each write of the autosave or its journal (W before, D once it is recoverable, with the
state written; a full write on the worker is recoverable when it lands).

    python crash_driver.py             (env: MEMDESIGNER_RECOVERY_DIR, MEMDESIGNER_AUTOSAVE_MS)

reads "LOG SEED" lines on stdin and answers each with the pid of a new instance ("reap PID"
waits until that killed instance is gone): a fork of this
process, which has imported PySide6, pyqtgraph and memdesigner once (no QApplication, no thread
yet, so forking is safe), so an instance starts in a fraction of a second. An instance builds its
window, then waits for the file LOG.go before it looks for work to recover: the test warms the
next instance while the current one is being edited.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time


def state_sig(design, settings: dict) -> str:
    """What must survive a crash: nodes with their props, edges, and the run settings."""
    nodes = sorted((n.id, n.type, json.dumps(n.props, sort_keys=True, default=list)) for n in design.nodes.values())
    edges = sorted((e.src, e.dst, e.src_port, e.dst_port) for e in design.edges)
    keep = {k: settings.get(k) for k in ("mode", "batch", "optimizer", "dtype")}
    return hashlib.sha1(json.dumps([nodes, edges, keep], default=list).encode()).hexdigest()[:16]


def main(log_path: str, seed: int) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication([sys.argv[0]])
    app.setOrganizationName("memdesigner-crashtest")
    app.setApplicationName("memdesigner-crashtest")
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, os.environ["MEMDESIGNER_RECOVERY_DIR"] + "-settings")
    from memdesigner._qt.document.commands import AddEdgeCmd, AddNodeCmd, SetPropCmd
    from memdesigner._qt.main_window import MainWindow
    from memdesigner.model.design import Design

    rng = random.Random(seed)
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 (line-buffered: each line reaches the file at once)
    win = MainWindow()
    win.show()
    app.processEvents()
    zygote = os.getppid()
    while not os.path.exists(log_path + ".go"):  # the previous instance is dead now
        if os.getppid() != zygote:
            os._exit(0)  # the test is gone
        time.sleep(0.005)
    if not win.offer_recovery(ask=lambda rec: "recover"):
        d = Design("crash")
        d.add_node("Input", {"shape": (64,)}, id="x", pos=(0, 0))
        win.set_design(d, None, layout=False)

    def sig() -> str:
        return state_sig(win.design, win.document.settings.to_dict())

    log.write(f"R {time.time():.6f} {sig()}\n")
    slot = win.document.slot

    def logged(write):
        """W: about to put this state on disk (a full autosave or a journal step), D: it is."""
        def run(*a):
            s = sig()
            log.write(f"W {time.time():.6f} {s}\n")
            out = write(*a)
            log.write(f"D {time.time():.6f} {s}\n")
            return out
        return run

    slot.write = logged(slot.write)
    import threading

    lock, last = threading.Lock(), [None]  # the state the newest write or append put in the files

    def append(ops, real=slot.append):
        """D only once it is recoverable: while a worker's full write has not landed, the journal
        it goes to is named by no autosave yet (its D comes with the landing)."""
        with lock:
            s = sig()
            log.write(f"W {time.time():.6f} {s}\n")
            real(ops)
            last[0] = s
            if slot.pending is None:
                log.write(f"D {time.time():.6f} {s}\n")

    def begin_write(frozen, path, real=slot.begin_write):
        with lock:
            s = sig()
            log.write(f"W {time.time():.6f} {s}\n")
            last[0] = s
            return real(frozen, path)

    def land(*a, real=slot._land):
        with lock:  # on the worker: the files now hold the autosave and every append made before
            landed = real(*a)
            if landed and a[4] is not None:  # a full write (a compaction leaves the state as it is)
                log.write(f"D {time.time():.6f} {last[0]}\n")
            return landed

    slot.append, slot.begin_write, slot._land = append, begin_write, land
    count = [0]

    def edit():
        d = win.design
        linears = [n for n in d.nodes.values() if n.type == "Linear"]
        r = rng.random()
        if r < 0.3 or not linears:
            count[0] += 1
            src = rng.choice(list(d.nodes))
            cmd = AddNodeCmd(d, "Linear", {"out_features": rng.randint(1, 512)}, (rng.random() * 900, 0.0))
            win.stack.beginMacro("add")
            win.stack.push(cmd)
            if d.check_edge(src, cmd.node.id) is None:
                win.stack.push(AddEdgeCmd(d, src, cmd.node.id))
            win.stack.endMacro()
        elif r < 0.55:
            n = rng.choice(linears)
            win.stack.push(SetPropCmd(d, n.id, "out_features", rng.randint(1, 512)))
        elif r < 0.75:
            win.settings_bar.apply_dict({"batch": rng.randint(1, 64)})
        elif r < 0.82:
            mode = win.settings_bar.mode
            mode.setCurrentIndex((mode.currentIndex() + 1) % 2)  # inference <-> train, as a user picks it
        elif r < 0.94 and win.stack.canUndo():
            win.stack.undo()
        elif win.stack.canRedo():
            win.stack.redo()
        log.write(f"E {time.time():.6f} {sig()}\n")
        if os.getppid() != zygote:
            os._exit(0)  # the test is gone: nobody will kill this instance
        if rng.random() < 0.15:  # a long UI turn (a big repaint, a loaded machine): timers run late
            time.sleep(rng.uniform(0.2, 0.4))
        QTimer.singleShot(rng.randint(10, 60), edit)

    QTimer.singleShot(0, edit)
    app.exec()


def zygote() -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import PySide6.QtWidgets  # noqa: F401  (imported once, shared by every fork)

    import memdesigner._qt.main_window  # noqa: F401

    for line in sys.stdin:
        if line.startswith("reap "):  # wait until a killed instance is gone, threads, files, locks and all
            os.waitpid(int(line.split()[1]), 0)
            sys.stdout.write("ok\n")
            sys.stdout.flush()
            continue
        log_path, seed = line.split()
        pid = os.fork()
        if pid == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            try:
                main(log_path, int(seed))
            finally:
                os._exit(0)
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    zygote()

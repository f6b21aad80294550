"""What the autosave costs the UI thread per edit on a big design (issue 10 §5: no stall > 50 ms).

A DesignDocument with its autosave (a temporary recovery folder) holds a generated chain; each
row is the UI thread's CPU and wall time of one undo-stack push, the autosave's part included:

- ``first_edit``: the first edit of an unsaved stretch (the full autosave begins);
- ``edit``: a later edit (one journal line);
- ``rename_design``: the design's name changed, then an edit (a ``meta`` journal step);
- ``worker_write``: the wall time until the worker's full write has landed (off the UI thread).

    python benchmarks/autosave_cost.py [--nodes 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--each", action="store_true", help="list each repeat's CPU time")
    args = ap.parse_args(argv)
    os.environ["MEMDESIGNER_RECOVERY_DIR"] = tempfile.mkdtemp(prefix="autosave-cost-")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([sys.argv[0]])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gc

    import superqt.utils  # noqa: F401  (the window's estimate imported it long before an edit)
    from gui_latency import make_chain

    from memdesigner._qt.document.commands import SetPropCmd
    from memdesigner._qt.document.document import DesignDocument

    t0, t1, _ = gc.get_threshold()
    gc.set_threshold(t0, t1, 1 << 30)  # as in the window (_qt/scheduling/idle_gc.py): full collections only when idle
    doc = DesignDocument(remember=False)
    doc._timer.setInterval(10**8)  # no periodic rewrite during the measurement
    design = make_chain(args.nodes)
    doc.replace(design, None)
    linears = [n.id for n in design.nodes.values() if n.type == "Linear"]
    rows: dict[str, list] = {}

    def timed(name, fn):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        rows.setdefault(name, []).append(((time.thread_time() - c0) * 1000, (time.perf_counter() - t0) * 1000))

    def settle():
        end = time.perf_counter() + 60
        while getattr(doc, "_writing", None) is not None and time.perf_counter() < end:
            app.processEvents()
            time.sleep(0.001)

    for i in range(args.repeats):
        nid = linears[(i * 7) % len(linears)]
        t0 = time.perf_counter()
        timed("first_edit", lambda nid=nid, i=i: doc.stack.push(SetPropCmd(design, nid, "out_features", 300 + i)))
        settle()
        rows.setdefault("worker_write", []).append((float("nan"), (time.perf_counter() - t0) * 1000))
        timed("edit", lambda nid=nid, i=i: doc.stack.push(SetPropCmd(design, nid, "out_features", 400 + i)))

        def rename(nid=nid, i=i):
            design.name = f"renamed {i}"
            doc.stack.push(SetPropCmd(design, nid, "out_features", 500 + i))
        timed("rename_design", rename)
        settle()
        doc.stack.setClean()  # saved: the next edit starts an unsaved stretch again
        doc.discard_autosave()
    print(f"{len(design.nodes)} nodes, {args.repeats} repeats; UI thread per action (median / max)")
    print(f"{'action':<16}{'cpu ms':>16}{'wall ms':>18}")
    for name, vals in rows.items():
        cpu = [c for c, _ in vals]
        wall = [w for _, w in vals]
        c = "-" if cpu[0] != cpu[0] else f"{statistics.median(cpu):6.1f} / {max(cpu):6.1f}"
        print(f"{name:<16}{c:>16}{statistics.median(wall):9.1f} / {max(wall):6.1f}"
              + (f"   each cpu: {' '.join(f'{x:.1f}' for x in cpu)}" if args.each else ""))
    doc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

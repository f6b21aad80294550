"""Where the time of one edit goes, from the edit to the updated timeline (gui_latency --breakdown).

Wraps the window's own steps (the estimate service, the worker's compute and its parts, the
presenter and each view it fans out to) with timestamps, per estimate generation, and reports
each part's median and p95. Parts on the worker thread are wall times there (the UI thread may
run meanwhile); ``to_worker`` / ``to_ui`` are the hand-over latencies between the threads.
"""

from __future__ import annotations

import functools
import statistics
import time

# (name, what) in path order; the sum of the top-level ones (no dot) is fire -> applied
PARTS = (
    ("fire", "UI: debounce timer fired, request built and submitted"),
    ("to_worker", "hand-over: submit -> job runs on the worker thread"),
    ("w.snapshot", "estimate (worker or inline): detached copy of the design"),
    ("w.analyze", "worker: shape analysis (engine)"),
    ("w.estimate", "worker: the estimate (engine)"),
    ("w.layers", "worker: report rows (engine)"),
    ("w.figure", "worker: timeline polygons (timeline_data.build)"),
    ("w.other", "worker: the rest of compute() (GC pause, checks, result)"),
    ("worker", "worker: compute() in all (inline: the estimate's turn)"),
    ("w.gap", "inline: the estimate's turn end -> the turn of its rows, drawing and views"),
    ("w.views", "inline: rows + drawing in that turn (add_views)"),
    ("to_ui", "hand-over: job returned -> result on the UI thread"),
    ("present", "UI turn 1: presenter.present in all"),
    ("p.summary", "  summary labels"),
    ("p.timeline", "  rank picker + timeline set_report"),
    ("p.legend", "  legend"),
    ("total", "fire -> timeline updated (turn 1 done)"),
    ("between", "UI: turn 1 end -> turn 2 start (other events)"),
    ("views", "UI turn 2: presenter.present_views in all"),
    ("v.scene", "  canvas apply_result (first slice)"),
    ("v.inspector", "  inspector"),
    ("v.table", "  layer table"),
    ("all_views", "fire -> every view updated (result_applied)"),
    ("paint", "timeline repaint afterwards (forced, apart)"),
)


def _wrap(obj, name, before=None, after=None):
    fn = getattr(obj, name)

    @functools.wraps(fn)
    def w(*a, **k):
        if before:
            before()
        try:
            return fn(*a, **k)
        finally:
            if after:
                after()

    setattr(obj, name, w)
    return fn


class Breakdown:
    def __init__(self, win):
        from memdesigner._qt.jobs import estimator
        from memdesigner._qt.memory import timeline_data

        self.win = win
        self.rec: dict[int, dict] = {}
        self.cur: dict | None = None  # the worker job's record
        self.rows: list[dict] = []
        svc, pres = win.service, win.presenter
        def now():  # wall and this thread's CPU time
            return (time.perf_counter(), time.thread_time())

        def mark(key, which="ui"):
            def f():
                r = self.ui if which == "ui" else self.cur
                if r is not None:
                    r[key] = now()
            return f

        self.ui: dict | None = None
        self.in_compute = False  # inside compute() (on the worker, or inline on the UI thread)

        orig_fire = svc.fire

        def fire():
            rec = self.ui = {"fire0": now()}
            self.rec[svc.gen + 1] = rec  # (the generation fire gives it: an inline estimate is shown inside fire)
            gen = orig_fire()
            rec["fire1"] = now()
            self.rec[gen] = rec
            return gen

        svc.fire = fire  # (installed before the harness, whose timer calls it)

        orig_compute = estimator.compute

        def compute(req, cancel=None, **kw):
            r = self.rec.get(req.gen)
            self.cur = r if r is not None else {}
            self.cur["w0"] = now()
            self.in_compute = True
            try:
                return orig_compute(req, cancel, **kw)
            finally:
                self.in_compute = False
                self.cur["w1"] = now()

        estimator.compute = compute
        orig_add_views = estimator.add_views

        def add_views(res):  # an inline estimate's rows and drawing, a turn after its estimate
            r = self.rec.get(res.gen)
            self.cur = r if r is not None else {}
            self.cur["av0"] = now()
            self.in_compute = True
            try:
                return orig_add_views(res)
            finally:
                self.in_compute = False
                self.cur["av1"] = now()

        estimator.add_views = add_views
        for mod, name, key in ((estimator, "snapshot", "snap"), (estimator, "analyze", "an"),
                               (estimator, "estimate", "est"), (timeline_data, "build", "fig")):
            def mk(fn, key):
                @functools.wraps(fn)
                def w(*a, **k):
                    if self.cur is not None and self.in_compute:
                        self.cur[key + "0"] = now()
                    try:
                        return fn(*a, **k)
                    finally:
                        if self.cur is not None and self.in_compute:
                            self.cur[key + "1"] = now()
                return w
            setattr(mod, name, mk(getattr(mod, name), key))

        orig_finished = svc._on_finished

        def on_finished(res):
            r = self.rec.get(res.gen)
            if r is not None:
                r["ui0"] = now()
            self.ui = r
            return orig_finished(res)

        svc._on_finished = on_finished
        # (fire looks _on_finished up at each submit: the wrapper is the one used)
        _wrap(pres, "present", mark("p0"), mark("p1"))
        _wrap(win.scene, "apply_result", mark("ps0"), mark("ps1"))
        _wrap(win.inspector, "apply_analysis", mark("pi0"), mark("pi1"))
        _wrap(win.summary, "set_report", mark("pu0"), mark("pu1"))
        orig_plots = pres.present_views

        def plots(res):
            r = self.rec.get(res.gen)
            self.ui = r
            if r is not None:
                r["q0"] = now()
            try:
                return orig_plots(res)
            finally:
                if r is not None:
                    r["q1"] = now()

        pres.present_views = plots
        _wrap(win.rank_picker, "show_report", mark("qt0"), mark("qt1"))
        _wrap(win.legend, "setText", mark("ql0"), mark("ql1"))
        _wrap(win.table, "set_rows", mark("qb0"), mark("qb1"))

    def paint(self, gen):
        """Time one forced repaint of the timeline, after its update (apart from the path)."""
        r = self.rec.get(gen)
        t0, c0 = time.perf_counter(), time.thread_time()
        self.win.timeline.viewport().repaint()
        if r is not None:
            r["paint"] = (time.perf_counter() - t0) * 1000
            r["paint_cpu"] = (time.thread_time() - c0) * 1000

    def take(self, gen):
        r = self.rec.get(gen)
        if r is None or "q1" not in r:
            return
        ms = lambda a, b: (r[b][0] - r[a][0]) * 1000 if a in r and b in r else None  # noqa: E731
        cpu = lambda a, b: (r[b][1] - r[a][1]) * 1000 if a in r and b in r else None  # noqa: E731
        inline = "w0" in r and r["w0"][0] < r["fire1"][0]  # estimated on the UI thread, inside fire
        fire_end = "w0" if inline else "fire1"
        row = {"fire": ms("fire0", fire_end), "to_worker": None if inline else ms("fire1", "w0"),
               "w.snapshot": ms("snap0", "snap1"), "w.analyze": ms("an0", "an1"), "w.estimate": ms("est0", "est1"),
               "w.layers": ms("av0" if inline else "est1", "fig0"), "w.gap": ms("w1", "av0"),
               "w.views": ms("av0", "av1"), "w.figure": ms("fig0", "fig1"), "worker": ms("w0", "w1"),
               "to_ui": ms("w1", "ui0"), "present": ms("p0", "p1"), "v.scene": ms("ps0", "ps1"),
               "v.inspector": ms("pi0", "pi1"), "p.summary": ms("pu0", "pu1"), "between": ms("p1", "q0"),
               "views": ms("q0", "q1"), "p.timeline": ms("qt0", "qt1"), "p.legend": ms("ql0", "ql1"),
               "v.table": ms("qb0", "qb1"), "total": ms("fire0", "p1"), "all_views": ms("fire0", "q1"),
               "paint": r.get("paint"), "cpu:paint": r.get("paint_cpu")}
        inner = [row[k] for k in ("w.snapshot", "w.analyze", "w.estimate") + (() if inline else ("w.layers", "w.figure"))]
        if row["worker"] is not None and None not in inner[1:]:
            row["w.other"] = row["worker"] - sum(x or 0.0 for x in inner)
        same_thread = {"fire": ("fire0", fire_end), "w.snapshot": ("snap0", "snap1"), "w.analyze": ("an0", "an1"),
                       "w.estimate": ("est0", "est1"),
                       "w.layers": ("av0" if inline else "est1", "fig0"), "w.views": ("av0", "av1"), "w.figure": ("fig0", "fig1"),
                       "worker": ("w0", "w1"), "present": ("p0", "p1"), "v.scene": ("ps0", "ps1"),
                       "v.inspector": ("pi0", "pi1"), "p.summary": ("pu0", "pu1"), "views": ("q0", "q1"),
                       "p.timeline": ("qt0", "qt1"), "v.table": ("qb0", "qb1")}
        for k, (a, b) in same_thread.items():
            row["cpu:" + k] = cpu(a, b)
        self.rows.append(row)

    def report(self, pct) -> str:
        lines = [f"edit -> timeline, by part ({len(self.rows)} edits; ms: wall median / p95, "
                 "that thread's CPU median / p95):"]
        for name, what in PARTS:
            vals = [r[name] for r in self.rows if r.get(name) is not None]
            if not vals:
                continue
            cpus = [r["cpu:" + name] for r in self.rows if r.get("cpu:" + name) is not None]
            c = f"{statistics.median(cpus):7.1f} {pct(cpus, 0.95):7.1f}" if cpus else " " * 15
            lines.append(f"  {name:<12} {statistics.median(vals):7.1f} {pct(vals, 0.95):7.1f}  {c}   {what}")
        return "\n".join(lines)


def threading_main():
    import threading

    return threading.current_thread() is threading.main_thread()

"""GUI latency on big generated designs (offscreen Qt): how long the UI thread is busy per action.

For each design size and shape (a long residual chain, a wide DAG of parallel branches) it runs
the window's own code paths — open, select-all, delete, undo and redo of it, paste, auto-layout, typing in
Batch, zoom and pan, real wheel events (also while a re-opened design is still being built:
``wheel_building``, done = the canvas painted), property edits — and prints, per action, the median and p95 over repeats of

- ``stall_ms``: the longest single UI-thread slice the action caused (its own call, or any event
  loop turn until the window settled, seen by a 2 ms heartbeat timer);
- ``done_ms``: from the action to the window settled (for edits: to the updated timeline; the
  estimate itself runs on the worker thread).

Edits report ``edit_to_timeline_painted``: from the edit (the inspector's commit) to the new
timeline painted (the timeline's stack item drew the new result's figure), any debounce
included — the target. Also the time to the timeline updated (not yet painted) with and without
the wait before the estimate started, the time until every view showed the result
(``edit_all_views``: canvas labels, inspector, table), and the estimate's own wall and CPU time
(``estimate_on_worker``: on the worker or, when short, on the UI thread: _qt/scheduling/estimate_timing.py).
``--ab`` interleaves, in one run, edits scheduled as before (a 40 ms debounce, the worker:
``*_BEFORE``), at once on the worker (``*_0ms_WORKER``) and by estimate_timing.py, so the three
meet the same machine load. The waits sleep in Qt's event loop (``--busy-wait``: the earlier
polling loop, which kept a CPU and the GIL busy). ``--turns ACTION`` lists the longest
UI-thread turns of one action, each named by its receiver and event type, with the functions
that took the time (``--turns-plain``: without the profiler, true times). ``--breakdown`` splits
each edit's time to the timeline into its parts (benchmarks/_edit_breakdown.py).
Targets (issue 10 §5, on the 2-core machine): at 1,000 nodes every stall <= 50 ms and an edit's
timeline painted <= 50 ms p95 (debounce included); a 10,000-node design opens in <= 2 s. Issue 21:
at 10,000 nodes every action's longest turn <= 100 ms on an idle machine (figures, before and
after: docs/latency-10k.md; on a shared machine read the cpu columns).

    python benchmarks/gui_latency.py [--nodes 1000,10000] [--shapes chain,wide] [--repeats 5]
                                     [--actions open,select_all,...] [--profile ACTION] [--json]
                                     [--turns ACTION [--turns-plain]] [--breakdown] [--ab] [--busy-wait]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ACTIONS = ("open", "wheel_building", "select", "select_all", "delete", "undo_delete", "paste", "auto_layout",
           "layout_top_down", "batch", "type_batch", "setting", "zoom", "wheel", "pan", "find", "edit")


def make_chain(n_nodes: int):
    """A deep residual MLP: Linear(hidden) → GELU → Linear(256) → LayerNorm → Add(skip), repeated.
    Editing a hidden width keeps the graph valid, as most real edits do."""
    from memdesigner.model.design import Design

    d = Design(f"chain{n_nodes}")
    prev = skip = d.add_node("Input", {"shape": (128, 256)}).id
    while len(d.nodes) < n_nodes:
        a = d.add_node("Linear", {"out_features": 256}).id
        d.add_edge(prev, a, check_cycle=False)
        b = d.add_node("GELU").id
        d.add_edge(a, b, check_cycle=False)
        b2 = d.add_node("Linear", {"out_features": 256}, name=f"proj{len(d.nodes)}").id
        d.add_edge(b, b2, check_cycle=False)
        c = d.add_node("LayerNorm", {"normalized_shape": (256,)}).id
        d.add_edge(b2, c, check_cycle=False)
        e = d.add_node("Add").id
        d.add_edge(c, e, 0, 0, check_cycle=False)
        d.add_edge(skip, e, 0, 1, check_cycle=False)
        prev = skip = e
    return d


def make_wide(n_nodes: int, width: int = 40):
    """A wide DAG: ``width`` parallel branches (Linear → GELU → Linear(256) ...) from one input,
    joined pairwise by Adds every few layers and at the end (many nodes per layout column)."""
    from memdesigner.model.design import Design

    d = Design(f"wide{n_nodes}")
    x = d.add_node("Input", {"shape": (128, 256)}).id
    heads = [x] * width
    depth = max(1, (n_nodes - 2 * width) // (3 * width))
    for level in range(depth):
        for i in range(width):
            a = d.add_node("Linear", {"out_features": 256}).id
            d.add_edge(heads[i], a, check_cycle=False)
            b = d.add_node("GELU").id
            d.add_edge(a, b, check_cycle=False)
            if level % 4 == 3:  # mix neighbouring branches
                m = d.add_node("Add").id
                d.add_edge(b, m, 0, 0, check_cycle=False)
                d.add_edge(heads[(i + 1) % width], m, 0, 1, check_cycle=False)
                heads[i] = m
            else:
                c = d.add_node("Linear", {"out_features": 256}, name=f"proj{len(d.nodes)}").id
                d.add_edge(b, c, check_cycle=False)
                heads[i] = c
    while len(heads) > 1:
        nxt = []
        for i in range(0, len(heads) - 1, 2):
            m = d.add_node("Add").id
            d.add_edge(heads[i], m, 0, 0, check_cycle=False)
            d.add_edge(heads[i + 1], m, 0, 1, check_cycle=False)
            nxt.append(m)
        if len(heads) % 2:
            nxt.append(heads[-1])
        heads = nxt
    return d


make_design = make_chain  # the name earlier callers import


def send_wheel(view, notches: int):
    """A real wheel event over the middle of the canvas (120 per notch; negative: away), as Qt
    delivers a mouse's: to the view's viewport."""
    from PySide6.QtCore import QPoint, QPointF, Qt
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    vp = view.viewport()
    at = QPointF(vp.width() / 2, vp.height() / 2)
    QApplication.sendEvent(vp, QWheelEvent(at, QPointF(vp.mapToGlobal(at.toPoint())), QPoint(), QPoint(0, 120 * notches),
                                           Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False))


class PaintCount:
    """Paint events of a widget (an event filter: the canvas's viewport)."""

    def __init__(self, widget):
        from PySide6.QtCore import QEvent, QObject

        count = self

        class Filter(QObject):
            def eventFilter(self, obj, ev):  # noqa: N802 (Qt's name)
                if ev.type() == QEvent.Type.Paint:
                    count.n += 1
                return False

        self.n = 0
        self._filter = Filter(widget)
        widget.installEventFilter(self._filter)


class TurnLog:
    """With --turns: every outermost event dispatch on the UI thread timed (wall and CPU), named by
    its receiver and event type, with the Python functions that took its time (cProfile per turn,
    which slows it down: the figures of that run are not the benchmark's)."""

    def __init__(self):
        self.depth = 0
        self.records: list = []  # (wall_ms, cpu_ms, what, top functions)
        self.on = False
        self.profile = True  # --turns-plain: no cProfile (true times, no functions)
        self.gc_ms = 0.0  # time in full garbage collections on the UI thread, this turn
        self._gc_t0 = None
        import gc

        gc.callbacks.append(self._gc)

    def _gc(self, phase, info):
        if info.get("generation") != 2 or threading.current_thread() is not threading.main_thread():
            return
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        elif self._gc_t0 is not None:
            self.gc_ms += (time.perf_counter() - self._gc_t0) * 1000
            self._gc_t0 = None

    def timed(self, fn):
        class Call:  # named like a receiver in the listing
            def objectName(self):
                return "the action's call"

        class Ev:
            def type(self):
                return type("T", (), {"name": fn.__name__})()

        return lambda: self.wrap(lambda r, e: fn(), Call(), Ev())

    def wrap(self, notify, receiver, event):
        if not self.on or self.depth or threading.current_thread() is not threading.main_thread():
            return notify(receiver, event)
        self.depth += 1
        self.gc_ms = 0.0
        prof = cProfile.Profile() if self.profile else None
        t0, c0 = time.perf_counter(), time.thread_time()
        if prof is not None:
            prof.enable()
        try:
            return notify(receiver, event)
        finally:
            if prof is not None:
                prof.disable()
            self.depth -= 1
            wall = (time.perf_counter() - t0) * 1000
            if wall > 15:
                try:
                    what = f"{type(receiver).__name__}({receiver.objectName()}) {event.type().name}"
                    if self.gc_ms:
                        what += f" (full gc {self.gc_ms:.0f} ms)"
                except Exception:  # noqa: BLE001  (a receiver deleted by its own event)
                    what = "?"
                top = []
                if prof is not None:
                    st = pstats.Stats(prof).stats
                    top = sorted(((v[3], f"{k[2]} {os.path.basename(k[0])}:{k[1]}") for k, v in st.items()),
                                 reverse=True)[2:18]
                self.records.append((wall, (time.thread_time() - c0) * 1000, what, top))


TURNS = TurnLog()
BUSY_WAIT = False  # --busy-wait
PAINTS: list = []  # callbacks(figure) after the timeline's stack painted a figure


def watch_timeline_paints():
    """Every paint of the timeline's stack reported with the figure it drew (the class's method
    wrapped: Qt calls the Python override looked up on the class), so an edit is timed to the
    timeline painted, not to its update requested."""
    from memdesigner._qt.memory import timeline

    real = timeline.StackItem.paint
    if getattr(real, "_watched", False):
        return

    def paint(self, p, *a):
        real(self, p, *a)
        for cb in PAINTS:
            cb(self.figure)

    paint._watched = True
    timeline.StackItem.paint = paint


def make_app(turns: bool):
    from PySide6.QtWidgets import QApplication

    if not turns:  # a Python notify() costs every event something: only when asked
        return QApplication.instance() or QApplication([sys.argv[0]])

    class App(QApplication):
        def notify(self, receiver, event):
            return TURNS.wrap(super().notify, receiver, event)

    return QApplication.instance() or App([sys.argv[0]])


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


class Harness:
    """A shown MainWindow, a heartbeat timer and waits."""

    def __init__(self, app, win):
        from PySide6.QtCore import QElapsedTimer, QTimer

        self.app, self.win = app, win
        self.applied = []
        self.fired = []
        win.result_applied.connect(lambda gen: self.applied.append((gen, time.perf_counter())))
        self.shown = {}  # gen -> when its timeline was shown (the presenter's first turn)
        shown = getattr(getattr(win, "presenter", None), "timeline_shown", None)
        if shown is not None:
            shown.connect(lambda gen: self.shown.setdefault(gen, time.perf_counter()))
        fire = win.service.fire

        def timed_fire():
            self.fired.append(time.perf_counter())
            return fire()

        win.service._timer.timeout.disconnect()
        win.service._timer.timeout.connect(timed_fire)
        self.clock = QElapsedTimer()
        self.clock.start()
        self.gap = self.cpu_gap = 0.0
        self._last = self._last_cpu = None
        self.hb = QTimer()
        self.hb.setInterval(2)
        self.hb.timeout.connect(self._beat)
        from PySide6.QtCore import QEventLoop

        self._block = QEventLoop.AllEvents | QEventLoop.WaitForMoreEvents
        self._wake = QTimer()  # the blocking wait re-checks its condition at least this often
        self._wake.setInterval(5)
        self._wake.timeout.connect(lambda: None)
        self._wake.start()
        self.painted = {}  # id(figure) -> (figure, when the timeline first painted it)
        PAINTS.append(self._painted)

    def _painted(self, fig):
        if fig is not None and id(fig) not in self.painted:
            self.painted[id(fig)] = (fig, time.perf_counter())

    def painted_at(self, fig):
        got = self.painted.get(id(fig))
        return got[1] if got is not None and got[0] is fig else None

    def _beat(self):
        now = self.clock.nsecsElapsed() / 1e6
        cpu = time.thread_time() * 1000
        if self._last is not None:
            self.gap = max(self.gap, now - self._last - 2.0)
            self.cpu_gap = max(self.cpu_gap, cpu - self._last_cpu)
        self._last, self._last_cpu = now, cpu

    def _turn(self):
        """One wait step. Blocking (the default): the UI thread sleeps in Qt's event loop, with the
        GIL released, until an event or the 5 ms wake-up timer, as the real window idles in exec().
        --busy-wait: the earlier loop of processEvents() and 0.5 ms sleeps, which kept one of the
        machine's two CPUs and the GIL busy and so slowed the worker it waited for."""
        if BUSY_WAIT:
            self.app.processEvents()
            time.sleep(0.0005)
        else:
            self.app.processEvents(self._block)

    def pump(self, seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self._turn()

    def settled(self):
        s = self.win.service
        return (not s.busy and not s._timer.isActive()
                and (not self.applied or self.applied[-1][0] == s.gen or s.last_result is None
                     or s.last_result.gen != s.gen))

    def wait(self, pred, timeout=900.0):
        end = time.perf_counter() + timeout
        while not pred():
            if time.perf_counter() > end:
                raise TimeoutError("the window did not settle")
            self._turn()

    def wait_estimate(self, timeout=900.0):
        s = self.win.service
        self.wait(lambda: not s._timer.isActive() and bool(self.applied) and self.applied[-1][0] == s.gen
                  and not s.busy, timeout)

    def run(self, fn, wait_estimate=True, quiet=0.15):
        """(stall_ms, stall_cpu_ms, done_ms) of one action: its own call and every event-loop turn
        after it. stall_cpu_ms counts the UI thread's CPU time in the longest turn: what the stall
        is on an idle machine (on a busy one the wall-clock stall grows with the queue for CPUs)."""
        self.gap, self._last, self.cpu_gap = 0.0, None, 0.0
        self.hb.start()
        self.app.processEvents()
        n = len(self.applied)
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        call_ms = (time.perf_counter() - t0) * 1000
        call_cpu = (time.thread_time() - c0) * 1000
        self._last, self._last_cpu = self.clock.nsecsElapsed() / 1e6, time.thread_time() * 1000
        jobs = getattr(self.win.scene, "jobs", None)
        task = getattr(self.win, "open_task", None)  # a big file is read on the worker
        if task is not None:
            self.wait(lambda: not task.running)
        if wait_estimate:
            s = self.win.service
            self.wait(lambda: not s._timer.isActive() and not s.busy
                      and (len(self.applied) > n and self.applied[-1][0] == s.gen or s.last_result is None))
        if jobs is not None:  # the scene's sliced work (building, labelling) is part of the action
            self.wait(lambda: not jobs.busy)
        done_ms = (time.perf_counter() - t0) * 1000
        self.pump(quiet)  # paints and the batch sweep's results land here
        self.hb.stop()
        return max(call_ms, self.gap), max(call_cpu, self.cpu_gap), done_ms


class FixedDebounce:
    """Scheduling without estimate_timing.py (--ab): every edit waits ``delay`` ms (40: as before;
    0: the leading edge tried before), always on the worker."""

    last_cost_ms = None

    def __init__(self, delay=40):
        self.delay = self.min_quiet_ms = delay  # (the service defers a worker's start by min_quiet_ms)

    def delay_ms(self, now):
        return self.delay

    def measured(self, cpu_ms, key=None, nodes=0):
        pass

    def inline(self, worker_free, key=None, nodes=0):
        return False


def bench_size(app, n_nodes, shape, actions, repeats, profile=None, turns=None, hide_canvas=False,
               breakdown=False, ab=False):
    from memdesigner._qt.main_window import MainWindow
    from memdesigner.io.design_file import save_design

    watch_timeline_paints()
    win = MainWindow(headless=True)
    win.split_paint = True  # the interactive path: results shown in two event-loop turns
    win.background_open = True  # and big files read on the worker (_qt/jobs/open_file.py)
    win.resize(1600, 1000)
    win.show()
    if hide_canvas:  # what the rest of the window costs, without the canvas's own painting
        for v in win.scene.views():  # the canvas and the minimap
            v.setUpdatesEnabled(False)
            v.viewport().setUpdatesEnabled(False)
            if v is not win.view:
                v.hide()
    parts = None
    if breakdown:  # before the harness, whose debounce timer calls the wrapped fire
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from _edit_breakdown import Breakdown

        parts = Breakdown(win)
    h = Harness(app, win)
    design = (make_chain if shape == "chain" else make_wide)(n_nodes)
    design.settings = {"mode": "train", "batch": 8, "optimizer": "adam"}
    tmp = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
    tmp.close()
    save_design(design, tmp.name)
    sb = win.settings_bar
    out: dict[str, dict] = {}
    prof = cProfile.Profile() if profile else None

    def record(name, fn, **kw):
        if prof is not None and name == profile:
            prof.enable()
        TURNS.on = name == turns
        if TURNS.on:  # the action's own call is a UI-thread turn too (listed as "the action's call")
            fn = TURNS.timed(fn)
        stall, cpu, done = h.run(fn, **kw)
        TURNS.on = False
        if prof is not None and name == profile:
            prof.disable()
        r = out.setdefault(name, {"stall": [], "cpu": [], "done": []})
        r["stall"].append(stall)
        r["cpu"].append(cpu)
        r["done"].append(done)

    def open_it():
        starts.append(time.perf_counter())
        win.open_path(tmp.name, remember=False)

    starts: list = []
    painted = PaintCount(win.view.viewport())
    for _ in range(repeats if "wheel_building" in actions else 0):
        # the wheel while a design's items are still being built (a re-open): done = to the canvas
        # painted at the new zoom (before issue 21: only once the build had ended)
        win.open_path(tmp.name, remember=False)
        h.wait(lambda: not win.open_task.running and win.scene.building)

        took = []

        def wheel_building(took=took):
            n, t0 = painted.n, time.perf_counter()
            send_wheel(win.view, 1)
            h.wait(lambda: painted.n > n)
            took.append((time.perf_counter() - t0) * 1000)
        record("wheel_building", wheel_building, wait_estimate=False)
        out["wheel_building"]["done"][-1] = took[0]  # (not to the build's end)
        h.wait_estimate()
        h.wait(lambda: not win.scene.jobs.busy)
    for _ in range(repeats if "open" in actions else 1):
        # done: the whole canvas built and painted; the first estimate is reported apart
        record("open", open_it, wait_estimate=False)
        win.view.viewport().repaint()
        out["open"]["done"][-1] = (time.perf_counter() - starts[-1]) * 1000
        h.wait_estimate()
        out.setdefault("open_to_first_estimate", {"done": []})["done"].append(
            (h.applied[-1][1] - starts[-1]) * 1000)
        jobs = getattr(win.scene, "jobs", None)  # (the scene before sliced building had none)
        h.wait(lambda j=jobs: j is None or not j.busy)
    if sb.device.count() > 1:
        sb.device.setCurrentIndex(1)
    h.wait_estimate()
    h.pump(0.3)
    d = win.design
    linears = [n.id for n in d.nodes.values() if n.type == "Linear" and not n.name.startswith("proj")]
    for i in range(repeats):
        if "select" in actions:  # one layer (the inspector's page), then two (its count)
            one = linears[(i * 11) % len(linears)]
            record("select", lambda t=one: win.scene.select_nodes([t]), wait_estimate=False)
            record("select_many", lambda t=one: win.scene.select_nodes([t, linears[0]]), wait_estimate=False)
        if "select_all" in actions or "delete" in actions:
            record("select_all", win.select_all, wait_estimate=False)
        if "delete" in actions:
            record("delete", win.delete_selection)
            record("undo_delete", win.stack.undo)
            record("redo_delete", win.stack.redo)  # (and back: the next actions need the design)
            win.stack.undo()
            h.wait_estimate()
            h.wait(lambda: not win.scene.jobs.busy)
        if "paste" in actions:
            win.scene.select_nodes(list(d.nodes)[:100])
            win.copy()
            record("paste", win.paste)
            win.stack.undo()
            h.wait_estimate()
        if "batch" in actions:
            record("batch", lambda i=i: sb.batch.setValue(8 + 8 * (i % 2 + 1)))
        if "type_batch" in actions:  # real key presses: select the number, type another, Enter
            def type_batch(i=i):
                from PySide6.QtCore import Qt
                from PySide6.QtTest import QTest

                QTest.keyClick(sb.batch, Qt.Key_A, Qt.ControlModifier)
                QTest.keyClicks(sb.batch, str(12 + 8 * (i % 2)))  # never the value "batch" set
                QTest.keyClick(sb.batch, Qt.Key_Return)
            record("type_batch", type_batch)
        if "setting" in actions:  # another run setting: the optimizer
            record("setting", lambda i=i: sb.optimizer.setCurrentIndex(sb.optimizer.findData("sgd" if i % 2 == 0
                                                                                            else "adam")))
        if "zoom" in actions:
            def zoom(i=i):
                win.view.zoom_by(0.5 if i % 2 == 0 else 2.0)
                win.view.viewport().repaint()
            record("zoom", zoom, wait_estimate=False)
        if "wheel" in actions:  # real wheel events: three notches in, or out, in one turn
            record("wheel", lambda i=i: [send_wheel(win.view, 1 if i % 2 else -1) for _ in range(3)],
                   wait_estimate=False)
        if "pan" in actions:
            def pan(i=i):
                bar = win.view.horizontalScrollBar()
                bar.setValue(bar.value() + (400 if i % 2 == 0 else -400))
                win.view.viewport().repaint()
            record("pan", pan, wait_estimate=False)
        if "find" in actions and hasattr(win, "find_layer"):
            target = linears[(i * 13) % len(linears)]
            record("find", lambda t=target: win.find_layer.jump_to(t), wait_estimate=False)
        if "auto_layout" in actions:
            record("auto_layout", win.auto_layout, wait_estimate=False)
            h.wait(lambda: getattr(win, "layout_runner", None) is None or not win.layout_runner.running)
            h.pump(0.1)
        if "layout_top_down" in actions and hasattr(win, "layout_runner"):
            record("layout_top_down", lambda: win.layout_runner.run("top_down"), wait_estimate=False)
            h.wait(lambda: not win.layout_runner.running)
            h.pump(0.1)
    if "edit" in actions:
        edits = max(repeats, 20) * (3 if ab else 1)
        lat, lat_nd, lat_all, est_wall, est_cpu, lat_paint = [], [], [], [], [], []
        others = {"BEFORE": [], "0ms_WORKER": []}
        timing = getattr(win.service, "timing", None)  # (a checkout before estimate_timing.py: none)
        for i in range(edits):
            # --ab: two edits in three scheduled otherwise: as before (a 40 ms debounce, the
            # worker), and at once on the worker (the leading edge tried before)
            before = ("BEFORE", "0ms_WORKER", None)[i % 3] if ab else None
            win.service.timing = FixedDebounce(40 if before == "BEFORE" else 0) if before else timing
            nid = linears[(i * 7) % len(linears)]
            win.inspector.show_node(nid)
            h.pump(0.01)
            value = 512 + 128 * (i % 5) if d.nodes[nid].props["out_features"] == 256 else 256
            nf = len(h.fired)
            name = f"edit_{before}" if before else "edit"
            record(name, lambda nid=nid, v=value: win.inspector.commit("out_features", v))
            gen, t_all = h.applied[-1]
            t0 = t_all - out[name]["done"][-1] / 1000
            res = win.service.last_result
            t_paint = h.painted_at(res.figure)
            if t_paint is not None:  # from the edit to the new timeline painted: the target
                (others[before] if before else lat_paint).append((t_paint - t0) * 1000)
            if before:
                continue
            t_done = h.shown.get(gen, t_all)  # the timeline updated (before canvas labels and table)
            fired = h.fired[-1] if len(h.fired) > nf else t0
            lat.append((t_done - t0) * 1000)
            lat_nd.append((t_done - fired) * 1000)
            lat_all.append((t_all - fired) * 1000)
            est_wall.append(res.seconds * 1000)
            est_cpu.append(getattr(res, "cpu_seconds", 0.0) * 1000)
            if parts is not None:
                parts.paint(res.gen)
                parts.take(res.gen)
        if timing is not None:
            win.service.timing = timing
        if ab:
            for k, v in others.items():
                out[f"edit_to_painted_{k}"] = {"done": v}
        out["edit_to_timeline_painted"] = {"done": lat_paint}
        out["edit_timeline_incl_debounce"] = {"done": lat}
        out["edit_timeline"] = {"done": lat_nd}
        out["edit_all_views"] = {"done": lat_all}  # the canvas labels, inspector and table too
        out["estimate_on_worker"] = {"done": est_wall, "cpu": est_cpu}
    if parts is not None:
        print(parts.report(pct), file=sys.stderr)
    win.service.shutdown()
    win.close()
    # the window goes before the next size or shape: kept (closed, not deleted), its idle
    # collector ran full collections of both windows' objects during the next one's actions
    # (700-880 ms of CPU in a wide 10,000-layer open after the chain's window)
    from PySide6.QtCore import QCoreApplication, QEvent

    PAINTS.remove(h._painted)
    win.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    win = h = sb = None  # (the closures above hold these: let go)
    import gc

    gc.collect()
    os.unlink(tmp.name)
    if turns:
        print(f"longest UI-thread turns of {turns!r} ({repeats} repeats; wall ms, cpu ms, receiver event):",
              file=sys.stderr)
        for wall, cpu, what, top in sorted(TURNS.records, key=lambda r: -r[0])[:12]:
            print(f"  {wall:7.1f} {cpu:7.1f}  {what}", file=sys.stderr)
            for cum, fn in top:
                print(f"            {cum * 1000:7.1f}  {fn}", file=sys.stderr)
        TURNS.records.clear()
    if prof is not None:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(35)
    return len(design.nodes), out


def summarize(out):
    rows = {}
    for name, r in out.items():
        row = {}
        for k in ("stall", "cpu", "done"):
            if r.get(k):
                row[f"{k}_median_ms"] = round(statistics.median(r[k]), 1)
                row[f"{k}_p95_ms"] = round(pct(r[k], 0.95), 1)
        rows[name] = row
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="1000,10000", help="comma-separated design sizes")
    ap.add_argument("--shapes", default="chain,wide")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--actions", default=",".join(ACTIONS))
    ap.add_argument("--profile", default=None, help="cProfile one action (stats to stderr)")
    ap.add_argument("--turns", default=None, help="list the longest UI-thread turns of one action (stderr)")
    ap.add_argument("--turns-plain", action="store_true", help="--turns without cProfile (true times)")
    ap.add_argument("--hide-canvas", action="store_true",
                    help="no canvas painting: the figures of the timeline, presenter and estimate alone")
    ap.add_argument("--breakdown", action="store_true",
                    help="edits: the time from the edit to the timeline split into its parts (stderr)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--ab", action="store_true",
                    help="edits: of every three, one scheduled as before (40 ms debounce, the worker), one at once on the "
                         "worker, one by estimate_timing.py, in one run")
    ap.add_argument("--busy-wait", action="store_true",
                    help="wait by polling processEvents() every 0.5 ms (the harness before: it slows the worker)")
    args = ap.parse_args(argv)

    def fail(*exc):  # an exception in a Qt slot: stop, not wait for a result that never comes
        import traceback

        traceback.print_exception(*exc)
        os._exit(1)

    sys.excepthook = fail
    global BUSY_WAIT
    BUSY_WAIT = args.busy_wait
    actions = set(args.actions.split(","))

    from PySide6.QtCore import QSettings
    app = make_app(bool(args.turns))
    TURNS.profile = not args.turns_plain
    QSettings.setDefaultFormat(QSettings.IniFormat)  # the layout style it tries is not the user's
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, tempfile.mkdtemp(prefix="gui_latency-"))
    results = []
    for n in (int(x) for x in args.nodes.split(",")):
        for shape in args.shapes.split(","):
            n_real, out = bench_size(app, n, shape, actions, args.repeats, args.profile, args.turns,
                                     args.hide_canvas, args.breakdown, args.ab)
            results.append({"nodes": n_real, "shape": shape, "actions": summarize(out)})
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    cols = ("stall_median_ms", "stall_p95_ms", "cpu_median_ms", "cpu_p95_ms", "done_median_ms", "done_p95_ms")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; ms; stall = longest UI-thread turn "
          "(wall), cpu = its UI-thread CPU time, done = until settled")
    print(f"{'design':>11} {'action':<28} " + " ".join(f"{c.replace('_ms', '').replace('_', ' '):>11}" for c in cols))
    for r in results:
        for name, row in r["actions"].items():
            print(f"{r['shape'] + ' ' + str(r['nodes']):>11} {name:<28} "
                  + " ".join(f"{row.get(c, ''):>11}" for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

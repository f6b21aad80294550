"""File -> Open Memory Snapshot: read a PyTorch memory snapshot off the UI thread (worker.py,
the mechanism Measure with PyTorch uses: a progress dialog with Cancel, which stops the reading
within a 64 KiB frame or 65,536 events) and draw it in the timeline beside the estimate.
The window only views: reading and replaying are memdesigner.snapshot's."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox

from memdesigner._qt.memory.timeline import snapshot_peaks
from memdesigner._qt.scheduling import worker
from memdesigner.units import format_bytes

FILTER = "PyTorch memory snapshots (*.pickle *.pkl);;All files (*)"


def read_replay(path: str, cancel=None):
    """Load and replay (worker thread); the raw snapshot is dropped once replayed."""
    from memdesigner.snapshot.reader import SnapshotCancelled
    from memdesigner.snapshot.replay import open_replay

    try:
        return open_replay(path, cancel=cancel)
    except SnapshotCancelled:
        raise worker.Cancelled() from None


def replay_dict(snap: dict, cancel=None):
    from memdesigner.snapshot import replay
    from memdesigner.snapshot.reader import SnapshotCancelled

    try:
        return replay(snap, cancel=cancel)
    except SnapshotCancelled:
        raise worker.Cancelled() from None


def open_dialog(win) -> None:
    path, _ = QFileDialog.getOpenFileName(win, "Open Memory Snapshot", win._last_dir(), FILTER)
    if path:
        load(win, path)


def load(win, path: str):
    """Start reading ``path``; returns the task (worker.Task: ``ended`` when done or cancelled)."""
    return _start(win, read_replay, path, Path(path).name)


def show_measured(win, result: dict | None):
    """A measurement on CUDA carries a snapshot: draw it too."""
    if result and result.get("snapshot"):
        return _start(win, replay_dict, result["snapshot"], "of the measured run")
    if result and result.get("snapshot_note"):
        cur = win.statusBar().currentMessage()
        win.statusBar().showMessage(f"{cur} · {result['snapshot_note']}" if cur else result["snapshot_note"], 10000)
    return None


def _start(win, fn, arg, name: str):
    win.snapshot_error = None
    prev = getattr(win, "_snapshot_worker", None)
    if prev is not None and prev.running:
        prev.cancel()  # the newer snapshot replaces it
    task = worker.run(win, lambda cancel: fn(arg, cancel), title="Open Memory Snapshot",
                      label=f"Reading memory snapshot {name}…", on_result=lambda rp: show(win, rp, name),
                      on_error=lambda err: _error(win, err))
    win.busy_label.setText(f"reading memory snapshot {name}…")
    task.ended.connect(lambda: win.busy_label.setText(""))
    task.cancelled.connect(lambda: win.statusBar().showMessage(f"Reading memory snapshot {name} cancelled", 6000))
    win._snapshot_worker = task
    return task


def _error(win, err) -> None:
    msg = str(err)
    win.snapshot_error = msg
    win.statusBar().showMessage(f"Memory snapshot: {msg}", 15000)
    box = QMessageBox(QMessageBox.Warning, "Open Memory Snapshot", msg, parent=win)
    box.setModal(False)  # never blocks (and never hangs an offscreen test)
    box.show()
    win._snapshot_error_box = box


def show(win, rp, name: str) -> None:
    win.snapshot_error = None
    draw(win.timeline, win.legend, win.act_clear_snapshot, rp, name)
    pp = rp.phase_peaks()
    phases = ", ".join(f"{k.replace('_', ' ')} {format_bytes(v['allocated'], 2)}" for k, v in pp.items())
    win.statusBar().showMessage(f"Memory snapshot {name}: {rp.n_events:,} events, {snapshot_peaks(rp)}"
                                + (f" · {phases}" if phases else ""), 15000)


def draw(timeline, legend, clear_action, rp, name: str = "") -> None:
    """The replay ``rp`` (None: none) on the timeline, named in its legend; Clear Memory Snapshot
    enabled while one is drawn. The three views, not the window that holds them."""
    timeline.set_snapshot(rp, name)
    legend.setText(timeline.legend_html())
    clear_action.setEnabled(rp is not None)


def clear(timeline, legend, clear_action) -> None:
    draw(timeline, legend, clear_action, None)

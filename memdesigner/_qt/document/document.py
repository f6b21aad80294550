"""The open design as a document, apart from the window that views it: the design, its file
path (absolute), the undo stack (dirty = not at the clean index), the run-settings model (with
its own undo commands), the autosave that crash recovery reads, and save / open / recent files.

Autosave: each edit (graph edit, settings change, undo, redo) is on disk as it ends: the first
one of an unsaved stretch writes the full autosave, each later one appends one line to its
journal (io/design_journal.py: the changed nodes and edges, one write()), so no later kill loses
it, however late a loaded machine runs the event loop. Every change also starts a single-shot
timer of ``autosave_delay_ms()`` unless one is already running, which rewrites the full
autosave from the journal on the worker (recovery.Slot.begin_compaction: the UI thread only
closes the journal and opens its continuation; at 10,000 nodes the rewrite took 70-250 ms of
the UI thread), so a journal holds at most that long of edits. The journal holds every change
but block definitions (the design's name and flags as a ``meta`` step, a reset, the settings);
those, and the first edit of an unsaved stretch, write the full autosave: serialised and written
on the worker from a frozen copy of the design (io/design_freeze.py, ~10 ms of the UI thread at
10,000 nodes where the write took ~90 ms), its journal opened at once for the edits after it
(recovery.Slot.begin_write). A design with block definitions is written in full here. A clean
document has no autosave."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from memdesigner._qt.document import recent, recovery, undo_bursts
from memdesigner._qt.scheduling import worker
from memdesigner.document.run_settings import RunSettings, normalize
from memdesigner.io import design_journal
from memdesigner.io.design_file import load_design, save_design
from memdesigner.io.design_freeze import freeze
from memdesigner.model.design import Design

AUTOSAVE_MS = 1500


def autosave_delay_ms() -> int:
    """MEMDESIGNER_AUTOSAVE_MS overrides the delay (the crash test uses a short one)."""
    try:
        return max(10, int(os.environ.get("MEMDESIGNER_AUTOSAVE_MS", AUTOSAVE_MS)))
    except ValueError:
        return AUTOSAVE_MS


class SetRunSettingsCmd(QUndoCommand):
    """One change of the run settings (the whole dict before and after). ``burst``
    (_qt/document/undo_bursts.py): consecutive changes of the same one setting in a burst (the Batch
    box's arrow clicks) are one undo step; None: never merged."""

    def __init__(self, model: RunSettings, old: dict, new: dict, burst: int | None = None):
        super().__init__()
        self.model, self.old, self.new, self.burst = model, dict(old), dict(new), burst
        self.changed = _changed(old, new)
        self._name()

    def _name(self):
        changed, new = self.changed, self.new
        what = changed[0] if len(changed) == 1 else "run settings"
        self.setText(f"Set {what} to {new[what]}" if len(changed) == 1 and what in new else f"Change {what}")

    def redo(self):
        self.model.set_all(self.new)

    def undo(self):
        self.model.set_all(self.old)

    def id(self) -> int:
        return -1 if self.burst is None or len(self.changed) != 1 else undo_bursts.MERGE_ID

    def mergeWith(self, other) -> bool:
        if not isinstance(other, SetRunSettingsCmd) or other.model is not self.model or \
                other.burst != self.burst or other.changed != self.changed or other.old != self.new:
            return False
        self.new = other.new
        self._name()
        self.setObsolete(self.new == self.old)
        return True


def _changed(old: dict, new: dict) -> list:
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


class DesignDocument(QObject):
    changed = Signal()  # the design or its settings changed (undo and redo included)
    saved = Signal(str)  # the absolute path written
    problem = Signal(str)  # one line for the status bar: an autosave could not be written

    def __init__(self, parent=None, autosave: bool = True, remember: bool = True):
        super().__init__(parent)
        self.stack = QUndoStack(self)
        self.settings = RunSettings()
        self.design = Design()
        self.path: str | None = None
        self.remember = remember  # recent files (not for headless renders)
        self.slot = recovery.Slot() if autosave else None
        self._loading = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(autosave_delay_ms())
        self._timer.timeout.connect(self._timed_autosave)
        self._ops: list = []  # journal ops of the edit in progress (written as the edit ends)
        self._since: list = []  # the journal's steps since the full autosave on disk (a compaction's input)
        self._compacting = None  # the worker's Task rewriting the full autosave
        self._writing = None  # the worker's Task writing a full autosave of a frozen copy
        self._full = True  # the next write is a full autosave (none yet, or a change the journal cannot hold)
        self._meta = None  # what the journal cannot hold, as of the last full autosave
        self._names = None  # the design's name and flags as the journal last recorded them
        self._removed: set = set()  # ids the journal's bulk deletes took out (their undo names them)
        self._flush_soon = QTimer(self)  # an edit made outside the undo stack ends with its event-loop turn
        self._flush_soon.setSingleShot(True)
        self._flush_soon.setInterval(0)
        self._flush_soon.timeout.connect(self._write_edit)
        self.stack.indexChanged.connect(self._edit_done)
        self.settings.subscribe(self._settings_changed)
        self.design.subscribe(self._design_event)

    # -- state -------------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        return not self.stack.isClean()

    def _design_event(self, event, payload):
        if self.slot is not None and not self._loading:
            ops = design_journal.record(self.design, event, payload, self._removed)
            self._journal(ops)
        self._touched()

    def _settings_changed(self, d: dict):
        self.design.settings = d  # every serializer of the design sees the current settings
        if self.slot is not None and not self._loading:
            self._journal([{"op": "settings", "settings": dict(d)}])
        self._touched()

    def _journal(self, ops: list | None) -> None:
        if ops is None:
            self._full = True
        elif not self._full:
            self._ops.extend(ops)
        self._flush_soon.start()

    def _edit_done(self, *_):
        """An edit ended (the undo stack moved: a command, a macro, an undo or a redo)."""
        self._touched()
        self._write_edit()

    def _write_edit(self):
        """Put the edit that ended on disk now (also at the end of the event-loop turn of a change
        made without the undo stack)."""
        self._flush_soon.stop()
        if self.slot is None or self._loading:
            return
        ops, self._ops = self._ops, []
        if not self.dirty:
            if not self._full:  # undone back to the saved state: nothing to recover
                self.slot.clear()
                self._full = True
            return
        if self._full or not self.slot.has_journal() or self._meta_now() != self._meta:
            self._autosave_on_worker()
            return
        names = self._names_now()
        if names != self._names:
            ops.append(design_journal.meta_op(*names))
            self._names = names
        if ops:
            try:
                self.slot.append(ops)
                self._since.append(ops)
            except OSError:
                self._full = True

    def _names_now(self) -> tuple:
        """The design's name and flags: no notification tells of their change, so each edit's
        end compares them (a ``meta`` journal step when they changed)."""
        d = self.design
        return (d.name, d.channels_last, getattr(d, "description", ""))

    def _meta_now(self) -> tuple:
        """What the journal does not hold: the source path and the block definitions (their
        graphs are edited apart from the design's own notifications)."""
        d = self.design
        blocks = tuple((name, bd.stack, id(bd.graph), tuple(bd.graph.edges),
                        tuple((n.id, n.rev, n.name, n.pos, n.bits, n.trainable) for n in bd.graph.nodes.values()))
                       for name, bd in d.blocks.items()) if d.blocks else ()
        return (self.path, blocks)

    def _touched(self, *_):
        if self._loading:
            return
        self.changed.emit()
        if self.slot is not None and not self._timer.isActive():
            self._timer.start()

    def edit_settings(self, old: dict, new: dict, burst: int | None = None) -> None:
        """A user change of the run settings: one undo step (one per ``burst`` of changes to the
        same setting, _qt/document/undo_bursts.py)."""
        if normalize(new) != self.settings.to_dict():
            self.stack.push(SetRunSettingsCmd(self.settings, old, new, burst))

    # -- replacing the design ----------------------------------------------------------------
    def replace(self, design: Design, path: str | None, unsaved: bool = False) -> None:
        """Show another design. ``unsaved``: recovered or imported work, dirty until saved.
        A design without settings keeps the current ones (today's behaviour of the window)."""
        self._loading = True
        try:
            self.design.unsubscribe(self._design_event)
            self.design = design
            self.path = os.path.abspath(path) if path else None
            self.stack.clear()
            if design.settings:
                self.settings.set_all(design.settings)
            design.settings = self.settings.to_dict()
            design.subscribe(self._design_event)
        finally:
            self._loading = False
        self._ops, self._full = [], True  # the next write is this design in full
        if unsaved:
            self.stack.resetClean()
            self._edit_done()
        elif self.slot is not None:
            self._timer.stop()
            self.slot.clear()

    @staticmethod
    def read(path: str) -> Design:
        """A design file's design (DesignFileError, one line, when it cannot be read)."""
        return load_design(path)

    # -- saving ------------------------------------------------------------------------------
    def save(self, path: str) -> str:
        """Write the design with its settings to ``path`` (OSError when that fails); the document
        is clean afterwards and its autosave gone."""
        path = os.path.abspath(path)
        self.design.settings = self.settings.to_dict()
        if self.design.name in ("", "untitled"):
            self.design.name = Path(path).stem
        save_design(self.design, path)
        self.path = path
        self.stack.setClean()
        self.discard_autosave()
        if self.remember:
            recent.add(path)
        self.saved.emit(path)
        return path

    def _timed_autosave(self) -> None:
        """The autosave delay after a change: the full autosave rewritten from its journal on the
        worker (the same state on disk: a compaction), or written in full here when the journal
        cannot follow it."""
        if self.slot is None or self._loading:
            return
        if self._ops or self._flush_soon.isActive() or self._names_now() != self._names:
            self._write_edit()
        if not self.dirty or self._full or not self.slot.has_journal() or self._meta_now() != self._meta:
            self._autosave_on_worker()
            return
        if not self._since:
            return  # nothing journalled since the full autosave
        if any(t is not None and t.running for t in (self._compacting, self._writing)):
            self._timer.start()  # one rewrite at a time: again after the delay
            return
        job = self.slot.begin_compaction(self._since, self.path)
        if job is None:
            self._autosave_on_worker()
            return
        self._since, self._removed = [], set()  # the continuation journal starts afresh
        self._compacting = worker.run(self, job, title="Autosave", label="", on_result=self._compacted,
                                      on_error=self._compaction_failed, progress=False)

    def _compacted(self, current: bool) -> None:
        self._done_compacting()

    def _compaction_failed(self, err) -> None:
        """The rewrite failed (a full disk): the journal on disk still holds every edit; the next
        edit writes the full autosave here."""
        self._done_compacting()
        self._full = True
        self._autosave_failed(err)

    def _done_compacting(self) -> None:
        task, self._compacting = self._compacting, None
        if task is not None:
            task.deleteLater()  # one per autosave delay of editing: not kept for the document's life

    def _autosave_on_worker(self) -> bool:
        """The full autosave, begun: a frozen copy of the design taken here, serialised and
        written on the worker (Slot.begin_write); the edits after it are journalled at once. A
        design with block definitions (no frozen copy of their graphs) is written here."""
        if self.slot is None or not self.dirty or self.design.blocks:
            return self.autosave()
        self._timer.stop()
        self.design.settings = self.settings.to_dict()
        self._ops, self._removed, self._since = [], set(), []  # the full autosave holds them
        try:
            job = self.slot.begin_write(freeze(self.design), self.path)
        except OSError as err:
            self._full = True
            self._autosave_failed(err)
            return False
        self._full, self._meta, self._names = False, self._meta_now(), self._names_now()
        box: list = []
        task = worker.run(self, job, title="Autosave", label="", progress=False,
                          on_result=lambda landed: self._written(box[0], False),
                          on_error=lambda err: self._written(box[0], True, err))
        box.append(task)
        self._writing = task
        return True

    def _written(self, task, failed: bool, err=None) -> None:
        """A worker's full write ended. Failed (a full disk): the next edit writes in full again
        (until one lands, the autosave on disk is the one before)."""
        if self._writing is task:
            self._writing = None
            if failed:
                self._full = True
                self._autosave_failed(err)
        task.deleteLater()

    def _autosave_failed(self, err) -> None:
        """Say why in one line (a full disk, a folder where the autosave file should be); the
        work is still in the window and the next autosave tries again."""
        from memdesigner.io.atomic_write import cannot_write

        why = cannot_write(self.slot.file, err) if isinstance(err, OSError) else f"{type(err).__name__}: {err}"
        self.problem.emit(" ".join(f"Autosave failed: {why}".split()))

    def autosave(self) -> bool:
        """Write the recovery file now (only while there is unsaved work); a clean document
        removes it instead."""
        self._timer.stop()
        if self.slot is None:
            return False
        if not self.dirty:
            self.slot.clear()
            self._full = True
            return False
        self.design.settings = self.settings.to_dict()
        self._ops, self._removed, self._since = [], set(), []  # the full autosave holds them (a new journal begins)
        try:
            self.slot.write(self.design, self.path)
        except OSError as err:
            self._full = True
            self._autosave_failed(err)
            return False
        self._full, self._meta, self._names = False, self._meta_now(), self._names_now()
        return True

    def discard_autosave(self) -> None:
        """Saved, or the user chose not to keep the changes: nothing to recover."""
        self._timer.stop()
        self._ops, self._full = [], True
        if self.slot is not None:
            self.slot.clear()

    def close(self) -> None:
        self._timer.stop()
        if self.slot is not None:
            self.slot.release()

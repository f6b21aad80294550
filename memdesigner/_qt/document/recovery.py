"""Crash recovery: each open document owns one autosave file in the user data folder
(``autosave-<instance>.json``, with the journal of the edits made since: io/design_journal.py) and holds an OS lock on its ``.lock`` beside it for as long as it
runs. A file whose lock can be taken belongs to no running instance: a crash left it. The kernel
drops the lock when a process dies (even by SIGKILL), so a running instance's file is never
offered to another, and a dead one's always is. Files are written atomically (temporary file,
then rename), so a kill never leaves a torn one.

The periodic rewrite of the full autosave (a compaction: the state on disk stays the same) runs
on the worker: the journal so far is closed, later edits go to a continuation journal
(``<stem>.<n>c.journal``, replayed after the one the autosave names), and the worker brings its
own copy of the autosave's design up to date with the closed journal's steps, writes it, and
names the continuation in it. A full write or a clear on the UI thread meanwhile makes the
compaction's result stale: it is dropped, never renamed over the newer file."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from memdesigner.io.atomic_write import commit, stage, write_atomic
from memdesigner.io.bounded_read import BoundedReadError, read_bytes
from memdesigner.io.design_file import DesignFileError, design_to_dict, parse_design_text
from memdesigner.model.design import Design

FORMAT = "memdesigner-autosave"


def recovery_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(os.environ.get("MEMDESIGNER_RECOVERY_DIR") or Path(user_data_dir("memdesigner")) / "recovery")


def _lock_path(file: Path) -> Path:
    return file.with_suffix(".lock")


def _envelope_text(design: Design | dict, source_path: str | None, journal: str | None = None) -> str:
    import json

    data = design if isinstance(design, dict) else design_to_dict(design)
    return json.dumps({"format": FORMAT, "saved_at": time.time(), "path": source_path,
                       "design": data, **({"journal": journal} if journal else {})})


def _journals(file: Path) -> list[Path]:
    return list(file.parent.glob(f"{file.stem}.*.journal"))


def _continuations(named: Path) -> list[Path]:
    """The continuation journals after the named one, in order (edits made while a compaction
    that would name them was being written)."""
    m = re.fullmatch(r"(.*)\.(\d+)c?\.journal", named.name)
    out: list[Path] = []
    if m is None:
        return out
    stem, k = m.group(1), int(m.group(2))
    while True:
        k += 1
        nxt = named.with_name(f"{stem}.{k}c.journal")
        if not nxt.exists():
            return out
        out.append(nxt)


class Slot:
    """This document's autosave file, locked for the document's lifetime, and the journal of the
    edits since it was written (io/design_journal.py): each full write starts a new journal file,
    named in the autosave, so a journal is only ever replayed onto the autosave it follows."""

    def __init__(self):
        self.id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.file = recovery_dir() / f"autosave-{self.id}.json"
        self._lock: FileLock | None = None
        self._gen = 0
        self._journal: tuple[int, Path] | None = None  # (fd, path) of the open journal
        self._io = threading.Lock()  # the autosave's rename and the journals' removal, either thread
        self._epoch = 0  # moves on at each full write and clear: a compaction begun before is stale
        self._base: dict | None = None  # the design dict of the last full write
        self._mirror: Design | None = None  # the worker's design as of the autosave on disk
        self.pending: int | None = None  # the epoch of a worker's full write not landed yet

    def _hold(self) -> None:
        if self._lock is None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            self._lock = FileLock(str(_lock_path(self.file)))
            self._lock.acquire(timeout=0)

    def _open_journal(self, continuation: bool) -> tuple[int, Path]:
        self._gen += 1
        path = self.file.with_name(f"{self.file.stem}.{self._gen}{'c' if continuation else ''}.journal")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)  # a link there is refused
        return os.open(path, flags, 0o600), path

    def write(self, design: Design, source_path: str | None) -> Path:
        """The full autosave, atomically, and a fresh (empty) journal after it. A kill before
        the rename leaves the old autosave with its old journal, a kill after it the new one
        with its empty journal: either is a state the design was in."""
        self._hold()
        fd, path = self._open_journal(continuation=False)
        base = design_to_dict(design)
        try:
            with self._io:
                write_atomic(self.file, _envelope_text(base, source_path, path.name), fsync=False,
                             follow_symlinks=False)
                self._epoch += 1
                self.pending = None
                self._drop_journals(keep=path)
        except BaseException:
            os.close(fd)
            _unlink(path)
            raise
        self._close_journal(remove=False)
        self._journal = (fd, path)
        self._base, self._mirror = base, None
        return self.file

    def begin_write(self, frozen, source_path: str | None):
        """The full autosave of ``frozen`` (io/design_freeze.py) written by the worker: here a
        fresh journal is opened for the edits after it (appends go there at once) and every
        write or compaction begun before is made stale; the returned job serialises, writes the
        temporary file and renames it into place unless a later write or a clear came first
        (then it is dropped: theirs stands). Until it lands the old autosave and its journal
        stay on disk: a kill meanwhile recovers the state before this write, never a torn one."""
        self._hold()
        fd, path = self._open_journal(continuation=False)
        with self._io:
            self._epoch += 1
            epoch = self._epoch
            self.pending = epoch
        if self._journal is not None:
            os.close(self._journal[0])  # kept on disk: the autosave there names it until this lands
        self._journal = (fd, path)
        self._base = self._mirror = None  # no compaction before this lands
        target = _own(self.file)

        def job(cancel=None) -> bool:
            from memdesigner.io.design_freeze import thaw

            design = thaw(frozen)
            base = design_to_dict(design)
            tmp = stage(target, _envelope_text(base, source_path, path.name), fsync=False)
            return self._land(tmp, target, epoch, path, base, design)

        return job

    def _land(self, tmp: Path, target: Path, epoch: int, journal: Path, base: dict | None, design) -> bool:
        """Rename a worker's finished autosave into place, unless a full write or a clear came
        after it began (its epoch is past) or its journal is gone; True when it landed."""
        with self._io:
            if self._epoch != epoch or not journal.exists():
                _unlink(tmp)
                return False
            commit(tmp, target, fsync=False)
            self._mirror = design
            if base is not None:
                self._base = base
            if self.pending == epoch:
                self.pending = None
            self._drop_journals(keep=journal)
        return True

    def _drop_journals(self, keep: Path) -> None:
        for j in _journals(self.file):
            if j != keep:
                _unlink(j)

    def begin_compaction(self, steps: list, source_path: str | None):
        """Close the journal (its ``steps`` are the edits in it), open a continuation for later
        edits, and return the worker's job that rewrites the full autosave up to the closed
        journal (None when there is no full autosave to start from). The job returns whether
        its file is the one on disk now."""
        if self._journal is None or self._base is None:
            return None
        fd, path = self._open_journal(continuation=True)
        old_fd, _ = self._journal
        os.close(old_fd)
        self._journal = (fd, path)
        epoch, base, mirror = self._epoch, self._base, self._mirror
        target = _own(self.file)

        def job(cancel=None) -> bool:
            from memdesigner.io.design_file import design_from_dict
            from memdesigner.io.design_journal import apply_steps

            design = mirror if mirror is not None else design_from_dict(base, "autosave")
            try:
                apply_steps(design, steps)
                tmp = stage(target, _envelope_text(design, source_path, path.name), fsync=False)
            except BaseException:
                with self._io:
                    if self._mirror is design:
                        self._mirror = None  # half brought up to date: the document writes in full next
                raise
            return self._land(tmp, target, epoch, path, None, design)

        return job

    def has_journal(self) -> bool:
        return self._journal is not None

    def append(self, ops: list) -> None:
        """One edit's journal step: one write() of one line, on disk for any later kill."""
        from memdesigner.io.design_journal import step_line

        os.write(self._journal[0], step_line(ops))

    def _close_journal(self, remove: bool) -> None:
        if self._journal is not None:
            fd, path = self._journal
            self._journal = None
            os.close(fd)
            if remove:
                _unlink(path)

    def clear(self) -> None:
        """Nothing to recover any more (saved, discarded, closed)."""
        with self._io:
            self._epoch += 1
            self.pending = None
            self._close_journal(remove=True)
            _unlink(self.file)
            for j in _journals(self.file):
                _unlink(j)
        self._base = self._mirror = None

    def release(self) -> None:
        self.clear()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
            try:
                _lock_path(self.file).unlink()
            except OSError:
                pass


@dataclass
class Recoverable:
    """An autosave left by an instance that is no longer running; held (locked) by this process
    while it is offered, so two instances starting together never both take it."""

    file: Path
    source_path: str | None
    saved_at: float
    name: str
    lock: FileLock | None = field(default=None, repr=False)

    def release(self) -> None:
        """Keep it for later: offered again at the next start."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None


def _own(file: Path) -> Path:
    """The autosave's own path, never resolved: a link someone put in its place is replaced by
    the rename, not followed to overwrite the file it points at."""
    return Path(os.path.abspath(file))


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _read(file: Path) -> dict:
    try:  # bounded: a FIFO or a device in the recovery folder must not hang the window's start
        raw = read_bytes(file, "autosave file")
    except BoundedReadError as err:
        raise DesignFileError(str(err)) from None
    data = parse_design_text(raw, str(file))
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("design"), dict):
        raise DesignFileError(f"{file}: not a memdesigner autosave")
    return data


STALE_LOCK_SECONDS = 60.0  # (younger: maybe an instance between creating its lock and its first write)


def _sweep_stale_locks(d: Path, now: float | None = None) -> None:
    """Remove the ``.lock`` files no process holds and no autosave needs (their autosave is gone:
    discarded, or never written by an instance killed at start). They piled up in the folder."""
    now = time.time() if now is None else now
    for lf in d.glob("autosave-*.lock"):
        try:
            if lf.with_suffix(".json").exists() or now - lf.stat().st_mtime < STALE_LOCK_SECONDS:
                continue
        except OSError:
            continue
        lock = FileLock(str(lf))
        try:
            lock.acquire(timeout=0)
        except (Timeout, OSError):
            continue  # held: a running instance's
        try:
            _unlink(lf)
        finally:
            lock.release()


def find() -> list[Recoverable]:
    """Every autosave whose instance is gone, newest first, each locked for this process."""
    d = recovery_dir()
    out: list[Recoverable] = []
    if not d.is_dir():
        return out
    _sweep_stale_locks(d)
    for f in d.glob("autosave-*.json"):
        lock = FileLock(str(_lock_path(f)))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue  # a running instance's own file (or another instance is offering it)
        except OSError:
            continue
        try:
            data = _read(f)
        except (OSError, DesignFileError):
            lock.release()
            continue
        name = data["design"].get("name") or "untitled"
        saved = float(data.get("saved_at") or 0)
        journal = data.get("journal")
        if isinstance(journal, str):  # its last journalled edit, when later
            named = f.parent / Path(journal).name
            for jf in [named, *_continuations(named)]:
                try:
                    saved = max(saved, jf.stat().st_mtime)
                except OSError:
                    pass
        out.append(Recoverable(f, data.get("path"), saved, str(name), lock))
    return sorted(out, key=lambda r: -r.saved_at)


def find_and_release() -> list[Recoverable]:
    """What ``find`` would offer, without holding it (a look, for tests and diagnostics)."""
    found = find()
    for r in found:
        r.release()
    return found


def load(rec: Recoverable) -> Design:
    """The design of an autosave (its run settings in ``design.settings``); DesignFileError when
    it cannot be read."""
    from memdesigner.io.design_journal import read_steps, replay

    try:
        data = _read(rec.file)
    except OSError as err:
        raise DesignFileError(f"{rec.file}: cannot read: {err.strerror or err}") from None
    journal = data.get("journal")
    steps = []
    if isinstance(journal, str):
        named = rec.file.parent / Path(journal).name
        for jf in [named, *_continuations(named)]:
            try:  # its edits since the full autosave; none when the kill came before the first
                raw = read_bytes(jf, "autosave journal")
            except BoundedReadError:
                break
            got = read_steps(raw)
            steps += got
            if len(got) != raw.count(b"\n") or not raw.endswith(b"\n") and raw:
                break  # a step cut short (or unreadable): the journals after it would not apply
    return replay(data["design"], steps, str(rec.file))


def _remove_partial_writes(file: Path) -> None:
    """A kill during a write leaves the temporary file (never the autosave itself) behind."""
    for tmp in file.parent.glob(f".{file.name}.*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass


def discard(rec: Recoverable) -> None:
    """Delete this one autosave (recovered into a document, or discarded by the user) with its
    journals; no other."""
    _unlink(rec.file)
    for j in _journals(rec.file):
        _unlink(j)
    _remove_partial_writes(rec.file)
    rec.release()
    try:
        _lock_path(rec.file).unlink()
    except OSError:
        pass

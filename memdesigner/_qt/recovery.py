"""Crash recovery: each open document owns one autosave file in the user data folder
(``autosave-<instance>.json``) and holds an OS lock on its ``.lock`` beside it for as long as it
runs. A file whose lock can be taken belongs to no running instance: a crash left it. The kernel
drops the lock when a process dies (even by SIGKILL), so a running instance's file is never
offered to another, and a dead one's always is. Files are written atomically (temporary file,
then rename), so a kill never leaves a torn one."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from memdesigner.io.design_file import (
    DesignFileError,
    design_from_dict,
    design_to_dict,
    parse_design_text,
    write_text_atomic,
)
from memdesigner.model.design import Design

FORMAT = "memdesigner-autosave"


def recovery_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(os.environ.get("MEMDESIGNER_RECOVERY_DIR") or Path(user_data_dir("memdesigner")) / "recovery")


def _lock_path(file: Path) -> Path:
    return file.with_suffix(".lock")


def _envelope_text(design: Design, source_path: str | None) -> str:
    import json

    return json.dumps({"format": FORMAT, "saved_at": time.time(), "path": source_path,
                       "design": design_to_dict(design)})


class Slot:
    """This document's autosave file, locked for the document's lifetime."""

    def __init__(self):
        self.id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.file = recovery_dir() / f"autosave-{self.id}.json"
        self._lock: FileLock | None = None

    def _hold(self) -> None:
        if self._lock is None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            self._lock = FileLock(str(_lock_path(self.file)))
            self._lock.acquire(timeout=0)

    def write(self, design: Design, source_path: str | None) -> Path:
        self._hold()
        write_text_atomic(self.file, _envelope_text(design, source_path), fsync=False)
        return self.file

    def clear(self) -> None:
        """Nothing to recover any more (saved, discarded, closed)."""
        try:
            self.file.unlink()
        except OSError:
            pass

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


def _read(file: Path) -> dict:
    data = parse_design_text(file.read_bytes(), str(file))
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("design"), dict):
        raise DesignFileError(f"{file}: not a memdesigner autosave")
    return data


def find() -> list[Recoverable]:
    """Every autosave whose instance is gone, newest first, each locked for this process."""
    d = recovery_dir()
    out: list[Recoverable] = []
    if not d.is_dir():
        return out
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
        out.append(Recoverable(f, data.get("path"), float(data.get("saved_at") or 0), str(name), lock))
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
    try:
        data = _read(rec.file)
    except OSError as err:
        raise DesignFileError(f"{rec.file}: cannot read: {err.strerror or err}") from None
    return design_from_dict(data["design"], str(rec.file))


def _remove_partial_writes(file: Path) -> None:
    """A kill during a write leaves the temporary file (never the autosave itself) behind."""
    for tmp in file.parent.glob(f".{file.name}.*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass


def discard(rec: Recoverable) -> None:
    """Delete this one autosave (recovered into a document, or discarded by the user); no other."""
    try:
        rec.file.unlink()
    except OSError:
        pass
    _remove_partial_writes(rec.file)
    rec.release()
    try:
        _lock_path(rec.file).unlink()
    except OSError:
        pass

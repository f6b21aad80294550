"""Every file memdesigner writes goes through here: a temporary file in the target's folder is
written, flushed and fsynced, then renamed over the target, and the folder is fsynced. A full
disk, a kill or any error at any moment leaves the old file or the new one, never a torn or
empty one, and no temporary file behind (but after a kill: ``.NAME.*.tmp``)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

_CHUNK = 1 << 20


def cannot_write(path, err: OSError) -> str:
    """The one line for the user: the target (not the temporary file) and the reason."""
    return f"{path}: cannot write: {err.strerror or err}"


def write_atomic(path, data: bytes | str, *, fsync: bool = True, follow_symlinks: bool = True) -> Path:
    """Replace ``path`` with ``data`` (str as UTF-8) atomically; returns the file written.

    ``follow_symlinks``: a user's link is written through (its target replaced, the link kept),
    as editors do; False replaces the link itself, so a file we own (the autosave) that someone
    swapped for a link never overwrites what it points at. The file keeps its permission bits (a
    new one gets the umask's default) rather than mkstemp's 0600. ``fsync=False`` (the autosave,
    rewritten every few seconds) still renames atomically but leaves flushing to the OS."""
    target = Path(os.path.realpath(path)) if follow_symlinks else Path(os.path.abspath(path))
    tmp = stage(target, data, fsync=fsync)
    commit(tmp, target, fsync=fsync)
    return target


def stage(target: Path, data: bytes | str, *, fsync: bool = True) -> Path:
    """``data`` in a temporary file beside ``target``, complete and with the target's mode; the
    caller renames it with ``commit``. Nothing is left behind when this raises."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(target.parent))
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, mode)
            _write_all(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if not hasattr(os, "fchmod"):
            os.chmod(tmp, mode)
    except BaseException:
        _unlink(tmp)
        raise
    return Path(tmp)


def commit(tmp: Path, target: Path, *, fsync: bool = True) -> None:
    """Rename a staged file over ``target`` (a directory there: IsADirectoryError, the
    temporary file removed), then make the rename itself durable."""
    try:
        os.replace(tmp, target)
    except BaseException:
        _unlink(tmp)
        raise
    if fsync:
        _fsync_dir(target.parent)


def _write_all(fd: int, data: bytes) -> None:
    """os.write until all of ``data`` is out (a short write is not an error; ENOSPC is)."""
    view = memoryview(data)
    while view:
        n = _write_chunk(fd, view[:_CHUNK])
        if n <= 0:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        view = view[n:]


def _write_chunk(fd: int, chunk) -> int:
    return os.write(fd, chunk)  # the seam the full-disk tests cut


def _fsync_dir(folder: Path) -> None:
    """The folder's entry for the renamed file on disk too. Some file systems (and Windows)
    cannot fsync a folder: the rename has happened, so that is not a failed write."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _mode_for(path: Path) -> int:
    """The permission bits the written file should have: the existing regular file's, else 0666
    less the umask (lstat: a link we replace rather than follow lends its target nothing)."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without setting it where the OS allows (Linux): setting it to
    read it leaves a moment in which a file another thread creates gets mode 0666."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _unlink(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

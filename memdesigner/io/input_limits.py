"""What one input file may cost before memdesigner refuses it: bytes read, things built.

A hostile or broken file (a symlink to /dev/zero, a FIFO, a pickle whose memo repeats one list
10^4 times, a config with 10^15 layers) must be refused in one line, quickly and before the
memory is spent. Each limit has a default far above any real model and can be raised with an
environment variable ``MEMDESIGNER_<NAME>`` (docs/input-limits.md lists them); the refusal
names the limit and that variable.

``open_limited`` / ``read_limited`` are the one place these readers open a user's file: only a
regular file (O_NONBLOCK, so a FIFO cannot hang the open; fstat after opening), at most a stated
number of bytes.
"""

from __future__ import annotations

import os
import stat

from memdesigner import limits as _limits


class InputLimitError(ValueError):
    """A file over a limit or not a regular file; the message is one line naming the file."""


def limit(name: str) -> int:
    """The limit ``MAX_<name>`` of memdesigner.limits (the one table of every limit): its
    ``MEMDESIGNER_MAX_<name>`` variable when set to a positive integer, else the default."""
    return _limits.limit(name.removeprefix("MAX_"))


def over(name: str, what: str) -> str:
    """The end of a refusal: which limit, and how to raise it."""
    return f"{what} (the limit is {limit(name):,}: set MEMDESIGNER_{name} to raise it)"


def open_limited(path, limit_name: str):
    """A regular file opened for binary reading, refused when it is bigger than the limit
    ``limit_name`` (in MB); reads past the limit (a file growing while read) fail too."""
    max_bytes = limit(limit_name) * 1_000_000
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise InputLimitError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
            raise InputLimitError(f"{path}: cannot read: {kind}")
        if st.st_size > max_bytes:
            raise InputLimitError(f"{path}: " + over(limit_name, f"{st.st_size:,} bytes is too big"))
        f = _Limited(os.fdopen(fd, "rb"), max_bytes, str(path), limit_name)
    except BaseException:
        os.close(fd)
        raise
    return f


def read_limited(path, limit_name: str) -> bytes:
    """All of a regular file's bytes, within the limit ``limit_name`` (MB)."""
    with open_limited(path, limit_name) as f:
        return f.read()


class _Limited:
    """A binary file that refuses to read more than ``max_bytes`` in all."""

    def __init__(self, f, max_bytes: int, name: str, limit_name: str):
        self.f, self.left, self.max_bytes, self.name, self.limit_name = f, max_bytes, max_bytes, name, limit_name

    def _take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise InputLimitError(f"{self.name}: " + over(self.limit_name, "the file grew past the limit while read"))

    def read(self, n: int = -1) -> bytes:
        b = self.f.read(self.left + 1 if n is None or n < 0 else min(n, self.left + 1))
        self._take(len(b))
        return b

    def readinto(self, buf) -> int:
        n = self.f.readinto(memoryview(buf)[: self.left + 1]) or 0
        self._take(n)
        return n

    def readline(self, size: int = -1) -> bytes:
        b = self.f.readline(self.left + 1 if size is None or size < 0 else min(size, self.left + 1))
        self._take(len(b))
        return b

    def peek(self, n: int = 1) -> bytes:
        """Bytes ahead without consuming them (nor the budget)."""
        pos = self.f.tell()
        b = self.f.read(max(1, min(n, self.left + 1)))
        self.f.seek(pos)
        return b

    def rewind(self) -> None:
        """Back to the start, with the whole budget again (a second pass over the same file)."""
        self.f.seek(0)
        self.left = self.max_bytes

    def close(self) -> None:
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()

"""Reading a user's file with a bound on what it can cost: only a regular file is read (a FIFO
would block forever, /dev/zero never ends), at most MEMDESIGNER_MAX_FILE_MB of it, and a JSON
parse refuses nesting beyond MEMDESIGNER_MAX_JSON_DEPTH before anything walks the tree
recursively. Every refusal is one ``BoundedReadError`` line naming the file, the limit and the
variable that raises it (memdesigner/limits.py)."""

from __future__ import annotations

import json
import os
import stat

from memdesigner.limits import limit, raise_hint


class BoundedReadError(ValueError):
    """A user file that is not read: the message is one line naming the file and why."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def max_bytes() -> int:
    return limit("FILE_MB") * 1_000_000


def read_bytes(path, what: str = "file") -> bytes:
    """The bytes of ``path``, a regular file of at most MEMDESIGNER_MAX_FILE_MB (a symlink is
    judged by its target). O_NONBLOCK: opening a FIFO returns at once (and is then refused)
    instead of waiting for a writer; the type is checked on the open descriptor (fstat), so the
    file cannot be swapped between the check and the read. ``what`` names it in the message."""
    cap = max_bytes()
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_BINARY", 0))
    except OSError as err:
        raise BoundedReadError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BoundedReadError(f"{path}: cannot read: {_kind(st.st_mode)}, not a {what}")
        if st.st_size > cap:
            raise BoundedReadError(_too_big(path, what, st.st_size, cap))
        chunks, got = [], 0
        while got <= cap:  # st_size may lie (a file still growing, /proc): the cap holds anyway
            chunk = os.read(fd, min(1 << 20, cap + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > cap:
            raise BoundedReadError(_too_big(path, what, got, cap, at_least=True))
        return b"".join(chunks)
    except OSError as err:
        raise BoundedReadError(f"{path}: cannot read: {err.strerror or err}") from None
    finally:
        os.close(fd)


def _too_big(path, what: str, size: int, cap: int, at_least: bool = False) -> str:
    more = "over" if at_least else f"{size / 1e6:,.1f} MB,"
    return (f"{path}: cannot read: {more} the {cap // 1_000_000:,} MB limit for a {what} "
            f"({raise_hint('FILE_MB')})")


def too_deep(data, max_depth: int | None = None) -> list | None:
    """The path to a value nested deeper than ``max_depth`` (MEMDESIGNER_MAX_JSON_DEPTH), or None.
    Iterative, depths only: a path per value was a quarter of a second for a 10,000-layer design;
    the path is built only for a tree that is too deep."""
    max_depth = max_depth or limit("JSON_DEPTH")
    both = (dict, list)
    if not isinstance(data, both):  # a number or a string at the top: nothing nested
        return None
    stack = [(data, 0)]
    while stack:
        obj, depth = stack.pop()
        if depth >= max_depth:  # its children (if any) are nested deeper than max_depth
            if obj:
                return _deep_path(data, max_depth)
            continue
        depth += 1
        for v in (obj.values() if isinstance(obj, dict) else obj):
            if isinstance(v, both):
                stack.append((v, depth))
    return None


def _deep_path(data, max_depth: int) -> list | None:
    """The path to a value nested deeper than ``max_depth`` (slow: each value's path is built)."""
    stack = [(data, [])]
    while stack:
        obj, path = stack.pop()
        if len(path) > max_depth:
            return path
        if isinstance(obj, dict):
            stack.extend((v, [*path, k]) for k, v in obj.items())
        elif isinstance(obj, list):
            stack.extend((v, [*path, i]) for i, v in enumerate(obj))
    return None


def depth_message(max_depth: int | None = None) -> str:
    return f"nested deeper than {max_depth or limit('JSON_DEPTH')} levels ({raise_hint('JSON_DEPTH')})"


def path_text(path) -> str:
    """``a.b[3].c``: a JSON path as the one-line messages name it."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def parse_json(text: str | bytes, source: str):
    """JSON text parsed within MEMDESIGNER_MAX_JSON_DEPTH: a BoundedReadError naming the line and
    column of invalid JSON, the path of a value nested too deep (also past Python's recursion
    limit, which the parser meets first at about 1,000 levels), or an over-long integer."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise BoundedReadError(f"{source}: line {err.lineno} column {err.colno}: invalid JSON: {err.msg}") from None
    except RecursionError:
        raise BoundedReadError(f"{source}: {depth_message()}") from None
    except ValueError as err:  # an integer literal over Python's 4,300-digit limit
        raise BoundedReadError(f"{source}: invalid JSON: {str(err).splitlines()[0]}") from None
    deep = too_deep(data)
    if deep is not None:
        raise BoundedReadError(f"{source}: {path_text(deep[:3])}: {depth_message()}")
    return data


def read_json(path, what: str = "file"):
    """``read_bytes`` then ``parse_json`` of the file as UTF-8 (one BoundedReadError for all)."""
    data = read_bytes(path, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BoundedReadError(f"{path}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None
    return parse_json(text, str(path))

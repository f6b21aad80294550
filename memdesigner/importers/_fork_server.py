"""The caller's side of a contained child (``_contained``): start it from the fork server with
the server's answer bounded, and stop it so that nothing of it is left.

multiprocessing's fork server answers a start with the new child's pid; a server the model's
code stopped (SIGSTOP) or froze never answers, and the start, Cancel and every later import
waited for ever. Here the start runs on a helper thread: a server that answered before must
answer again within ``SERVER_PING_S`` (a fresh one first imports torch: ``SERVER_START_S``), or
it is killed and a fresh one started; a stopped one is replaced at once.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from memdesigner.importers import _contained
from memdesigner.importers.torch_fx import TorchImportError

SERVER_PING_S = 10.0  # a warm server forks in well under a second, even on a busy machine
SERVER_START_S = 180.0  # a fresh server imports torch (and warms torch.fx) first
STOP_GRACE_S = 3.0  # the supervisor kills what is left and exits within this once asked
POLL_S = 0.1
_ANSWERED: set[int] = set()  # fork server pids that answered a start (they are warm)


class Child:
    """One contained child: its process, the pipe its frame comes back on and the lifeline
    (closing it asks the supervisor to end everything)."""

    def __init__(self, ctx, job, request, name: str):
        self.recv, send = ctx.Pipe(duplex=False)
        life_r, self._life_w = ctx.Pipe(duplex=False)
        self._child_ends = (send, life_r)
        self.proc = ctx.Process(target=_contained.supervise, args=(send, life_r, job, request), name=name, daemon=True)
        self.started = False

    def close_child_ends(self) -> None:
        for conn in self._child_ends:
            conn.close()

    def exitcode(self):
        """The supervisor's own exit code (when it ended without a frame); None if unknown."""
        self.proc.join(1)
        return self.proc.exitcode

    def stop(self) -> None:
        """Close the lifeline, wait for the supervisor to end what is left, kill the session
        where it does not (a stopped supervisor)."""
        self._life_w.close()
        if self.started and not _closed_within(self.recv, STOP_GRACE_S):
            _contained.kill_session(self.proc.pid)
        self.recv.close()


def _closed_within(conn, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return False
        try:
            if conn.poll(left):
                conn.recv_bytes()
        except (EOFError, OSError):
            return True


def start(ctx, make_child, cancel, hide_main) -> Child | None:
    """A started Child (``make_child()`` makes a fresh one per try), or None once ``cancel``
    is set. TorchImportError when the server does not answer, even a fresh one."""
    if ctx.get_start_method() != "forkserver":
        child = make_child()
        try:
            with hide_main():
                child.proc.start()
        finally:
            child.close_child_ends()
        child.started = True
        return child
    for _ in range(2):
        pid = _server_pid()
        if pid is not None and _stopped(pid):
            restart_server(pid)
        pid = _server_pid()
        warm = pid in _ANSWERED and _state(pid) not in ("", "Z", "X")  # (a dead one is relaunched)
        limit = SERVER_PING_S if warm else SERVER_START_S
        child = make_child()
        outcome = _start_bounded(child, limit, cancel, hide_main)
        if outcome == "started":
            _ANSWERED.add(_server_pid())
            return child
        child.stop()
        if outcome == "cancelled":
            return None
        if isinstance(outcome, BaseException) and not isinstance(outcome, (EOFError, OSError)):
            raise outcome  # the request itself (it does not pickle, ...): no server helps
        # it did not answer, or it died under the start: a fresh one (this start may have launched it)
        restart_server(pid if pid is not None else _server_pid())
        if not warm:
            if isinstance(outcome, BaseException):
                raise TorchImportError(f"the import server ended before it answered ({type(outcome).__name__})")
            raise TorchImportError(f"the import server did not start within {SERVER_START_S:g} s")
    raise TorchImportError("the import server does not answer")


def _start_bounded(child: Child, limit: float, cancel, hide_main):
    """"started", "cancelled", "no answer" or the exception the start raised. A start left
    behind finishes on its thread; its supervisor then finds the lifeline closed and ends."""
    done = threading.Event()
    box: dict = {}

    def go():
        try:
            with hide_main():
                child.proc.start()
            child.started = True
        except BaseException as err:  # noqa: BLE001 - handed to the waiting caller
            box["error"] = err
        finally:
            child.close_child_ends()
            done.set()

    threading.Thread(target=go, name="memdesigner-child-start", daemon=True).start()
    end = time.monotonic() + limit
    while not done.wait(min(POLL_S, max(0.0, end - time.monotonic()))):
        if cancel is not None and cancel.is_set():
            return "cancelled"
        if time.monotonic() >= end:
            return "no answer"
    return box.get("error", "started")


def _server_pid() -> int | None:
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)


def _state(pid: int) -> str:
    """/proc's one-letter state of ``pid``; "" when there is none (or no /proc: then the bounded
    start alone finds a server that does not answer)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return ""
    return stat[stat.rfind(b")") + 2:][:1].decode()


def _stopped(pid: int) -> bool:
    return _state(pid) in ("T", "t")


def restart_server(pid: int | None) -> None:
    """Kill the fork server ``pid`` (a stopped one too) and forget it, unless another start
    replaced it already: the next start launches a fresh one. Children it forked live on (their
    supervisors answer for them). The attributes are multiprocessing's own: its ``_stop`` would
    wait for a stopped server for ever."""
    from multiprocessing import forkserver

    fs = forkserver._forkserver
    with fs._lock:
        if pid is None or fs._forkserver_pid != pid:
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        fs._stop_unlocked()
        _ANSWERED.discard(pid)

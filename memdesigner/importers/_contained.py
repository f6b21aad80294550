"""Keep what a model file starts inside its child process, and end all of it together.

The child that ``run_in_child`` starts (the *supervisor*) runs none of the model's code: it opens
a session of its own, becomes the subreaper of everything below it and forks the *worker* that
runs the job. It watches two things: the worker (its answer, its exit) and the caller's
*lifeline*, a pipe only the caller can write to, so it reads EOF when the caller is gone (also
after ``kill -9``) or gives up (time limit, Cancel). Either way it kills the worker's group and
every process left in its session or reparented to it, and only then answers: a model that
forks, spins up grandchildren or exits early is reported as it is and leaves nothing running.

Why not ``PR_SET_PDEATHSIG`` alone: the supervisor's parent is the fork server, not the caller,
and the signal fires on the exit of the parent *thread* (the window's worker threads come and
go); it also reaches only the one process. The worker does use it, against its supervisor (a
single-threaded process), so a killed supervisor takes the worker with it.
A process that leaves the session *and* outlives its parent while the supervisor is itself
killed escapes; nothing short of a cgroup holds that.
"""

from __future__ import annotations

import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
WATCH_S = 0.05  # how often the supervisor looks at the worker's exit between its pipes' events
KILL_ROUNDS_S = 5.0  # the most the supervisor spends killing what is left (a fork bomb races it)
_WORKER_PID: int | None = None  # set in the worker: a fork of it that returns into the job stays quiet


def _prctl(option: int, arg: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def processes():
    """(pid, state, ppid, session) of every process /proc shows (none without /proc)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # it ended meanwhile
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # the name in (...) may hold spaces
        try:
            yield int(name), fields[0].decode(), int(fields[1]), int(fields[3])
        except (IndexError, ValueError):
            continue


def kill_session(sid: int, spare: int | None = None, parent: int | None = None) -> list[int]:
    """SIGKILL every live process of session ``sid`` (and the children of ``parent``), except
    ``spare``; the pids it signalled."""
    hit = []
    for pid, state, ppid, session in processes():
        if pid != spare and state != "Z" and (session == sid or (parent is not None and ppid == parent)):
            try:
                os.kill(pid, signal.SIGKILL)
                hit.append(pid)
            except OSError:
                pass
    return hit


def in_worker() -> bool:
    """Whether this is the worker itself, not a fork the model's code made of it."""
    return _WORKER_PID is None or os.getpid() == _WORKER_PID


def supervise(send, lifeline, job, request) -> None:
    """The child process's body: run ``job(request) -> bytes`` in a worker process and send the
    caller one frame (the worker's exit code and its answer, see ``read_frame``) once nothing the
    worker started is alive; no frame when the lifeline closed first."""
    _quiet()
    _drop_server_pipes()
    if not hasattr(os, "fork"):  # Windows: no sessions to contain; the job runs right here
        _send(send, _frame(0, job(request)))
        os._exit(0)
    me = os.getpid()
    try:
        os.setsid()
    except OSError:  # already a session leader (spawned elsewhere): the session is its own still
        pass
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    r, w = os.pipe()
    worker = os.fork()
    if worker == 0:
        os.close(r)
        _worker(send, lifeline, w, me, job, request)
    os.close(w)
    try:
        os.setpgid(worker, worker)  # the worker does this too: whichever runs first
    except OSError:
        pass
    code, payload = _watch(worker, r, lifeline)
    _kill_all(worker, me)
    if code is not None:
        _send(send, _frame(code, payload))
    send.close()  # the caller's sign that all is over: before this process's own teardown
    os._exit(0)


def _worker(send, lifeline, w, supervisor: int, job, request) -> None:
    global _WORKER_PID
    answered = False
    try:
        _WORKER_PID = os.getpid()
        os.setpgid(0, 0)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != supervisor:  # it died before the line above
            os._exit(1)
        send.close()
        lifeline.close()
        payload = job(request)
        if in_worker():
            _write_message(w, payload)
            answered = True
    except SystemExit as err:  # a fork of the model's, ending the way the model asked
        os._exit(err.code if isinstance(err.code, int) else 0 if err.code is None else 1)
    except BaseException:  # noqa: BLE001, S110 - nothing of it may reach the caller
        pass
    finally:
        os._exit(0 if answered else 1)


def _watch(worker: int, r: int, lifeline):
    """Wait for the worker's answer and exit: (exit code, answer bytes or None); (None, None)
    once the lifeline closed (the caller is gone or gave up)."""
    from multiprocessing.connection import wait

    buf, reading, code = bytearray(), True, None
    exited = _exit_fd(worker)
    while True:
        ready = wait([lifeline] + ([r] if reading else []) + ([exited] if exited is not None else []), timeout=WATCH_S)
        if lifeline in ready:
            return None, None
        if r in ready:
            chunk = os.read(r, 1 << 20)
            buf += chunk
            reading = bool(chunk)
        if code is None:
            done, status = os.waitpid(worker, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
        # the worker wrote all it wrote before it exited: what is in the pipe now is all of it
        if code is not None and (_parse_message(bytes(buf)) is not None or not reading or not _more_to_read(r)):
            return code, _parse_message(bytes(buf))


def _exit_fd(pid: int) -> int | None:
    """A descriptor that turns readable when ``pid`` exits (Linux 5.3+), so the answer goes out
    at once rather than at the next look; None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _more_to_read(r: int) -> bool:
    from multiprocessing.connection import wait

    return bool(wait([r], timeout=0))


def _write_message(fd: int, payload: bytes) -> None:
    data = len(payload).to_bytes(8, "big") + payload
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _parse_message(buf: bytes) -> bytes | None:
    """The worker's one message (8-byte length, bytes); None when it is missing or cut off.
    What forks of the model may have written after it is ignored."""
    if len(buf) < 8:
        return None
    n = int.from_bytes(buf[:8], "big")
    return buf[8:8 + n] if len(buf) >= 8 + n else None


def _kill_all(worker: int, me: int) -> None:
    """Kill the worker's group, then whatever is left in this session or was reparented here,
    until nothing is; reap them all."""
    try:
        os.killpg(worker, signal.SIGKILL)
    except OSError:
        pass
    end = time.monotonic() + KILL_ROUNDS_S
    while True:
        hit = kill_session(me, spare=me, parent=me)
        _reap()
        if not hit or time.monotonic() > end:
            return
        time.sleep(0.005)


def _reap() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _quiet() -> None:
    """The model's prints must not reach the caller's terminal, and no process of ours may keep
    the caller's stdout open (a pipe reading it would wait for us)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _drop_server_pipes() -> None:
    """The fork server stays up while any process holds its "alive" pipe, the resource tracker
    while any holds its pipe: a child must not (the caller's exit has to end both)."""
    try:
        from multiprocessing import forkserver, resource_tracker
    except ImportError:
        return
    for owner, attr in ((forkserver._forkserver, "_forkserver_alive_fd"), (resource_tracker._resource_tracker, "_fd")):
        fd = getattr(owner, attr, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
            setattr(owner, attr, None)


def _frame(code: int, payload: bytes | None) -> bytes:
    return f"{int(code)} {0 if payload is None else 1}\n".encode() + (payload or b"")


def read_frame(data: bytes) -> tuple[int | None, bytes | None]:
    """The supervisor's frame -> (the worker's exit code, its answer or None)."""
    head, _, rest = data.partition(b"\n")
    try:
        code, has = head.split()
        return int(code), (rest if has == b"1" else None)
    except ValueError:
        return None, None


def _send(conn, data: bytes) -> None:
    try:
        conn.send_bytes(data)
    except OSError:  # the caller is gone
        pass

"""The import child is contained: what a model file starts ends with it (time limit, Cancel,
``kill -9`` of the CLI), a model that forks still gives its result, and a fork server the model
stopped is replaced. Real processes; every pid a model starts is noted in a file and looked up
in /proc afterwards."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

pytest.importorskip("torch")
if not sys.platform.startswith("linux"):
    pytest.skip("process sessions and /proc: Linux", allow_module_level=True)

from memdesigner.importers import _fork_server
from memdesigner.importers.torch_fx import TorchImportError
from memdesigner.importers.torch_isolated import Cancelled, import_file_isolated

MODEL = '''
import os
import signal
import sys
import time

import torch.nn as nn


def _note(pid):
    with open(os.environ["MEMDESIGNER_TEST_PIDS"], "a") as f:
        f.write(f"{pid}\\n")


def _sleeper(leave_session=False):
    """Fork a process that sleeps (in a session of its own when asked); back once it is noted."""
    r, w = os.pipe()
    if os.fork() == 0:
        if leave_session:
            os.setsid()
        _note(os.getpid())
        os.write(w, b"x")
        time.sleep(600)
        os._exit(0)
    os.read(r, 1)


def good():
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU()), (4,)


def sleepers_then_spins():
    _sleeper()
    _sleeper(leave_session=True)
    _note(os.getpid())
    while True:
        pass


def forks_and_exits():
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    os.waitpid(pid, 0)
    return good()


def forks_a_sleeper():
    _sleeper()
    return good()


def forks_a_sleeper_and_exits():
    _sleeper()
    os._exit(0)


def stops_the_fork_server():
    with open(f"/proc/{os.getppid()}/stat") as f:  # the parent is the supervisor; its parent, the server
        server = int(f.read().rpartition(")")[2].split()[1])
    _note(server)
    os.kill(server, signal.SIGSTOP)
    return good()
'''


@pytest.fixture()
def model(tmp_path, monkeypatch):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    pids = tmp_path / "pids"
    monkeypatch.setenv("MEMDESIGNER_TEST_PIDS", str(pids))
    monkeypatch.chdir(tmp_path)
    return path


def _noted(model) -> list[int]:
    f = model.parent / "pids"
    return [int(x) for x in f.read_text().split()] if f.exists() else []


def _state(pid: int) -> str:
    """/proc's one-letter state ("" for no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return ""
    return stat[stat.rfind(b")") + 2:][:1].decode()


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie runs nothing: it waits for its parent to reap it)."""
    return _state(pid) not in ("", "Z")


def _wait_noted(model, n: int, seconds: float = 120) -> list[int]:
    end = time.monotonic() + seconds
    while len(_noted(model)) < n:
        assert time.monotonic() < end, "the model never started"
        time.sleep(0.05)
    return _noted(model)


def test_the_time_limit_ends_what_the_model_started(model):
    """Two sleeping grandchildren (one in a session of its own) and the spinning worker: the
    time limit ends all three before the import returns."""
    with pytest.raises(TorchImportError, match="did not finish within 3 s"):
        import_file_isolated("model.py:sleepers_then_spins", timeout=3)
    pids = _noted(model)
    assert len(pids) == 3
    assert [p for p in pids if _running(p)] == []


def test_cancel_ends_what_the_model_started(model):
    cancel = threading.Event()
    threading.Thread(target=lambda: (_wait_noted(model, 3), cancel.set()), daemon=True).start()
    with pytest.raises(Cancelled):
        import_file_isolated("model.py:sleepers_then_spins", timeout=300, cancel=cancel)
    pids = _noted(model)
    assert len(pids) == 3
    assert [p for p in pids if _running(p)] == []


def test_a_model_that_forks_and_exits_gives_its_result(model):
    """The fork's sys.exit is no answer of the import's (it said "called sys.exit(0)")."""
    d = import_file_isolated("model.py:forks_and_exits", timeout=60)
    assert [n.type for n in d.nodes.values()] == ["Input", "Linear", "ReLU"]


def test_a_sleeper_the_model_forked_ends_with_the_import(model):
    d = import_file_isolated("model.py:forks_a_sleeper", timeout=60)
    assert [n.type for n in d.nodes.values()] == ["Input", "Linear", "ReLU"]
    (pid,) = _noted(model)
    assert not _running(pid)


def test_a_worker_that_exits_while_its_fork_sleeps_is_reported_at_once(model):
    """The forked sleeper kept the answer pipe open: the import waited for the time limit and
    said "did not finish"."""
    t = time.monotonic()
    with pytest.raises(TorchImportError, match=r"ended the import process before it finished \(it exited with code 0\)"):
        import_file_isolated("model.py:forks_a_sleeper_and_exits", timeout=20)
    assert time.monotonic() - t < 10
    (pid,) = _noted(model)
    assert not _running(pid)


@pytest.fixture()
def stopped_server(model):
    """Whatever the test does, the server the model stopped is killed at the end."""
    yield model
    for pid in _noted(model):
        if _running(pid):
            os.kill(pid, signal.SIGKILL)


def _import_in_thread(spec: str, timeout: float, wait_s: float):
    box = {}
    t = threading.Thread(target=lambda: box.update(design=import_file_isolated(spec, timeout=timeout)), daemon=True)
    t.start()
    t.join(wait_s)
    return box.get("design")


def test_an_import_after_the_model_stopped_the_fork_server_works(stopped_server, monkeypatch):
    """The model SIGSTOPs the fork server and returns: its own result arrives, and the next import
    starts a fresh server at once, seen stopped in /proc (it never answered: that import waited
    for ever)."""
    monkeypatch.setattr(_fork_server, "SERVER_PING_S", 600.0)  # only the look in /proc can help in time
    import_file_isolated("model.py:good", timeout=60)  # a warm server
    d = _import_in_thread("model.py:stops_the_fork_server", 60, 60)
    assert d is not None and len(d.nodes) == 3
    (server,) = _noted(stopped_server)
    assert _state(server) == "T"
    d = _import_in_thread("model.py:good", 60, 120)
    assert d is not None and len(d.nodes) == 3
    assert not _running(server)  # replaced


def test_a_fork_server_that_does_not_answer_is_replaced_and_cancel_works_meanwhile(stopped_server, monkeypatch):
    """With the look in /proc turned off, a server that does not answer is found by the start's
    bounded wait; while the start waits, Cancel is seen (the start waited for ever)."""
    monkeypatch.setattr(_fork_server, "_stopped", lambda pid: False)
    monkeypatch.setattr(_fork_server, "SERVER_PING_S", 600.0)
    import_file_isolated("model.py:good", timeout=60)  # a warm server
    assert _import_in_thread("model.py:stops_the_fork_server", 60, 60) is not None
    (server,) = _noted(stopped_server)
    cancel, box = threading.Event(), {}

    def cancelled():
        try:
            import_file_isolated("model.py:good", timeout=60, cancel=cancel)
        except Cancelled as err:
            box["raised"] = err

    t = threading.Thread(target=cancelled, daemon=True)
    t.start()
    time.sleep(1.0)
    cancel.set()
    t.join(5)
    assert isinstance(box.get("raised"), Cancelled)
    monkeypatch.setattr(_fork_server, "SERVER_PING_S", 1.0)
    d = _import_in_thread("model.py:good", 60, 120)
    assert d is not None and len(d.nodes) == 3
    assert not _running(server)  # replaced


def _ours(token: str) -> list[int]:
    """Live processes whose environment carries ``token`` (all a CLI run with it started)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if f"MEMDESIGNER_TEST_TOKEN={token}".encode() in env.split(b"\0") and _running(int(name)):
                found.append(int(name))
    return found


def test_kill_9_of_the_cli_mid_import_leaves_no_process(model):
    """The CLI is killed while the model spins with two sleeping grandchildren: the worker, the
    grandchildren, the supervisor, the fork server and the resource tracker all end (the worker
    spun on at 100 % CPU for ever and held the server's and the tracker's pipes)."""
    token = uuid.uuid4().hex
    env = dict(os.environ, MEMDESIGNER_TEST_TOKEN=token)
    cli = subprocess.Popen([sys.executable, "-m", "memdesigner.cli", "import", "torch", "model.py:sleepers_then_spins",
                            "-o", "out.json", "--timeout", "300"], cwd=model.parent, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pids = _wait_noted(model, 3)
        before = _ours(token)
        assert set(pids) <= set(before) and len(before) >= 6  # + the CLI, the server, the tracker
        cli.kill()
        cli.wait(10)
        end = time.monotonic() + 15
        while _ours(token) and time.monotonic() < end:
            time.sleep(0.1)
        assert _ours(token) == []
    finally:
        for pid in _ours(token):
            os.kill(pid, signal.SIGKILL)
        if cli.poll() is None:
            cli.kill()

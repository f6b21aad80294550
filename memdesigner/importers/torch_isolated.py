"""Import a PyTorch model file in a child process.

Importing ``FILE.py:FACTORY`` runs the file's Python code. In the caller's process that code could
end it (``sys.exit``, ``os._exit``), hang it (an endless loop), move it (``os.chdir``, so ``-o``
lands elsewhere) or fill its stdout. Here the file runs in a child process with a time limit; the
child sends the design back as JSON through the design serializer (``memdesigner.io``) and the
caller writes it. Every failure is one line: the factory's exception, an exit, a crash, the limit.

    from memdesigner.importers.torch_isolated import import_file_isolated
    design = import_file_isolated("model.py:make", input_shape=(3, 224, 224), timeout=300)

On Linux the child is forked from a server that has torch imported already (the first import pays
for that once; the next ones take a fraction of a second); elsewhere it is spawned. The child is
contained (``_contained``): what the model's code starts ends with it, at the time limit, on
Cancel and when the caller dies; a server that stops answering is replaced (``_fork_server``).
``memdesigner.importers.torch_fx.import_file`` stays the in-process API for trusted code.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
import pickle
import re
import sys
import threading
import time
import types
from dataclasses import asdict
from pathlib import Path

from memdesigner.importers import _contained, _fork_server
from memdesigner.importers.torch_fx import META_BATCH, NeedsInputShape, TorchImportError
from memdesigner.text import first_line, one_line

DEFAULT_TIMEOUT_S = 300.0
POLL_S = 0.1  # how often a waiting caller looks at its cancel event
MAX_DIMS = 8
_PRELOAD = ["torch", "torch.fx", "memdesigner.importers.torch_fx", "memdesigner.io.design_file",
            "memdesigner.importers._torch_check", "memdesigner.engine.estimate", "torch._subclasses.fake_tensor",
            "memdesigner.importers._torch_warm", "memdesigner.importers._server_quick_exit"]
_CTX = None
_START_LOCK = threading.Lock()


class TorchNotInstalled(ImportError):
    """The child could not import torch."""


def parse_input_shape(text, what: str = "--input-shape") -> tuple | None:
    """``"3,224,224"`` (or ``3x224x224``) -> (3, 224, 224); None for no text. Every dimension is a
    positive integer; TorchImportError names the option (``what``: the window names its field)
    otherwise."""
    if text is None or not str(text).strip():
        return None
    parts = [p.strip() for p in str(text).replace("x", ",").replace("×", ",").split(",")]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise TorchImportError(f"{what}: {one_line(text)!r} is not a list of integers like 3,224,224") from None
    if not shape or len(shape) > MAX_DIMS or any(d <= 0 for d in shape):
        raise TorchImportError(f"{what}: {one_line(text)!r} needs 1 to {MAX_DIMS} positive dimensions")
    return shape


def _context():
    global _CTX
    if _CTX is None:
        if sys.platform.startswith("linux") and "forkserver" in multiprocessing.get_all_start_methods():
            _CTX = multiprocessing.get_context("forkserver")
            _CTX.set_forkserver_preload(_PRELOAD)
        else:
            _CTX = multiprocessing.get_context("spawn")
    return _CTX


@contextlib.contextmanager
def _main_hidden():
    """multiprocessing re-runs the caller's ``__main__`` script in the child (as ``__mp_main__``)
    unless it is hidden while the child starts: a script without a ``__name__`` guard would run
    again, one read from stdin cannot be found. The child needs nothing from it."""
    with _START_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


def _exit_reason(code) -> str:
    if code is None:
        return "it did not stop"
    if code < 0:
        import signal

        try:
            return f"it was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"it was killed by signal {-code}"
    return f"it exited with code {code}"


class Cancelled(TorchImportError):
    """The caller set the cancel event: the child was killed."""


def wait_for_child(recv, timeout: float | None, cancel=None) -> bool:
    """Poll the child's pipe until it has something (True), the time limit passes (False) or
    ``cancel`` (a threading.Event) is set (Cancelled)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        step = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
        if step <= 0:
            return False
        if recv.poll(step):
            return True


def run_in_child(job, request: dict, name: str, timeout: float | None, cancel, decode) -> tuple:
    """Run ``job(request) -> bytes`` in a contained child process (``_contained``: the model's
    own processes are ended with it) and wait for its answer: (``decode(bytes)``, or None when
    it ended without a readable answer; its exit code). TimeoutError after ``timeout`` s,
    Cancelled once ``cancel`` is set; the child and all it started are killed then."""
    ctx = _context()
    child = _fork_server.start(ctx, lambda: _fork_server.Child(ctx, job, request, name), cancel, _main_hidden)
    if child is None:
        raise Cancelled("cancelled")
    msg = code = None
    try:
        if not wait_for_child(child.recv, timeout, cancel):
            raise TimeoutError(name)
        try:
            code, payload = _contained.read_frame(child.recv.recv_bytes())
        except (EOFError, OSError):  # the supervisor itself was killed
            payload = None
        if payload is not None:
            try:
                msg = decode(payload)
            except (ValueError, pickle.UnpicklingError, EOFError):  # no readable answer
                msg = None
    finally:
        child.stop()
    if code is None:
        code = child.exitcode()
    return msg, code


def import_file_isolated(target: str, input_shape=None, input_dtype=None, name: str | None = None,
                         timeout: float | None = DEFAULT_TIMEOUT_S, cancel=None, check=True):
    """``import_file`` run in a child process; returns the Design (with ``import_warnings`` and
    ``import_params``; ``check``: and ``verified``, what PyTorch measured of one step: True at the
    defaults, or a list of Settings to check at). TorchImportError (one line) on any failure of the model file or the
    child, TorchNotInstalled when the child has no torch; Cancelled (the child killed) as soon
    as ``cancel`` (a threading.Event) is set."""
    from memdesigner.io.design_file import DesignFileError, design_from_dict

    if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
                                or not math.isfinite(timeout) or timeout <= 0):
        raise TorchImportError(f"--timeout: {timeout!r} is not a positive number of seconds")
    shown = one_line(target)
    path, sep, factory = str(target).rpartition(":") if ":" in str(target) and not Path(target).exists() \
        else (str(target), "", "")
    if not Path(path).is_file():
        raise TorchImportError(f"{one_line(path)}: no such file")
    # the server forked from may be older than this call: send the caller's cwd and environment
    request = {"target": str(Path(path).resolve()) + sep + factory, "cwd": os.getcwd(), "env": dict(os.environ),
               "input_shape": list(input_shape) if input_shape is not None else None,
               "input_dtype": input_dtype, "name": name,
               "check": check if isinstance(check, bool) else [asdict(s) for s in check]}
    try:
        msg, exitcode = run_in_child(_job, request, "memdesigner-torch-import", timeout, cancel,
                                     lambda b: json.loads(b.decode("utf-8")))
    except TimeoutError:
        raise TorchImportError(f"{shown}: the model code did not finish within {timeout:g} s "
                               "(an endless loop? a larger model needs a larger --timeout)") from None
    if msg is None:
        raise TorchImportError(f"{shown}: the model code ended the import process before it finished "
                               f"({_exit_reason(exitcode)})")
    if msg.get("missing_torch"):
        raise TorchNotInstalled(msg["error"])
    if msg.get("needs_input_shape"):
        raise NeedsInputShape(f"{shown}: the factory returned no input shape")
    if not msg.get("ok"):
        raise TorchImportError(f"{shown}: {msg.get('error', 'the import failed')}")
    try:
        design = design_from_dict(msg["design"], f"{shown} (imported)")
    except DesignFileError as err:
        raise TorchImportError(first_line(err)) from None
    design.import_warnings = [one_line(w) for w in msg.get("warnings", [])]
    design.import_params = int(msg.get("params", 0))
    return design


def _job(request: dict) -> bytes:
    """Runs in the child's worker: import and serialize (the supervisor sends it back)."""
    msg: dict
    try:
        import torch  # noqa: F401
    except ImportError as err:
        msg = {"ok": False, "missing_torch": True, "error": f"PyTorch import needs torch installed: {first_line(err)}"}
    else:
        msg = _run(request)
    try:
        return json.dumps(msg).encode("utf-8")
    except (TypeError, ValueError) as err:
        return json.dumps({"ok": False, "error": f"the imported design cannot be sent back: {first_line(err)}"}).encode()


def _run(request: dict) -> dict:
    try:
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        from memdesigner.importers.torch_fx import import_file
        from memdesigner.io.design_file import design_to_dict

        shape = request["input_shape"]
        d = import_file(request["target"], input_shape=tuple(shape) if shape is not None else None,
                        input_dtype=request["input_dtype"], name=request["name"], check=_check_of(request))
        return {"ok": True, "design": design_to_dict(d), "warnings": [str(w) for w in d.import_warnings],
                "params": int(getattr(d, "import_params", 0) or 0)}
    except SystemExit as err:
        if not _contained.in_worker():  # a process the model forked exits: it is no answer
            raise
        return {"ok": False, "error": f"the model code called sys.exit({_safe_repr(err.code)})"}
    except NeedsInputShape as err:
        return {"ok": False, "error": _safe_str(err), "needs_input_shape": True}
    except TorchImportError as err:  # our own message names the file and the problem
        return {"ok": False, "error": _safe_str(err)}
    except BaseException as err:  # the model's code can raise anything; say what, in one line  # noqa: BLE001
        return {"ok": False, "error": f"{type(err).__name__}: {_safe_str(err)}"}


def _check_of(request: dict):
    check = request.get("check", False)
    if isinstance(check, bool):
        return check
    from memdesigner.engine.settings import Settings

    return [Settings(**{k: tuple(v) if isinstance(v, list) else v for k, v in s.items()}) for s in check]


def _safe_str(err) -> str:
    """The first line of the message, and of the innermost cause where there is one (ShapeProp's
    "ShapeProp error for: node=..." wraps the forward's real error)."""
    try:
        s = first_line(err) or "(no message)"
        m = re.match(r"ShapeProp error for: node=%(\S+)", str(err))
        if m:
            s = f"the forward pass fails at {m.group(1)} on a batch of {META_BATCH}"
        cause, seen = err.__cause__, 0
        while cause is not None and cause.__cause__ is not None and seen < 20:
            cause, seen = cause.__cause__, seen + 1
        if cause is not None:
            s += f" (caused by {type(cause).__name__}: {first_line(cause) or '(no message)'})"
        return s
    except Exception:  # noqa: BLE001 - a hostile __str__
        return "(an exception whose message cannot be shown)"


def _safe_repr(v) -> str:
    try:
        return first_line(repr(v), 80)
    except Exception:  # noqa: BLE001
        return "..."


__all__ = ["Cancelled", "DEFAULT_TIMEOUT_S", "TorchNotInstalled", "import_file_isolated", "parse_input_shape"]

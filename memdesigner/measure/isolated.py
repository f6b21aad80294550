"""Measure a design in a child process (the window's Tools -> Measure with PyTorch).

Importing torch in the window's process holds the GIL for seconds (the window froze ~8 s on the
first measurement), and a running step cannot be stopped from another thread. In a child forked
from the import server (torch_isolated: torch is imported there already) neither is a problem:
the window stays live and Cancel kills the child.

    from memdesigner.measure.isolated import measure_isolated
    result = measure_isolated(design, settings, cancel=threading.Event())
"""

from __future__ import annotations

import importlib.util
import os
import pickle

from memdesigner.text import first_line


class MeasureError(RuntimeError):
    """The measurement failed; the message is one line."""


def torch_available() -> bool:
    """Whether torch can be imported, found without importing it."""
    return importlib.util.find_spec("torch") is not None


def measure_isolated(design, settings, *, cancel=None, timeout: float | None = None) -> dict:
    """``measure_design(design, settings)`` in a child process; returns its result dict (without
    the harness's raw ``record``).
    ImportError without torch, MeasureError (one line) when it fails, torch_isolated.Cancelled
    once ``cancel`` (a threading.Event) is set (the child is killed)."""
    from memdesigner.importers.torch_isolated import _exit_reason, run_in_child
    from memdesigner.io.design_file import design_to_dict

    if not torch_available():
        raise ImportError("No module named 'torch'")
    request = {"design": design_to_dict(design), "settings": settings, "cwd": os.getcwd()}
    try:
        msg, exitcode = run_in_child(_job, request, "memdesigner-measure", timeout, cancel, pickle.loads)
    except TimeoutError:
        raise MeasureError(f"the measurement did not finish within {timeout:g} s") from None
    if msg is None:
        raise MeasureError(f"the measuring process ended before it answered ({_exit_reason(exitcode)})")
    if not msg.get("ok"):
        raise MeasureError(msg.get("error") or "the measurement failed")
    return msg["result"]


def _job(request: dict) -> bytes:
    """Runs in the child's worker (the supervisor sends the bytes back)."""
    try:
        os.chdir(request["cwd"])
        from memdesigner.io.design_file import design_from_dict
        from memdesigner.measure.torch_measure import measure_design

        res = measure_design(design_from_dict(request["design"], "the design"), request["settings"])
        # the harness's raw record holds torch objects (dtypes): unpickling it would import torch
        # into the caller, which is what running here avoids
        res.pop("record", None)
        return pickle.dumps({"ok": True, "result": res}, protocol=4)
    except BaseException as err:  # noqa: BLE001 - one line back to the window, whatever happened
        return pickle.dumps({"ok": False, "error": f"{type(err).__name__}: {first_line(err)}"}, protocol=4)


__all__ = ["MeasureError", "measure_isolated", "torch_available"]

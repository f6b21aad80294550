"""The window's long jobs on the background-work mechanism (worker.py): import a model and
measure with PyTorch, each with a progress dialog and Cancel; a cancelled job leaves the
document as it was. Failures are one line in a message box."""

from __future__ import annotations

import inspect

from PySide6.QtWidgets import QMessageBox

from memdesigner._qt import hooks
from memdesigner._qt.scheduling import worker
from memdesigner.text import first_line
from memdesigner.units import format_bytes

DEVICE_NAMES = {"cpu": "CPU", "cuda": "CUDA"}


def _takes_cancel(fn) -> bool:
    try:
        return len(inspect.signature(fn).parameters) >= 1
    except (TypeError, ValueError):
        return False


def error_line(err) -> str:
    """One line for a failed import or measurement, in the window's words."""
    from memdesigner.importers.torch_fx import NeedsInputShape

    if isinstance(err, NeedsInputShape):
        return f"{first_line(err.what)}: enter an input shape"
    from memdesigner.measure.isolated import MeasureError

    text = first_line(err)
    if not isinstance(err, (ValueError, MeasureError, hooks.MissingFeature)):  # ours say what failed already
        text = f"{type(err).__name__}: {text}"
    if text.endswith("pass --input-shape"):  # an importer's command-line hint (ONNX): the window's words
        text = text[: -len("pass --input-shape")] + "enter an input shape"
    if "indices" in text and ("Long" in text or "int64" in text.lower()):
        text += " (the input looks like token ids: choose int64 as the input dtype)"
    return text


def start_import(window, fn, what: str) -> worker.Task:
    """``fn()`` or ``fn(cancel_event)`` -> Design, on the worker; the design replaces the
    window's when it arrives (laid out), unless the user cancelled."""
    job = fn if _takes_cancel(fn) else (lambda _cancel: fn())

    def failed(err):
        window.busy_label.setText("")  # before the message box, which waits for the user
        window.statusBar().showMessage(f"{what} import failed: {first_line(err, 160)}", 12000)
        if isinstance(err, hooks.MissingFeature):
            QMessageBox.information(window, f"{what} import unavailable", first_line(err))
        else:
            QMessageBox.warning(window, f"{what} import failed", error_line(err))

    task = worker.run(window, job, title=f"Import {what} model", label=f"Importing the {what} model…",
                      on_result=lambda d: imported(window, d), on_error=failed)
    window.busy_label.setText(f"importing the {what} model…")
    task.ended.connect(lambda: window.busy_label.setText(""))
    task.cancelled.connect(lambda: window.statusBar().showMessage(f"{what} import cancelled", 6000))
    window._import_worker = task
    return task


def imported(window, design) -> None:
    """Show an imported design, laid out afresh whatever positions the importer gave (a deep
    model used to open as one overlapping column), with its importer's warnings."""
    window.set_design(design, None, layout="always", unsaved=True)  # dirty until saved
    window._settings_dirty = True
    window._update_title()
    warnings = getattr(design, "import_warnings", None) or []
    if warnings:
        window.statusBar().showMessage(f"Imported with {len(warnings)} warning(s): {first_line(warnings[0], 160)}",
                                       12000)


def start_measure(window) -> worker.Task:
    from memdesigner._qt.jobs.estimator import snapshot

    design, settings = snapshot(window.design), window.settings_bar.settings()

    def failed(err):
        QMessageBox.information(window, "Measure with PyTorch", first_line(err)
                                if isinstance(err, hooks.MissingFeature) else f"Measuring failed: {error_line(err)}")

    task = worker.run(window, lambda cancel: hooks.measure(design, settings, cancel=cancel),
                      title="Measure with PyTorch",
                      label=f"Running one {settings.mode} step with PyTorch (batch {settings.batch})…",
                      on_result=lambda res: measured(window, res), on_error=failed)
    window.busy_label.setText("measuring with PyTorch…")
    task.ended.connect(lambda: window.busy_label.setText(""))
    task.cancelled.connect(lambda: window.statusBar().showMessage("Measurement cancelled", 6000))
    window._measure_worker = task
    return task


def measured(window, result: dict) -> None:
    from memdesigner._qt.memory import snapshot_view

    window.show_measured(result)
    snapshot_view.show_measured(window, result)
    on = DEVICE_NAMES.get(result.get("device"), result.get("device") or "?")
    if result.get("peak_bytes"):
        window.statusBar().showMessage(f"Measured peak {format_bytes(result['peak_bytes'], 2)} on {on}", 12000)

"""File -> Import PyTorch and Tools -> Measure with PyTorch, end to end (needs torch)."""

import pytest

from memdesigner._qt import hooks

torch = pytest.importorskip("torch")

MODEL = '''
import torch.nn as nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))

    def forward(self, x):
        return self.body(x)
'''


def test_import_pytorch_then_measure(window, qtbot, tmp_path):
    path = tmp_path / "small.py"
    path.write_text(MODEL)
    window._import(lambda: hooks.import_torch(str(path), input_shape=(3, 8, 8)), "PyTorch")
    qtbot.waitUntil(lambda: window.result is not None and window.result.report is not None
                    and window.result.report.params > 0, timeout=60000)
    assert {n.type for n in window.design.nodes.values()} >= {"Conv2d", "ReLU", "Flatten", "Linear"}
    estimated = window.result.report.peak_bytes
    assert window.result.report.params == 3 * 8 * 9 + 8 + 8 * 8 * 8 * 10 + 10
    task = window.measure()
    assert task.dialog is not None and "with PyTorch" in task.dialog.labelText()  # progress, with Cancel
    qtbot.waitUntil(lambda: window.measured is not None, timeout=60000)
    measured = window.measured["peak_bytes"]
    assert measured > 0
    assert abs(measured - estimated) <= 0.01 * measured  # the overlay agrees with the estimate
    assert "measured with PyTorch on CPU" in window.legend.text()
    assert window.statusBar().currentMessage().endswith("on CPU")


def test_measured_curve_sits_on_the_estimates_phases(window, qtbot):
    """Training: the measured backward is drawn over the estimated backward's ops (it used to
    be the whole run stretched over the op axis, so the phases did not line up)."""
    import numpy as np
    from gui_helpers import load, small_cnn

    from memdesigner.snapshot.align import phase_runs

    load(window, qtbot, small_cnn())
    with qtbot.waitSignal(window.result_applied, timeout=10000):
        window.settings_bar.apply_dict({"mode": "train", "optimizer": "adam", "batch": 2})
    window.measure()
    qtbot.waitUntil(lambda: window.measured is not None, timeout=90000)
    m = window.measured
    assert len(m["timeline_phases"]) == len(m["timeline"]) > 0
    runs = {ph: (a, b) for ph, a, b in phase_runs([e.phase for e in window.timeline.events])}
    x, _ = window.timeline._measured_curve.getData()
    phases = [p for p in m["timeline_phases"] if p in runs]
    assert len(x) == len(phases)
    for ph in ("forward", "backward", "optimizer_step"):
        a, b = runs[ph]
        xs = np.asarray([xi for xi, p in zip(x, phases) if p == ph])
        assert len(xs) and xs.min() > a and xs.max() <= b, ph
    # op by op: what a layer's module did sits on that layer's ops (conv, relu, fc, both ways)
    ops = {}
    for i, e in enumerate(window.timeline.events):
        ops.setdefault((e.phase, e.node), []).append(i)
    tags = [t for t, p in zip(m["timeline_layers"], m["timeline_phases"]) if p in runs]
    seen = set()
    for xi, p, t in zip(x, phases, tags):
        if t and t[0] == p:
            (node,) = t[1]
            assert min(ops[(p, node)]) < xi <= max(ops[(p, node)]) + 1, (p, node, xi)
            seen.add((p, node))
    assert {(p, n) for p in ("forward", "backward") for n in ("conv", "relu", "fc")} <= seen


def test_cancel_a_measurement_leaves_the_timeline_alone(window, qtbot):
    import multiprocessing

    from gui_helpers import load, small_cnn
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QPushButton

    load(window, qtbot, small_cnn())
    with qtbot.waitSignal(window.result_applied, timeout=10000):  # a step long enough to cancel
        window.settings_bar.apply_dict({"mode": "train", "optimizer": "adam", "batch": 2048})
    task = window.measure()
    qtbot.waitUntil(lambda: task.dialog is not None and task.dialog.isVisible(), timeout=5000)
    qtbot.mouseClick(task.dialog.findChild(QPushButton), Qt.LeftButton)
    assert task.outcome == "cancelled"
    qtbot.waitUntil(lambda: not any(p.name == "memdesigner-measure" for p in multiprocessing.active_children()),
                    timeout=10000)
    qtbot.wait(300)
    assert window.measured is None


HOSTILE = """
import sys


def leave():
    sys.exit(0)


def spin():
    while True:
        pass
"""


def test_a_model_file_that_exits_or_loops_leaves_the_window_alone(window, qtbot, tmp_path, monkeypatch):
    """sys.exit in the file used to close the window without a save prompt, and an endless loop
    froze it: the file now runs in a child process, off the UI thread."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QMessageBox

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: shown.append(a[2])))
    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE)
    before = dict(window.design.nodes)
    window._import(lambda: hooks.import_torch(f"{path}:leave"), "PyTorch")
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=60000)
    assert "sys.exit(0)" in shown[0]

    ticks = []  # len(shown) at each tick of a UI-thread timer
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(len(shown)))
    timer.start(20)
    window._import(lambda: hooks.import_torch(f"{path}:spin", timeout=2), "PyTorch")
    qtbot.waitUntil(lambda: len(shown) == 2, timeout=60000)
    timer.stop()
    assert "did not finish within 2 s" in shown[1]
    assert 1 in ticks  # the UI thread ran while the endless loop did
    assert window.design.nodes == before


TOKENS = '''
import torch.nn as nn


class Tok(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.fc = nn.Linear(16, 100)

    def forward(self, x):
        return self.fc(self.emb(x))


def no_shape():
    return Tok()
'''


def _answer(factory="", shape="", dtype="auto"):
    def fill(dlg):
        dlg.factory.setText(factory)
        dlg.shape.setText(shape)
        dlg.dtype.setCurrentIndex(dlg.dtype.findData(dtype))
        return True

    return fill


def test_a_token_model_imports_with_int64_ids_detected(window, qtbot, tmp_path):
    """The dialog offers the input dtype; "automatic" sees the input go into an Embedding and
    traces on int64 ids (a float trace failed inside F.embedding with a raw error)."""
    path = tmp_path / "tok.py"
    path.write_text(TOKENS)
    window.import_torch(str(path), _answer("Tok", "12"))
    qtbot.waitUntil(lambda: "emb" in window.design.nodes and window.result is not None
                    and window.result.report is not None and window.result.report.params > 0, timeout=60000)
    x = next(n for n in window.design.nodes.values() if n.type == "Input")
    assert x.props["dtype"] == "int64" and tuple(x.props["shape"]) == (12,)
    assert window.result.report.params == 100 * 16 + 16 * 100 + 100


def test_float_ids_fail_in_one_line_that_points_at_the_dtype(window, qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: shown.append(a[2])))
    path = tmp_path / "tok.py"
    path.write_text(TOKENS)
    window.import_torch(str(path), _answer("Tok", "12", "float"))
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=60000)
    assert "\n" not in shown[0] and "\\n" not in shown[0]
    assert "choose int64 as the input dtype" in shown[0]


def test_no_input_shape_is_asked_for_in_the_windows_words(window, qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: shown.append(a[2])))
    path = tmp_path / "tok.py"
    path.write_text(TOKENS)
    window.import_torch(str(path), _answer("no_shape", ""))
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=60000)
    assert shown[0].endswith("the factory returned no input shape: enter an input shape")
    assert "--input-shape" not in shown[0]


def test_reimporting_a_changed_file_uses_the_new_code(window, qtbot, tmp_path):
    """An edit that keeps the file's size and lands within the same second (the mtime is put
    back here) used to import the cached bytecode of the old code."""
    import os

    path = tmp_path / "tok.py"
    path.write_text(TOKENS)
    window.import_torch(str(path), _answer("Tok", "12"))
    qtbot.waitUntil(lambda: window.result is not None and window.result.report is not None
                    and window.result.report.params == 3300, timeout=60000)
    import importlib.util
    import py_compile

    # the bytecode Python caches for the old source (this test machine sets PYTHONDONTWRITEBYTECODE)
    py_compile.compile(str(path), cfile=importlib.util.cache_from_source(str(path)), doraise=True)
    st = os.stat(path)
    path.write_text(TOKENS.replace("nn.Linear(16, 100)", "nn.Linear(16, 900)"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size
    window.stack.setClean()
    window._settings_dirty = False
    window.import_torch(str(path), _answer("Tok", "12"))
    qtbot.waitUntil(lambda: window.result is not None and window.result.report is not None
                    and window.result.report.params == 100 * 16 + 16 * 900 + 900, timeout=60000)


def test_cancel_an_import_kills_it_and_leaves_the_document(window, qtbot, tmp_path):
    """The import runs on the worker with a progress dialog; Cancel ends the child at once
    (long before its 300 s limit) and the document stays as it was."""
    import multiprocessing

    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE)
    before = dict(window.design.nodes)
    task = window._import(lambda cancel: hooks.import_torch(f"{path}:spin", cancel=cancel), "PyTorch")
    assert task.dialog is not None and task.dialog.labelText().startswith("Importing the PyTorch model…\n")
    qtbot.waitUntil(lambda: any(p.name == "memdesigner-torch-import" for p in multiprocessing.active_children()),
                    timeout=30000)
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QPushButton

    qtbot.waitUntil(lambda: task.dialog.isVisible(), timeout=5000)
    qtbot.mouseClick(task.dialog.findChild(QPushButton), Qt.LeftButton)  # the dialog's Cancel button
    assert task.outcome == "cancelled" and task.dialog is None
    qtbot.waitUntil(lambda: not any(p.name == "memdesigner-torch-import" for p in multiprocessing.active_children()),
                    timeout=10000)
    assert window.design.nodes == before
    assert "cancelled" in window.statusBar().currentMessage()


def test_the_dialog_remembers_each_files_factory_shape_and_dtype(window, qtbot, tmp_path, monkeypatch):
    """Typed into the dialog once (real keys), offered again the next time the same file is
    imported; the design is named after the model's class; a failed import leaves no
    'importing…' behind and says so in the status bar."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMessageBox

    path = tmp_path / "tok.py"
    path.write_text(TOKENS)

    def typed(dlg):
        for field, text in ((dlg.factory, "no_shape"), (dlg.shape, "12")):
            field.setFocus()
            qtbot.keyClicks(field, text)
        dlg.dtype.setFocus()
        qtbot.keyClick(dlg.dtype, Qt.Key_End)  # int64
        return True

    window.import_torch(str(path), typed)
    qtbot.waitUntil(lambda: window.result is not None and window.result.report is not None
                    and window.result.report.params == 3300, timeout=60000)
    assert window.design.name == "Tok"  # the class no_shape() builds, not "no_shape"
    seen = {}

    def look(dlg):
        seen.update(factory=dlg.factory.text(), shape=dlg.shape.text(), dtype=dlg.dtype.currentData())
        return False

    window.stack.setClean()
    window._settings_dirty = False
    window.import_torch(str(path), look)
    assert seen == {"factory": "no_shape", "shape": "12", "dtype": "int64"}
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: shown.append(a[2])))
    window.import_torch(str(path), _answer("nope", "12"))
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=60000)
    assert window.busy_label.text() == "" and "import failed" in window.statusBar().currentMessage()

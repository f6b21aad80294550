"""The window's commands as QActions, defined apart from the widgets: one table of what each
command is called, its standard shortcut (QKeySequence.StandardKey where the platform has one,
so macOS, KDE and Windows users get theirs), its tip and the window method it runs. The menus and
toolbars add these actions; nothing else creates them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence

K = QKeySequence.StandardKey


@dataclass(frozen=True)
class Spec:
    attr: str  # the window attribute the action is kept in (act_*)
    text: str
    run: Callable  # run(window)
    shortcut: object = None  # a StandardKey, a list of them / strings, or a string
    tip: str = ""
    on_view: bool = False  # single keys (F, Del) must not fire while typing in a field


def _m(name: str) -> Callable:
    return lambda w: getattr(w, name)()


SPECS = (
    Spec("act_new", "&New", _m("new_design"), K.New),
    Spec("act_open", "&Open…", _m("open_dialog"), K.Open),
    Spec("act_save", "&Save", _m("save"), K.Save),
    Spec("act_save_as", "Save &As…", _m("save_as"), K.SaveAs),
    Spec("act_quit", "&Quit", _m("close"), K.Quit),
    Spec("act_cut", "Cu&t", _m("cut"), K.Cut, on_view=True),
    Spec("act_copy", "&Copy", _m("copy"), K.Copy, on_view=True),
    Spec("act_paste", "&Paste", _m("paste"), K.Paste, on_view=True),
    Spec("act_dup", "&Duplicate", _m("duplicate"), "Ctrl+D", on_view=True),
    Spec("act_delete", "De&lete", _m("delete_selection"), [K.Delete, "Backspace"], on_view=True),
    Spec("act_select_all", "Select &All", _m("select_all"), K.SelectAll, on_view=True),
    Spec("act_fit", "&Fit to View", lambda w: w.view.fit_all(), "F", "Show the whole design", on_view=True),
    Spec("act_zoom_in", "Zoom &In", lambda w: w.view.zoom_by(1.25), K.ZoomIn),
    Spec("act_zoom_out", "Zoom &Out", lambda w: w.view.zoom_by(0.8), K.ZoomOut),
    Spec("act_layout", "Auto &Layout", _m("auto_layout"), "L", "Arrange layers in columns", on_view=True),
    Spec("act_measure", "&Measure with PyTorch…", _m("measure"),
         tip="Run the design with PyTorch and overlay the measured memory on the timeline"),
    Spec("act_reload_devices", "Reload &Device Profiles", lambda w: w.settings_bar.reload_devices()),
    Spec("act_explain", "&Explain the Peak…", _m("explain_peak"), "Ctrl+E",
         "List every tensor alive at the peak, with its layer and the rule that keeps it"),
    Spec("act_make_fit", "Make It &Fit…", _m("make_it_fit"), "Ctrl+Shift+M",
         "The ranked changes that bring the design under the device's memory"),
    Spec("act_export_png", "Canvas as &PNG…", lambda w: w.export("canvas_png")),
    Spec("act_export_svg", "Canvas as &SVG…", lambda w: w.export("canvas_svg")),
    Spec("act_export_timeline", "&Timeline as PNG…", lambda w: w.export("timeline_png")),
    Spec("act_export_csv", "Layer &Table as CSV…", lambda w: w.export("table_csv")),
    Spec("act_export_torch", "&PyTorch Code (.py)…", lambda w: w.export("torch_py"),
         tip="A runnable nn.Module of the design (as memdesigner export torch writes it)"),
    Spec("act_export_report", "&Report (HTML or Markdown)…", lambda w: w.export_report(),
         tip="One file to attach to a ticket: network, verdict per device, timeline, layers"),
    Spec("act_open_snapshot", "Open Memory &Snapshot…", lambda w: _snapshot_view().open_dialog(w),
         tip="Draw a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) beside the estimate"),
    Spec("act_clear_snapshot", "Clear Memory Snapshot",
         lambda w: _snapshot_view().clear(w.timeline, w.legend, w.act_clear_snapshot)),
    Spec("act_import_torch", "&PyTorch Model (.py)…", _m("import_torch")),
    Spec("act_import_keras", "&Keras Model (JSON)…", _m("import_keras")),
    Spec("act_import_onnx", "&ONNX Model…", _m("import_onnx")),
    Spec("act_import_hf", "&Hugging Face Config…", _m("import_hf")),
)


def _snapshot_view():
    from memdesigner._qt.memory import snapshot_view

    return snapshot_view


def _keys(shortcut) -> list[QKeySequence]:
    if shortcut is None:
        return []
    items = shortcut if isinstance(shortcut, (list, tuple)) else [shortcut]
    out: list[QKeySequence] = []
    for s in items:
        if isinstance(s, K):
            out.extend(QKeySequence.keyBindings(s) or [])
        else:
            out.append(QKeySequence(s))
    return out


def make(win, text: str, run: Callable, shortcut=None, tip: str = "", on_view: bool = False) -> QAction:
    """One action on ``win``; ``run`` takes no argument (the window's own helper passes slots)."""
    a = QAction(text, win)
    keys = _keys(shortcut)
    if keys:
        a.setShortcuts(keys)
    if tip:
        a.setStatusTip(tip)
        a.setToolTip(tip)
    a.triggered.connect(lambda _=False: run())
    if on_view:
        a.setShortcutContext(Qt.WidgetWithChildrenShortcut)
        win.view.addAction(a)
    return a


def build(win) -> None:
    """Create every action of SPECS on ``win`` (as win.act_*), and undo / redo from its stack."""
    for s in SPECS:
        setattr(win, s.attr, make(win, s.text, lambda s=s: s.run(win), s.shortcut, s.tip, s.on_view))
    win.act_undo = win.stack.createUndoAction(win, "&Undo")
    win.act_undo.setShortcuts(_keys(K.Undo))
    win.act_redo = win.stack.createRedoAction(win, "&Redo")
    win.act_redo.setShortcuts(_keys(K.Redo))
    win.act_clear_snapshot.setEnabled(False)
    from memdesigner._qt.dialogs import exports

    if not exports.svg_available():
        win.act_export_svg.setEnabled(False)
        win.act_export_svg.setText("Canvas as SVG (needs QtSvg, not in this PySide6)")

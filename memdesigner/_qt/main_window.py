"""The designer window: palette | canvas | inspector, run settings on top, the memory view at the
bottom. It wires widgets together; memory numbers come only from the engine (via the estimator)."""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

from PySide6.QtCore import QPointF, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence, QUndoStack
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QSizePolicy,
    QSplitter,
    QStyle,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from memdesigner._qt import block_nav, exports, graph_ops, hooks, recovery, snapshot_view
from memdesigner._qt.commands import AddNodeCmd, MoveNodesCmd
from memdesigner._qt.estimator import EstimateService
from memdesigner._qt.inspector import Inspector
from memdesigner._qt.layer_table import LayerTable
from memdesigner._qt.layout import layered_positions, needs_layout
from memdesigner._qt.palette import PaletteWidget
from memdesigner._qt.rank_picker import RankPicker
from memdesigner._qt.scene import GraphScene
from memdesigner._qt.settings_bar import SettingsBar
from memdesigner._qt.summary import SummaryPanel
from memdesigner._qt.timeline import BatchPlot, TimelinePlot
from memdesigner._qt.view import GraphView
from memdesigner.io.design_file import DesignFileError, load_design, save_design
from memdesigner.model.design import Design
from memdesigner.units import format_bytes

MAX_RECENT = 10
AUTOSAVE_MS = 5000


class MainWindow(QMainWindow):
    result_applied = Signal(int)  # generation shown (tests and the latency benchmark wait on it)

    def __init__(self, headless: bool = False):
        super().__init__()
        self.headless = headless
        self.split_paint = not headless  # show results in two event-loop turns (see apply_result)
        self.path: str | None = None
        self.design = Design()
        self.measured: dict | None = None
        self.result = None
        self.sweep = None
        self._settings_dirty = False
        self._autosaved_index = None
        self.stack = QUndoStack(self)
        self._build_widgets()
        self._build_actions()
        self._build_menus()
        self.service = EstimateService(self._estimate_inputs, self)
        self.service.result_ready.connect(self.apply_result)
        self.service.sweep_ready.connect(self._apply_sweep)
        self.service.busy_changed.connect(self._busy)
        self.stack.cleanChanged.connect(self._update_title)
        self.stack.indexChanged.connect(self._update_title)
        self.set_design(Design(), None)
        if not headless:
            self._restore_state()
            self.autosave_timer = QTimer(self)
            self.autosave_timer.setInterval(AUTOSAVE_MS)
            self.autosave_timer.timeout.connect(self.autosave)
            self.autosave_timer.start()
        from memdesigner._qt.window_fit import place

        place(self, None if headless else QSettings().value("window/geometry"), headless=headless)

    # -- construction ------------------------------------------------------------------------
    def _build_widgets(self):
        self.scene = GraphScene(self.stack, self)
        self.view = GraphView(self.scene)
        self.setCentralWidget(self.view)
        from memdesigner._qt.canvas_keys import CanvasKeys

        self.canvas_keys = CanvasKeys(self.view, self.scene, self.stack, lambda: self.scene.design)
        self.palette = PaletteWidget()
        self.inspector = Inspector(self.stack)
        self.settings_bar = SettingsBar()
        self.timeline = TimelinePlot()
        self.batch_plot = BatchPlot()
        self.summary = SummaryPanel()
        self.table = LayerTable()

        self.palette_dock = self._dock("Layers", self.palette, Qt.LeftDockWidgetArea, "palette")
        self.inspector_dock = self._dock("Inspector", self.inspector, Qt.RightDockWidgetArea, "inspector")
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.legend = QLabel()
        self.legend.setContentsMargins(8, 4, 8, 0)
        self.legend.setWordWrap(True)
        self.legend.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        tl = QWidget()
        tl_lay = QVBoxLayout(tl)
        tl_lay.setContentsMargins(0, 0, 0, 0)
        tl_lay.setSpacing(0)
        tl_lay.addWidget(self.legend)
        self.rank_picker = RankPicker(self.timeline)  # per-rank timelines (pipeline / tensor / data parallel)
        tl_lay.addWidget(self.rank_picker)
        tl_lay.addWidget(self.timeline, 1)
        self.tabs.addTab(tl, "Memory timeline")
        self.tabs.addTab(self.batch_plot, "Peak vs batch")
        self.tabs.addTab(self.table, "Layers")
        bottom = QSplitter(Qt.Horizontal)
        bottom.addWidget(self.summary)
        bottom.addWidget(self.tabs)
        bottom.setStretchFactor(1, 1)
        bottom.setSizes([330, 1100])
        self.memory_dock = self._dock("Memory", bottom, Qt.BottomDockWidgetArea, "memory")
        self.resizeDocks([self.memory_dock], [330], Qt.Vertical)
        self.resizeDocks([self.palette_dock, self.inspector_dock], [210, 300], Qt.Horizontal)

        self.settings_toolbar = QToolBar("Run settings")
        self.settings_toolbar.setObjectName("run-settings")
        self.settings_toolbar.setMovable(False)
        self.settings_toolbar.addWidget(self.settings_bar)

        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setFixedWidth(90)
        self.busy.setMaximumHeight(12)
        self.busy.setTextVisible(False)
        self.busy.setToolTip("Estimating…")
        self.busy.hide()
        self.busy_label = QLabel("")
        self.statusBar().addPermanentWidget(self.busy_label)
        self.statusBar().addPermanentWidget(self.busy)
        self.statusBar().addPermanentWidget(self.settings_bar.device_warning)

        self.palette.activated.connect(self.add_layer_at_center)
        self.view.layer_dropped.connect(self.add_layer)
        self.scene.selectionChanged.connect(self._selection_changed)
        self.scene.message.connect(lambda m: self.statusBar().showMessage(m, 6000))
        self.inspector.message.connect(lambda m: self.statusBar().showMessage(m, 6000))
        self.timeline.node_clicked.connect(lambda nid: self.select_node(nid, center=True))
        self.table.node_clicked.connect(lambda nid: self.select_node(nid, center=True))
        self.settings_bar.changed.connect(self._settings_changed)

    def _dock(self, title, widget, area, name) -> QDockWidget:
        d = QDockWidget(title, self)
        d.setObjectName(name)
        d.setWidget(widget)
        d.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetFloatable | QDockWidget.DockWidgetClosable)
        self.addDockWidget(area, d)
        return d

    def _action(self, text, slot, shortcut=None, tip="", on_view=False) -> QAction:
        a = QAction(text, self)
        if shortcut:
            a.setShortcut(QKeySequence(shortcut))
        if tip:
            a.setStatusTip(tip)
            a.setToolTip(tip)
        a.triggered.connect(lambda _=False: slot())
        if on_view:  # single keys (F, Del) must not fire while typing in a field
            a.setShortcutContext(Qt.WidgetWithChildrenShortcut)
            self.view.addAction(a)
        return a

    def _build_actions(self):
        A = self._action
        self.act_new = A("&New", self.new_design, QKeySequence.New)
        self.act_open = A("&Open…", self.open_dialog, QKeySequence.Open)
        self.act_save = A("&Save", self.save, QKeySequence.Save)
        self.act_save_as = A("Save &As…", self.save_as, QKeySequence.SaveAs)
        self.act_quit = A("&Quit", self.close, QKeySequence.Quit)
        self.act_undo = self.stack.createUndoAction(self, "&Undo")
        self.act_undo.setShortcut(QKeySequence.Undo)
        self.act_redo = self.stack.createRedoAction(self, "&Redo")
        self.act_redo.setShortcut(QKeySequence.Redo)
        self.act_cut = A("Cu&t", self.cut, QKeySequence.Cut, on_view=True)
        self.act_copy = A("&Copy", self.copy, QKeySequence.Copy, on_view=True)
        self.act_paste = A("&Paste", self.paste, QKeySequence.Paste, on_view=True)
        self.act_dup = A("&Duplicate", self.duplicate, "Ctrl+D", on_view=True)
        self.act_delete = A("De&lete", self.delete_selection, QKeySequence.Delete, on_view=True)
        self.act_delete.setShortcuts([QKeySequence.Delete, QKeySequence("Backspace")])
        self.act_select_all = A("Select &All", self.select_all, QKeySequence.SelectAll, on_view=True)
        self.act_fit = A("&Fit to View", self.view.fit_all, "F", "Show the whole design", on_view=True)
        self.act_zoom_in = A("Zoom &In", lambda: self.view.zoom_by(1.25), QKeySequence.ZoomIn)
        self.act_zoom_out = A("Zoom &Out", lambda: self.view.zoom_by(0.8), QKeySequence.ZoomOut)
        self.act_layout = A("Auto &Layout", self.auto_layout, "L", "Arrange layers in columns", on_view=True)
        self.act_measure = A("&Measure with PyTorch…", self.measure, tip="Run the design with PyTorch and overlay "
                             "the measured memory on the timeline")
        self.act_reload_devices = A("Reload &Device Profiles", self.settings_bar.reload_devices)
        self.act_explain = A("&Explain the Peak…", self.explain_peak, "Ctrl+E",
                             "List every tensor alive at the peak, with its layer and the rule that keeps it")
        self.act_make_fit = A("Make It &Fit…", self.make_it_fit, "Ctrl+Shift+M",
                              "The ranked changes that bring the design under the device's memory")
        self.act_export_png = A("Canvas as &PNG…", lambda: self.export("canvas_png"))
        self.act_export_svg = A("Canvas as &SVG…", lambda: self.export("canvas_svg"))
        if not exports.svg_available():
            self.act_export_svg.setEnabled(False)
            self.act_export_svg.setText("Canvas as SVG (needs QtSvg, not in this PySide6)")
        self.act_export_timeline = A("&Timeline as PNG…", lambda: self.export("timeline_png"))
        self.act_export_csv = A("Layer &Table as CSV…", lambda: self.export("table_csv"))
        self.act_export_report = A("&Report (HTML or Markdown)…", lambda: self.export_report(),
                                   tip="One file to attach to a ticket: network, verdict per device, timeline, layers")
        self.act_open_snapshot = A("Open Memory &Snapshot…", lambda: snapshot_view.open_dialog(self),
                                   tip="Draw a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) beside the estimate")
        self.act_clear_snapshot = A("Clear Memory Snapshot", lambda: snapshot_view.clear(self))
        self.act_clear_snapshot.setEnabled(False)
        self.act_import_torch = A("&PyTorch Model (.py)…", self.import_torch)
        self.act_import_keras = A("&Keras Model (JSON)…", self.import_keras)
        self.act_import_onnx = A("&ONNX Model…", self.import_onnx)
        self.act_import_hf = A("&Hugging Face Config…", self.import_hf)

    def _build_menus(self):
        mb = self.menuBar()
        f = mb.addMenu("&File")
        f.addActions([self.act_new, self.act_open])
        self.recent_menu = f.addMenu("Open &Recent")
        self.examples_menu = f.addMenu("E&xamples")
        self.examples_menu.aboutToShow.connect(self._fill_examples)
        f.addActions([self.act_open_snapshot, self.act_clear_snapshot])
        imp = f.addMenu("&Import")
        imp.addActions([self.act_import_torch, self.act_import_keras, self.act_import_onnx, self.act_import_hf])
        f.addSeparator()
        f.addActions([self.act_save, self.act_save_as])
        exp = f.addMenu("&Export")
        exp.addActions([self.act_export_png, self.act_export_svg, self.act_export_timeline, self.act_export_csv])
        exp.addAction(self.act_export_report)
        f.addSeparator()
        f.addAction(self.act_quit)
        e = mb.addMenu("&Edit")
        e.addActions([self.act_undo, self.act_redo])
        e.addSeparator()
        e.addActions([self.act_cut, self.act_copy, self.act_paste, self.act_dup, self.act_delete,
                      self.act_select_all])
        v = mb.addMenu("&View")
        v.addActions([self.act_fit, self.act_zoom_in, self.act_zoom_out, self.act_layout])
        v.addSeparator()
        for d in (self.palette_dock, self.inspector_dock, self.memory_dock):
            v.addAction(d.toggleViewAction())
        t = mb.addMenu("&Tools")
        t.addActions([self.act_explain, self.act_make_fit, self.act_measure, self.act_reload_devices])
        h = mb.addMenu("&Help")
        h.addAction(self._action("&Keyboard && Mouse", self._help))
        st = self.style()
        for act, std in ((self.act_new, QStyle.SP_FileIcon), (self.act_open, QStyle.SP_DialogOpenButton),
                         (self.act_save, QStyle.SP_DialogSaveButton), (self.act_undo, QStyle.SP_ArrowBack),
                         (self.act_redo, QStyle.SP_ArrowForward), (self.act_delete, QStyle.SP_TrashIcon),
                         (self.act_fit, QStyle.SP_TitleBarMaxButton), (self.act_layout, QStyle.SP_FileDialogListView)):
            act.setIcon(st.standardIcon(std))
        tb = QToolBar("Edit")
        tb.setObjectName("edit-toolbar")
        tb.setMovable(False)
        tb.setToolButtonStyle(Qt.ToolButtonIconOnly)
        tb.addActions([self.act_new, self.act_open, self.act_save])
        tb.addSeparator()
        tb.addActions([self.act_undo, self.act_redo, self.act_delete])
        tb.addSeparator()
        tb.addActions([self.act_fit, self.act_layout])
        self.addToolBar(Qt.TopToolBarArea, tb)
        self.blocks_nav = block_nav.install(self)  # group/ungroup/open blocks, breadcrumb (_qt/block_nav.py)
        e.addSeparator()
        e.addActions(self.blocks_nav.actions)
        self.addToolBar(Qt.TopToolBarArea, self.settings_toolbar)
        self._fill_recent()

    # -- design ------------------------------------------------------------------------------
    def set_design(self, design: Design, path: str | None, layout: bool | str = True):
        """layout: True lays out only when positions are missing or overlap; 'always' re-lays out."""
        if self.design is not None:
            self.design.unsubscribe(self._on_design_event)
        if layout == "always" or (layout and needs_layout(design)):
            for nid, pos in layered_positions(design).items():
                design.nodes[nid].pos = pos
        self.design = design
        self.blocks_nav.reset()
        self.path = path
        self.measured = None
        self.stack.clear()
        design.subscribe(self._on_design_event)
        self.scene.set_design(design)
        self.inspector.set_design(design)
        if design.settings:
            self.settings_bar.apply_dict(design.settings)
        self._settings_dirty = False
        self._autosaved_index = None
        self._update_title()
        QTimer.singleShot(0, self.view.fit_all)
        self.view.fit_all()
        self.service.schedule()

    def _on_design_event(self, event, payload):
        if event != "node_moved":
            self.service.schedule()

    def _estimate_inputs(self):
        return self.design, self.settings_bar.settings(), self.settings_bar.current_device()

    def _settings_changed(self):
        self.design.settings = self.settings_bar.to_dict()
        self._settings_dirty = True
        self._update_title()
        self.service.schedule()

    @property
    def dirty(self) -> bool:
        return not self.stack.isClean() or self._settings_dirty

    def _update_title(self, *_):
        name = Path(self.path).name if self.path else (self.design.name or "untitled")
        self.setWindowTitle(f"{name}[*] — memdesigner")
        self.setWindowModified(self.dirty)

    # -- estimate results --------------------------------------------------------------------
    def apply_result(self, res):
        """Show an estimate in two event-loop turns (canvas and summary, then timeline and table),
        so no single UI-thread slice is long enough to be felt as a stall on big designs."""
        self.result = res
        rep, an = res.report, res.analysis
        shown_an, shown_rep = self.blocks_nav.shown_result(an, rep)  # an opened block: its nodes' share
        self.scene.apply_result(shown_an, shown_rep)
        self.inspector.apply_analysis(shown_an)
        self.summary.set_report(rep, res.error)
        if self.sweep is not None and rep is not None:
            self.summary.set_max_batch(self.sweep)
        if res.error:
            self.statusBar().showMessage(f"Estimate failed: {res.error}", 10000)
        self.busy_label.setText(f"estimated in {res.seconds * 1000:.0f} ms")
        if not self.split_paint:
            self._apply_result_plots(res)
        else:
            QTimer.singleShot(0, lambda: self._apply_result_plots(res))

    def _apply_result_plots(self, res):
        if res is not self.result:
            return  # a newer estimate arrived in between
        rep = res.report
        self.rank_picker.show_report(rep, self.measured)
        self.legend.setText(self.timeline.legend_html())
        self.table.set_rows(rep.layers if rep is not None else [])
        ids = self.scene.selected_node_ids()
        self.timeline.highlight_node(ids[0] if len(ids) == 1 else None)
        self.result_applied.emit(res.gen)

    def _apply_sweep(self, sw):
        self.sweep = sw
        self.summary.set_max_batch(sw)
        self.batch_plot.set_sweep(sw, self.settings_bar.batch.value())

    def _busy(self, busy: bool):
        self.busy.setVisible(busy)
        if busy:
            self.busy_label.setText("estimating…")

    def estimate_now(self):
        """Synchronous estimate (headless render)."""
        self.service.run_sync()

    # -- selection ---------------------------------------------------------------------------
    def _selection_changed(self):
        ids = self.scene.selected_node_ids()
        self.inspector.show_selection(ids)
        one = ids[0] if len(ids) == 1 else None
        self.timeline.highlight_node(one)
        self.table.select_node(one)

    def select_node(self, nid: str, center: bool = False):
        self.scene.select_nodes([nid], center=center)

    def select_all(self):
        self.scene.select_nodes(list(self.design.nodes))

    # -- editing -----------------------------------------------------------------------------
    def add_layer(self, type_name: str, pos: QPointF) -> str:
        """Add a layer centred on a scene position (the drop point)."""
        from memdesigner._qt.node_item import WIDTH

        cmd = AddNodeCmd(self.scene.design, type_name, None, (pos.x() - WIDTH / 2, pos.y() - 30))
        self.stack.push(cmd)
        self.select_node(cmd.node.id)
        self.view.setFocus()
        return cmd.node.id

    def add_layer_at_center(self, type_name: str) -> str:
        c = self.view.mapToScene(self.view.viewport().rect().center())
        ids = self.scene.selected_node_ids()
        nid = self.add_layer(type_name, c + QPointF(len(self.scene.design.nodes) % 5 * 12, 0))
        if len(ids) == 1 and self.scene.design.check_edge(ids[0], nid) is None:
            # added from the palette with one layer selected: chain it after that layer
            src = self.scene.nodes[ids[0]].pos()
            self.stack.push(MoveNodesCmd(self.scene.design, {nid: (self.scene.design.nodes[nid].pos, (src.x() + 270, src.y()))}))
            self.scene.try_connect(ids[0], nid)
        return nid

    def delete_selection(self):
        graph_ops.delete(self.scene.design, self.stack, self.scene.selected_node_ids(), self.scene.selected_edges())

    def copy(self):
        ids = self.scene.selected_node_ids()
        if ids:
            graph_ops.to_clipboard(graph_ops.copy_data(self.scene.design, ids))

    def cut(self):
        self.copy()
        self.delete_selection()

    def paste(self):
        data = graph_ops.from_clipboard()
        if data:
            self.scene.select_nodes(graph_ops.paste(self.scene.design, self.stack, data))

    def duplicate(self):
        ids = self.scene.selected_node_ids()
        if ids:
            new = graph_ops.paste(self.scene.design, self.stack, graph_ops.copy_data(self.scene.design, ids))
            self.scene.select_nodes(new)

    def auto_layout(self):
        pos = layered_positions(self.scene.design)
        moves = {nid: (self.scene.design.nodes[nid].pos, p) for nid, p in pos.items() if self.scene.design.nodes[nid].pos != p}
        if moves:
            self.stack.push(MoveNodesCmd(self.scene.design, moves, "Auto layout"))
        self.view.fit_all()

    # -- files -------------------------------------------------------------------------------
    def maybe_save(self) -> bool:
        """True when it is fine to drop the current design (saved, discarded, or unchanged)."""
        if not self.dirty or self.headless:
            return True
        r = QMessageBox.question(self, "Unsaved changes",
                                 f"Save changes to “{self.design.name or 'untitled'}” before closing it?",
                                 QMessageBox.Save | QMessageBox.Discard | QMessageBox.Cancel, QMessageBox.Save)
        if r == QMessageBox.Save:
            return self.save()
        return r == QMessageBox.Discard

    def new_design(self):
        if self.maybe_save():
            self.set_design(Design(), None)

    def open_dialog(self):
        if not self.maybe_save():
            return
        path, _ = QFileDialog.getOpenFileName(self, "Open design", self._last_dir(), "memdesigner designs (*.json)")
        if path:
            self.open_path(path)

    def open_path(self, path: str, remember: bool = True) -> bool:
        try:
            d = load_design(path)
        except DesignFileError as err:
            if self.headless:
                raise
            QMessageBox.warning(self, "Cannot open design", str(err))
            return False
        self.set_design(d, str(path))
        if remember:
            self._add_recent(str(path))
        self.statusBar().showMessage(f"Opened {path}", 4000)
        return True

    def save(self) -> bool:
        if not self.path:
            return self.save_as()
        return self.save_to(self.path)

    def save_as(self) -> bool:
        path, _ = QFileDialog.getSaveFileName(self, "Save design", self.path or str(Path(self._last_dir()) /
                                              f"{self.design.name or 'design'}.json"), "memdesigner designs (*.json)")
        if not path:
            return False
        if not path.endswith(".json"):
            path += ".json"
        return self.save_to(path)

    def save_to(self, path: str) -> bool:
        self.design.settings = self.settings_bar.to_dict()
        if self.design.name in ("", "untitled"):
            self.design.name = Path(path).stem
        try:
            save_design(self.design, path)
        except OSError as err:
            QMessageBox.warning(self, "Cannot save", f"{path}: {err}")
            return False
        self.path = str(path)
        self.stack.setClean()
        self._settings_dirty = False
        self._add_recent(self.path)
        self._update_title()
        self.statusBar().showMessage(f"Saved {path}", 4000)
        return True

    def _last_dir(self) -> str:
        if self.path:
            return str(Path(self.path).parent)
        return QSettings().value("last_dir", str(Path.home()))

    def _recent(self) -> list:
        v = QSettings().value("recent_files", [])
        return [v] if isinstance(v, str) else list(v or [])

    def _add_recent(self, path: str):
        if self.headless:
            return
        rec = [p for p in self._recent() if p != path]
        rec.insert(0, path)
        s = QSettings()
        s.setValue("recent_files", rec[:MAX_RECENT])
        s.setValue("last_dir", str(Path(path).parent))
        self._fill_recent()

    def _fill_recent(self):
        self.recent_menu.clear()
        rec = [p for p in self._recent() if Path(p).exists()] if not self.headless else []
        for p in rec:
            a = self.recent_menu.addAction(Path(p).name)
            a.setToolTip(p)
            a.triggered.connect(lambda _=False, p=p: self.maybe_save() and self.open_path(p))
        self.recent_menu.setEnabled(bool(rec))

    def _fill_examples(self):
        self.examples_menu.clear()
        try:
            folder = resources.files("memdesigner.resources").joinpath("examples")
            files = sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=lambda f: f.name)
        except (OSError, ModuleNotFoundError):
            files = []
        for f in files:
            a = self.examples_menu.addAction(f.name[:-5].replace("_", " "))
            a.triggered.connect(lambda _=False, f=f: self.maybe_save() and self._open_example(f))
        if not files:
            self.examples_menu.addAction("(no examples installed)").setEnabled(False)

    def _open_example(self, f):
        with resources.as_file(f) as p:
            if self.open_path(str(p), remember=False):
                self.path = None  # an example is a template: Save asks where
                self._update_title()

    # -- import / export / measure -----------------------------------------------------------
    def import_torch(self):
        if not self.maybe_save():
            return
        path, _ = QFileDialog.getOpenFileName(self, "Import PyTorch model (runs the file's code)", self._last_dir(),
                                              "Python (*.py)")
        if not path:
            return
        cls, ok = QInputDialog.getText(self, "Import PyTorch model",
                                       "Importing RUNS this file's Python code (in a separate process): import "
                                       "only files you trust.\n\n"
                                       "Model class or factory function in the file (empty: the first nn.Module):")
        if not ok:
            return
        shape, ok = QInputDialog.getText(self, "Import PyTorch model", "Input shape per sample, e.g. 3, 224, 224 "
                                         "(empty: the model's default):")
        if not ok:
            return
        try:
            input_shape = tuple(int(x) for x in shape.replace("×", ",").replace("x", ",").split(",") if x.strip()) \
                or None
        except ValueError:
            QMessageBox.warning(self, "Import PyTorch model", f"{shape!r} is not a shape like 3, 224, 224")
            return
        spec = f"{path}:{cls.strip()}" if cls.strip() else path
        self._import(lambda: hooks.import_torch(spec, input_shape=input_shape), "PyTorch")

    def import_keras(self):
        if not self.maybe_save():
            return
        path, _ = QFileDialog.getOpenFileName(self, "Import Keras model", self._last_dir(), "Keras JSON (*.json)")
        if path:
            self._import(lambda: hooks.import_keras(path), "Keras")

    def import_onnx(self, path: str | None = None):
        if not self.maybe_save():
            return
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Import ONNX model", self._last_dir(), "ONNX (*.onnx)")
        if not path:
            return
        shape = None
        dims = hooks.onnx_dynamic_input(path)
        if dims:
            text, ok = QInputDialog.getText(self, "Import ONNX model", f"The model's input is {dims}. "
                                            "Input shape per sample, e.g. 3, 224, 224:")
            if not ok:
                return
            try:
                shape = tuple(int(x) for x in text.replace("×", ",").replace("x", ",").split(",") if x.strip())
            except ValueError:
                QMessageBox.warning(self, "Import ONNX model", f"{text!r} is not a shape like 3, 224, 224")
                return
        self._import(lambda: hooks.import_onnx(path, shape), "ONNX")

    def import_hf(self, path: str | None = None, seq_len: int | None = None, task: str | None = None):
        from memdesigner._qt.import_hf import ask_and_import

        return ask_and_import(self, path, seq_len, task)

    def _import(self, fn, what: str):
        """Off the UI thread (a model file may take minutes); the result lands in _imported."""
        from superqt.utils import create_worker

        worker = create_worker(fn, _ignore_errors=True)  # errors go to the dialog below, not re-raised
        worker.returned.connect(self._imported)
        worker.errored.connect(lambda err: QMessageBox.information(self, f"{what} import unavailable", str(err))
                               if isinstance(err, hooks.MissingFeature)
                               else QMessageBox.warning(self, f"{what} import failed", f"{type(err).__name__}: {err}"))
        worker.finished.connect(lambda: self.busy_label.setText(""))
        self.busy_label.setText(f"importing the {what} model…")
        worker.start()
        self._import_worker = worker
        return worker

    def _imported(self, d):
        self.set_design(d, None, layout=True)
        if not needs_layout(d):
            pass
        self._settings_dirty = True
        self._update_title()

    def export(self, kind: str, path: str | None = None) -> str | None:
        filters = {"canvas_png": ("PNG image (*.png)", ".png"), "canvas_svg": ("SVG image (*.svg)", ".svg"),
                   "timeline_png": ("PNG image (*.png)", ".png"), "table_csv": ("CSV table (*.csv)", ".csv")}
        flt, ext = filters[kind]
        if path is None:
            base = Path(self._last_dir()) / f"{self.design.name or 'design'}-{kind.split('_')[0]}{ext}"
            path, _ = QFileDialog.getSaveFileName(self, "Export", str(base), flt)
            if not path:
                return None
        try:
            if kind == "canvas_png":
                exports.canvas_png(self.scene, path)
            elif kind == "canvas_svg":
                exports.canvas_svg(self.scene, path, self.design.name)
            elif kind == "timeline_png":
                exports.widget_png(self.timeline, path)
            else:
                self.table.write_csv(path)
        except OSError as err:
            QMessageBox.warning(self, "Export failed", str(err))
            return None
        self.statusBar().showMessage(f"Exported {path}", 4000)
        return path

    def export_report(self, path: str | None = None) -> str | None:
        from memdesigner._qt.report_export import export_report_dialog

        return export_report_dialog(self, path)

    def explain_peak(self):
        """A non-modal table of what is alive at the peak (computed on demand: two quick runs)."""
        from memdesigner._qt.estimator import snapshot
        from memdesigner._qt.explain import ExplainDialog

        try:
            dlg = ExplainDialog(snapshot(self.design), self.settings_bar.settings(),
                                self.settings_bar.current_device(), self)
        except Exception as err:  # an invalid graph: the nodes already show why  # noqa: BLE001
            self.statusBar().showMessage(f"Cannot explain: {err}", 8000)
            return None
        dlg.node_clicked.connect(lambda nid: self.select_node(nid, center=True))
        dlg.setAttribute(Qt.WA_DeleteOnClose)
        dlg.show()
        self._explain_dialog = dlg
        return dlg

    def make_it_fit(self):
        """A non-modal list of the engine's ranked changes; Apply takes one into the settings."""
        from memdesigner._qt.estimator import snapshot
        from memdesigner._qt.fit_dialog import FitDialog

        dev = self.settings_bar.current_device()
        if dev is None:
            self.statusBar().showMessage("Make it fit needs a device: choose one in the settings bar", 8000)
            return None
        try:
            dlg = FitDialog(snapshot(self.design), self.settings_bar.settings(), dev, self)
        except ValueError as err:  # an invalid graph: the nodes already show why
            self.statusBar().showMessage(f"Cannot make it fit: {err}", 8000)
            return None
        dlg.applied.connect(self._apply_fit)
        dlg.setAttribute(Qt.WA_DeleteOnClose)
        dlg.show()
        self._fit_dialog = dlg
        return dlg

    def _apply_fit(self, settings: dict, design_change) -> None:
        if design_change:
            from memdesigner._qt.commands import SetPropCmd

            self.stack.push(SetPropCmd(self.design, design_change["node"], design_change["prop"],
                                       design_change["value"]))
        self.settings_bar.apply_dict(settings)
        self.statusBar().showMessage("Applied the suggestion", 4000)

    def measure(self):
        from superqt.utils import create_worker

        from memdesigner._qt.estimator import snapshot

        design, settings = snapshot(self.design), self.settings_bar.settings()
        worker = create_worker(hooks.measure, design, settings)
        worker.returned.connect(self._measured)
        worker.errored.connect(lambda err: QMessageBox.information(
            self, "Measure with PyTorch", str(err) if isinstance(err, hooks.MissingFeature)
            else f"Measuring failed: {type(err).__name__}: {err}"))
        worker.finished.connect(lambda: self.busy_label.setText(""))
        self.busy_label.setText("measuring with PyTorch…")
        worker.start()
        self._measure_worker = worker

    def _measured(self, result: dict):
        self.show_measured(result)
        snapshot_view.show_measured(self, result)

    def show_measured(self, result: dict | None):
        """Overlay a measured run (peak_bytes, timeline) on the timeline."""
        self.measured = result
        if self.result is not None and self.result.report is not None:
            self.timeline.set_report(self.result.report, result)
            self.legend.setText(self.timeline.legend_html())
        if result and result.get("peak_bytes"):
            self.statusBar().showMessage(f"Measured peak {format_bytes(result['peak_bytes'], 2)}", 10000)

    # -- autosave / recovery -----------------------------------------------------------------
    def autosave(self) -> bool:
        """Write the recovery file when something changed since the last one."""
        if self.headless or (not self.dirty and self._autosaved_index is None):
            return False
        key = (self.stack.index(), self._settings_dirty, len(self.design.nodes))
        if key == self._autosaved_index:
            return False
        try:
            recovery.write(self.design, self.path)
        except OSError:
            return False
        self._autosaved_index = key
        return True

    def offer_recovery(self, ask=None) -> bool:
        """After a crash: offer the newest autosave left behind. ``ask(rec) -> bool`` replaces the
        question box (tests)."""
        found = recovery.find()
        if not found:
            return False
        rec = found[0]
        if ask is None:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(rec.saved_at))
            r = QMessageBox.question(self, "Recover unsaved work?",
                                     f"memdesigner did not close properly. Recover “{rec.name}” from {when}?",
                                     QMessageBox.Yes | QMessageBox.No, QMessageBox.Yes)
            yes = r == QMessageBox.Yes
        else:
            yes = ask(rec)
        if not yes:
            for r in found:
                recovery.discard(r)
            return False
        try:
            d = recovery.load(rec)
        except (OSError, ValueError) as err:
            QMessageBox.warning(self, "Recovery failed", str(err))
            return False
        self.set_design(d, rec.source_path, layout=False)
        self._settings_dirty = True  # recovered work is unsaved work
        self._update_title()
        for r in found:
            recovery.discard(r)
        self.statusBar().showMessage("Recovered unsaved work", 6000)
        return True

    # -- window state ------------------------------------------------------------------------
    def _restore_state(self):
        s = QSettings()
        st = s.value("window/state")
        if st is not None:
            self.restoreState(st)
        last = s.value("run_settings")
        if isinstance(last, dict):
            self.settings_bar.apply_dict(last)
            self._settings_dirty = False
            self._update_title()

    def _save_state(self):
        s = QSettings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("run_settings", self.settings_bar.to_dict())

    def closeEvent(self, ev):
        if not self.maybe_save():
            ev.ignore()
            return
        if not self.headless:
            self._save_state()
            recovery.clear()
            self.autosave_timer.stop()
        self.service.shutdown()
        ev.accept()

    def _help(self):
        QMessageBox.information(self, "Keyboard & mouse", (
            "Drag a layer from the left onto the canvas (or double-click it).\n"
            "Drag from an output port (right) to an input port (left) to connect.\n"
            "Wheel: zoom · middle button or Space+drag: pan · drag on empty canvas: select\n"
            "F: fit to view · L: auto layout · Del: delete · Ctrl+C/V/D: copy/paste/duplicate\n"
            "Esc: deselect · arrow keys: nudge the selection (Shift: further)\n"
            "Timeline: wheel zooms, double-click or Home resets the zoom\n"
            "Ctrl+Z / Ctrl+Shift+Z: undo / redo\n"
            "Click the timeline or a table row to select that layer."))

"""The designer window: palette | canvas | inspector, run settings on top, the memory view at the
bottom. It wires widgets together; memory numbers come only from the engine (via the estimator)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from PySide6.QtCore import QPointF, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction
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

from memdesigner._qt import actions, context_menus, hooks
from memdesigner._qt.blocks import block_nav
from memdesigner._qt.canvas import canvas_tools, graph_ops
from memdesigner._qt.canvas.layout import needs_layout, positions
from memdesigner._qt.canvas.layout_runner import saved_style
from memdesigner._qt.canvas.scene import GraphScene
from memdesigner._qt.canvas.view import GraphView
from memdesigner._qt.dialogs import exports, start_view
from memdesigner._qt.document import recent
from memdesigner._qt.document.commands import AddNodeCmd, MoveNodesCmd
from memdesigner._qt.document.document import DesignDocument
from memdesigner._qt.inspector import Inspector
from memdesigner._qt.jobs import open_file
from memdesigner._qt.jobs.estimator import EstimateService
from memdesigner._qt.memory.layer_table import LayerTable
from memdesigner._qt.memory.rank_picker import RankPicker
from memdesigner._qt.memory.summary import SummaryPanel
from memdesigner._qt.memory.timeline import BatchPlot, TimelinePlot
from memdesigner._qt.palette import PaletteWidget
from memdesigner._qt.settings.settings_bar import SettingsBar
from memdesigner.document.run_settings import normalize
from memdesigner.model.design import Design

LAST_DEVICE = "device/last"  # QSettings key: the device a new window starts on


class MainWindow(QMainWindow):
    result_applied = Signal(int)  # generation shown (tests and the latency benchmark wait on it)

    def __init__(self, headless: bool = False):
        super().__init__()
        self.headless = headless
        self.split_paint = not headless  # show results in two event-loop turns (see apply_result)
        self.measured: dict | None = None
        self.result = None
        self.sweep = None
        # the document (design, path, undo stack, run settings, autosave, recent): _qt/document/document.py
        self.document = DesignDocument(self, autosave=not headless, remember=not headless)
        self.stack = self.document.stack
        self._build_widgets()
        self._build_actions()
        self._build_menus()
        from memdesigner._qt.jobs.presenter import ResultPresenter

        self.presenter = ResultPresenter(self)  # fans each report out to the views (_qt/jobs/presenter.py)
        self.service = EstimateService(self._estimate_inputs, self, columns=self.timeline.pixel_width,
                                       views_busy=self.presenter.views_busy)
        self.service.result_ready.connect(self.apply_result)
        self.service.sweep_ready.connect(self._apply_sweep)
        self.service.busy_changed.connect(self._busy)
        self.stack.cleanChanged.connect(self._update_title)
        self.stack.indexChanged.connect(self._update_title)
        from memdesigner._qt.scheduling import idle_gc

        self.idle_gc = idle_gc.install(self, self.scene, self.service, self.stack,  # full collections when idle
                                       lambda: getattr(self, "open_task", None))  # (_qt/scheduling/idle_gc.py)
        self.set_design(self._first_design(), None)
        if not headless:
            self._restore_state()
        from memdesigner._qt.window_fit import place

        place(self, None if headless else QSettings().value("window/geometry"), headless=headless)

    # -- construction ------------------------------------------------------------------------
    def _build_widgets(self):
        self.scene = GraphScene(self.stack, self)
        self.view = GraphView(self.scene)
        self.setCentralWidget(self.view)
        from memdesigner._qt.canvas.canvas_keys import CanvasKeys

        self.canvas_keys = CanvasKeys(self.view, self.scene, self.stack, lambda: self.scene.design)
        self.palette = PaletteWidget()
        self.inspector = Inspector(self.stack)
        self.settings_bar = SettingsBar()
        self.settings_bar.bind(self.document.settings, self.document.edit_settings)  # views the document's
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
        self.scene.building_changed.connect(self._building_message)
        self.inspector.message.connect(lambda m: self.statusBar().showMessage(m, 6000))
        self.document.problem.connect(lambda m: self.statusBar().showMessage(m, 8000))
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
        return actions.make(self, text, slot, shortcut, tip, on_view)

    def _build_actions(self):
        actions.build(self)  # every command's QAction, shortcut and tip: _qt/actions.py

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
        exp.addAction(self.act_export_torch)
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
                         (self.act_redo, QStyle.SP_ArrowForward), (self.act_delete, QStyle.SP_TrashIcon)):
            act.setIcon(st.standardIcon(std))
        from memdesigner._qt.icons import action_icon

        self.act_fit.setIcon(action_icon("fit"))  # drawn: say what they do, in the theme's ink
        self.act_layout.setIcon(action_icon("layout"))
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
        self.blocks_nav = block_nav.install(self)  # group/ungroup/open blocks, breadcrumb (_qt/blocks/block_nav.py)
        self.canvas_menus = context_menus.install(self)  # right-click menus (_qt/context_menus.py)
        self.start_view = start_view.install(self)  # while the design is empty (_qt/dialogs/start_view.py)
        canvas_tools.install(self, v)  # minimap, Ctrl+F, layout styles off the UI thread (_qt/canvas/canvas_tools.py)
        e.addSeparator()
        e.addActions(self.blocks_nav.actions)
        self.addToolBar(Qt.TopToolBarArea, self.settings_toolbar)
        self._fill_recent()

    # -- design ------------------------------------------------------------------------------
    @property
    def design(self) -> Design:
        return self.document.design

    @property
    def path(self) -> str | None:
        return self.document.path

    @path.setter
    def path(self, value: str | None):
        self.document.path = value

    def set_design(self, design: Design, path: str | None, layout: bool | str = True, unsaved: bool = False):
        """layout: True lays out only when positions are missing or overlap; 'always' re-lays out.
        unsaved: recovered or imported work (dirty until saved)."""
        self.design.unsubscribe(self._on_design_event)
        if layout == "always" or (layout and needs_layout(design)):
            for nid, pos in positions(design, saved_style()).items():
                design.nodes[nid].pos = pos
        self.document.replace(design, path, unsaved=unsaved)
        self.presenter.design_changed(getattr(design, "import_warnings", None))
        self.blocks_nav.reset()
        self.measured = None
        if self.timeline.snapshot is not None:  # another design's run: the snapshot was of this one's
            from memdesigner._qt.memory import snapshot_view

            snapshot_view.clear(self.timeline, self.legend, self.act_clear_snapshot)
            self.statusBar().showMessage("Memory snapshot closed: it was of the previous design", 8000)
        design.subscribe(self._on_design_event)
        self.scene.set_design(design)
        self.inspector.set_design(design)
        self._update_title()
        QTimer.singleShot(0, self.view.fit_all)
        self.view.fit_all()
        self.service.schedule()

    def _on_design_event(self, event, payload):
        if event not in ("node_moved", "nodes_moved"):
            self.service.schedule()

    def _estimate_inputs(self):
        return self.design, self.settings_bar.settings(), self.settings_bar.current_device()

    def _first_design(self) -> Design:
        """The empty design a window opens with: on the device used last, else a common 24 GB card
        (a new user saw "No device selected" and no verdict). Headless (render): no device."""
        from memdesigner._qt.settings.settings_bar import default_device_id

        d = Design()
        dev = None if self.headless else default_device_id(self.settings_bar.devices, QSettings().value(LAST_DEVICE))
        if dev:
            d.settings = normalize({"device": dev})
        return d

    def _settings_changed(self):
        self._update_title()
        self.service.schedule(design_changed=False)
        dev = self.settings_bar.device_id()
        if dev and not self.headless and dev != getattr(self, "_last_device", None):
            self._last_device = dev
            QSettings().setValue(LAST_DEVICE, dev)  # the next window starts on it

    @property
    def dirty(self) -> bool:
        return self.document.dirty

    def _update_title(self, *_):
        name = Path(self.path).name if self.path else (self.design.name or "untitled")
        self.setWindowTitle(f"{name}[*] — memdesigner")
        self.setWindowModified(self.dirty)

    # -- estimate results --------------------------------------------------------------------
    def apply_result(self, res):
        self.presenter.present(res)

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
        from memdesigner._qt.canvas.node_item import WIDTH

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
        self.layout_runner.run()  # the saved style, computed on a worker (_qt/canvas/layout_runner.py)

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
        if r == QMessageBox.Discard:
            self.document.discard_autosave()  # the user let these changes go: never offered back
            return True
        return False

    def new_design(self):
        """A new design starts from the default run settings on the same device (it inherited the
        last design's mode, batch, LoRA, GPUs... without saying so)."""
        if self.maybe_save():
            d = Design()
            dev = self.settings_bar.device_id()
            d.settings = normalize({"device": dev} if dev else {})
            self.set_design(d, None)

    def open_dialog(self):
        if not self.maybe_save():
            return
        path, _ = QFileDialog.getOpenFileName(self, "Open design", self._last_dir(), "memdesigner designs (*.json)")
        if path:
            self.open_path(path)

    def _building_message(self, building: bool) -> None:
        """The scene's "Building the canvas…" goes when the build is done (not 6 s later)."""
        if not building and self.statusBar().currentMessage().startswith("Building the canvas"):
            self.statusBar().clearMessage()

    def open_path(self, path: str, remember: bool = True) -> bool:
        return open_file.open_path(self, path, remember)  # a big file is read on the worker

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
        try:
            self.document.save(path)  # clean afterwards, autosave gone, in the recent files
        except OSError as err:
            from memdesigner.io.atomic_write import cannot_write

            QMessageBox.warning(self, "Cannot save", cannot_write(path, err))
            return False
        self._add_recent(self.path)
        self._update_title()
        self.statusBar().showMessage(f"Saved {path}", 4000)
        return True

    def _last_dir(self) -> str:
        if self.path:
            return str(Path(self.path).parent)
        return QSettings().value("last_dir", str(Path.home()))

    def _add_recent(self, path: str):
        if self.headless:
            return
        recent.add(path)  # absolute, resolved, de-duplicated (_qt/document/recent.py)
        QSettings().setValue("last_dir", str(Path(path).parent))
        self._fill_recent()

    def _fill_recent(self):
        self.recent_menu.clear()
        rec = recent.entries() if not self.headless else []
        for p, label in zip(rec, recent.labels(rec)):
            a = self.recent_menu.addAction(label)
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
    def import_torch(self, path: str | None = None, answer=None):
        from memdesigner._qt.dialogs.import_dialog import ask_and_import

        return ask_and_import(self, path, answer)

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

    def import_hf(self, path: str | None = None, seq_len: int | None = None, task: str | None = None,
                  transformers_major: int | None = None):
        from memdesigner._qt.dialogs.import_hf import ask_and_import

        return ask_and_import(self, path, seq_len, task, transformers_major)

    def _import(self, fn, what: str):
        """Off the UI thread with progress and Cancel (_qt/jobs/jobs.py); the result lands laid out."""
        from memdesigner._qt.jobs import jobs

        return jobs.start_import(self, fn, what)

    def export(self, kind: str, path: str | None = None) -> str | None:
        filters = {"canvas_png": ("PNG image (*.png)", ".png"), "canvas_svg": ("SVG image (*.svg)", ".svg"),
                   "timeline_png": ("PNG image (*.png)", ".png"), "table_csv": ("CSV table (*.csv)", ".csv"),
                   "torch_py": ("PyTorch code (*.py)", ".py")}
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
            elif kind == "torch_py":
                exports.torch_code(self.design, path)
            else:
                self.table.write_csv(path)
        except exports.ExportRefused as err:  # a layer the exporter cannot write: its one-line reason
            QMessageBox.warning(self, "Export failed", str(err))
            return None
        except OSError as err:
            from memdesigner.io.atomic_write import cannot_write

            QMessageBox.warning(self, "Export failed", cannot_write(path, err) if err.strerror else str(err))
            return None
        self.statusBar().showMessage(f"Exported {path}", 4000)
        return path

    def export_report(self, path: str | None = None) -> str | None:
        from memdesigner._qt.dialogs.report_export import export_report_dialog

        return export_report_dialog(self, path)

    def explain_peak(self):
        """A non-modal table of what is alive at the peak; it follows later edits (presenter)."""
        return self.presenter.open_explain()

    def make_it_fit(self):
        """A non-modal list of the engine's ranked changes; Apply takes one into the settings."""
        from memdesigner._qt.dialogs.fit_dialog import FitDialog
        from memdesigner._qt.jobs.estimator import snapshot

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
        from memdesigner._qt.dialogs.fit_apply import apply_suggestion

        apply_suggestion(self, settings, design_change)  # one undo step
        self.statusBar().showMessage("Applied the suggestion", 4000)

    def measure(self):
        from memdesigner._qt.jobs import jobs

        return jobs.start_measure(self)

    def show_measured(self, result: dict | None):
        """Overlay a measured run (peak_bytes, timeline) on the timeline."""
        self.measured = result
        if self.result is not None and self.result.report is not None:
            self.timeline.set_report(self.result.report, result)
            self.legend.setText(self.timeline.legend_html())

    # -- autosave / recovery -----------------------------------------------------------------
    def autosave(self) -> bool:
        """Write the recovery file now (the document also does it shortly after every change)."""
        return self.document.autosave()

    def offer_recovery(self, ask=None) -> int:
        """At start: offer every autosave a crashed instance left (_qt/document/recovery_prompt.py);
        ``ask(rec) -> 'recover' | 'discard' | 'later'`` (or a bool) replaces the question box."""
        from memdesigner._qt.document.recovery_prompt import offer

        return offer(self, ask)

    # -- window state ------------------------------------------------------------------------
    def _restore_state(self):
        s = QSettings()
        st = s.value("window/state")
        if st is not None:
            self.restoreState(st)
        last = s.value("run_settings")
        if isinstance(last, dict):
            self.document.settings.set_all(last)  # the last session's settings, not an edit

    def _save_state(self):
        s = QSettings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("run_settings", self.document.settings.to_dict())

    def closeEvent(self, ev):
        if not self.maybe_save():
            ev.ignore()
            return
        if not self.headless:
            self._save_state()
        self.document.close()  # nothing left to recover: the user saved or discarded
        self.service.shutdown()
        from memdesigner._qt.scheduling import worker

        worker.shutdown()  # imports, measurements, explanations still running (_qt/scheduling/worker.py)
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

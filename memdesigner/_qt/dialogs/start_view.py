"""The start view: what the canvas shows while the design is empty, instead of a blank grid.
Open an example (with thumbnails), start from a template, import a model, reopen a recent file,
or drag a layer in from the palette (drops pass through to the canvas).

It floats over the canvas's viewport and hides as soon as the design has a layer; "Start with
an empty canvas" hides it for the current empty design. Every button calls what the window's
menus call, so the start view adds no second way of opening or importing."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from PySide6.QtCore import QEvent, QSize, Qt, QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from memdesigner._qt import theme
from memdesigner._qt.dialogs import thumbnails
from memdesigner._qt.icons import family_icon
from memdesigner.model.templates import TEMPLATES

MAX_RECENT_SHOWN = 6
THUMB = QSize(116, 69)  # the cached thumbnails (thumbnails.SIZE) shown smaller: two columns on a laptop
TEMPLATE_ICONS = {"mlp": "dense", "cnn": "convolution", "transformer": "attention", "llama": "attention"}


def recent_files(win) -> list[str]:
    """The recent files that still exist (the one place the start view reads them: the list lives
    in _qt/document/recent.py, absolute and de-duplicated; none in a headless window)."""
    from memdesigner._qt.document import recent

    return [] if getattr(win, "headless", False) else [p for p in recent.entries() if Path(p).exists()]


def example_files() -> list:
    """The shipped example designs (resources/examples/*.json), by name."""
    try:
        folder = resources.files("memdesigner.resources").joinpath("examples")
        return sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=lambda f: f.name)
    except (OSError, ModuleNotFoundError):
        return []


def _title(text: str) -> QLabel:
    lbl = QLabel(text)
    lbl.setStyleSheet("font-weight: bold; font-size: 13px; padding-top: 4px;")
    return lbl


def _button(text: str, tip: str, icon: QIcon | None = None) -> QPushButton:
    b = QPushButton(text)
    b.setToolTip(tip)
    b.setCursor(Qt.PointingHandCursor)
    b.setStyleSheet("text-align: left; padding: 4px 8px;")
    if icon is not None:
        b.setIcon(icon)
    return b


def _column(body: QHBoxLayout, title: str, width: int) -> QVBoxLayout:
    """A fixed-width column of the start view with its title; returns the layout to fill."""
    col = QWidget()
    col.setFixedWidth(width)
    lay = QVBoxLayout(col)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.setSpacing(3)
    lay.addWidget(_title(title))
    inner = QVBoxLayout()
    inner.setSpacing(3)
    lay.addLayout(inner)
    lay.addStretch(1)
    body.addWidget(col)
    return inner


class StartView(QFrame):
    def __init__(self, win):
        super().__init__(win.view.viewport())
        self.win = win
        self.setObjectName("start-view")
        self.setAutoFillBackground(True)
        self.setAcceptDrops(False)  # a palette drop lands on the canvas below
        self.setStyleSheet("#start-view { background: palette(base); }")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.NoFrame)
        scroll.setAcceptDrops(False)
        outer.addWidget(scroll)
        page = QWidget()
        page.setObjectName("start-page")
        page.setStyleSheet("#start-page { background: palette(base); }")
        scroll.setWidget(page)
        lay = QVBoxLayout(page)
        lay.setContentsMargins(20, 8, 20, 8)
        lay.setSpacing(4)

        head = QHBoxLayout()
        title = QLabel("Start a design")
        title.setStyleSheet("font-size: 18px; font-weight: bold;")
        head.addWidget(title)
        hint = QLabel("… or drag a layer from the palette onto the canvas")
        hint.setStyleSheet(f"color: {theme.muted()};")
        head.addWidget(hint, 1)
        self.empty_button = QPushButton("Start with an empty canvas")
        self.empty_button.setToolTip("Hide this page (File → New shows it again)")
        self.empty_button.clicked.connect(self.dismiss)
        head.addWidget(self.empty_button)
        lay.addLayout(head)

        # one row of columns: examples (their own list scrolls), templates, imports, recent files,
        # so a 1366x768 laptop's canvas (about 830x280 beside the docks) shows every part at once
        body = QHBoxLayout()
        body.setSpacing(14)
        left = QVBoxLayout()
        left.setSpacing(3)
        left.addWidget(_title("Open an example"))
        self.examples = QListWidget()
        self.examples.setViewMode(QListView.IconMode)
        self.examples.setMovement(QListView.Static)
        self.examples.setResizeMode(QListView.Adjust)
        self.examples.setWrapping(True)
        self.examples.setUniformItemSizes(True)
        self.examples.setIconSize(THUMB)
        self.examples.setGridSize(QSize(THUMB.width() + 12, THUMB.height() + 32))
        self.examples.setSpacing(2)
        self.examples.setDragEnabled(False)
        self.examples.setAcceptDrops(False)
        self.examples.setFrameShape(QFrame.NoFrame)
        self.examples.setMinimumSize(THUMB.width() + 30, THUMB.height() + 36)
        self.examples.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self.examples.setStyleSheet("QListWidget { background: transparent; }")
        self.examples.itemActivated.connect(self._open_example)
        self.examples.itemClicked.connect(self._open_example)
        placeholder = QIcon(thumbnails_placeholder())
        self._files = {}
        for f in example_files():
            it = QListWidgetItem(placeholder, f.name[:-5].replace("_", " "))
            it.setToolTip(f.name)
            it.setData(Qt.UserRole, f.name)
            it.setTextAlignment(Qt.AlignHCenter | Qt.AlignTop)
            self.examples.addItem(it)
            self._files[f.name] = f
        left.addWidget(self.examples, 1)
        body.addLayout(left, 1)

        templates = _column(body, "From a template", 150)
        self.template_buttons = {}
        for t in TEMPLATES:
            b = _button(t.title, t.doc, family_icon(TEMPLATE_ICONS.get(t.key, "generic")))
            b.clicked.connect(lambda _=False, t=t: self.open_template(t))
            templates.addWidget(b)
            self.template_buttons[t.key] = b
        imports = _column(body, "Import a model", 158)
        self.import_buttons = {}
        for key, text, act in (("torch", "PyTorch model (.py)…", win.act_import_torch),
                               ("keras", "Keras model (JSON)…", win.act_import_keras),
                               ("onnx", "ONNX model…", win.act_import_onnx),
                               ("hf", "Hugging Face config…", win.act_import_hf)):
            b = _button(text, act.toolTip() or act.text().replace("&", ""))
            b.clicked.connect(lambda _=False, act=act: act.trigger())
            imports.addWidget(b)
            self.import_buttons[key] = b
        recent_col = _column(body, "Recent files", 160)
        self.recent_box = QVBoxLayout()
        self.recent_box.setSpacing(0)
        recent_col.addLayout(self.recent_box)
        lay.addLayout(body, 1)

        self.recent_buttons: list[QPushButton] = []
        self._dismissed_for = None
        self._pending = list(range(self.examples.count()))  # thumbnails still to draw
        self._thumb_timer = QTimer(self)
        self._thumb_timer.setInterval(0)
        self._thumb_timer.timeout.connect(self._next_thumbnail)
        win.view.viewport().installEventFilter(self)
        win.scene.changed.connect(lambda *_: self.sync())
        win.result_applied.connect(lambda *_: self.sync())
        self.fill_recent()
        self.sync()
        QTimer.singleShot(0, self.sync)  # once the window's other canvas tools exist (the minimap)

    # -- shown or not ---------------------------------------------------------------------------
    def wanted(self) -> bool:
        w = self.win
        return (not w.headless and not w.design.nodes and w.scene.design is w.design
                and self._dismissed_for is not w.design)

    def sync(self) -> None:
        show = self.wanted()
        bars = Qt.ScrollBarAlwaysOff if show else Qt.ScrollBarAsNeeded  # no canvas to scroll yet
        view = self.win.view
        if view.horizontalScrollBarPolicy() != bars:
            view.setHorizontalScrollBarPolicy(bars)
            view.setVerticalScrollBarPolicy(bars)
        if show and self.isHidden():
            self.fill_recent()
            self.setGeometry(self.parentWidget().rect())
            self.show()
            self.raise_()
        elif not show and not self.isHidden():
            self.hide()
        mm, act = getattr(self.win, "minimap", None), getattr(self.win, "act_minimap", None)
        if mm is not None:  # an overview of nothing would sit on top of the start view
            want = not show and (act is None or act.isChecked())
            if mm.isVisible() != want:
                mm.setVisible(want)
        if show and self._pending and not self._thumb_timer.isActive():
            self._thumb_timer.start()

    def dismiss(self) -> None:
        self._dismissed_for = self.win.design
        self.sync()
        self.win.view.setFocus()

    def moveEvent(self, ev):
        super().moveEvent(ev)
        if self.pos().x() or self.pos().y():  # the view scrolls its viewport's children along
            self.move(0, 0)

    def eventFilter(self, obj, ev):
        if ev.type() == QEvent.Resize and obj is self.parentWidget():
            self.setGeometry(obj.rect())
        return False

    # -- thumbnails, one per event-loop turn (the window stays responsive) ---------------------
    def _next_thumbnail(self) -> None:
        if not self.isVisible() or not self._pending:  # hidden, or its window closed
            self._thumb_timer.stop()
            return
        it = self.examples.item(self._pending.pop(0))
        f = self._files[it.data(Qt.UserRole)]
        with resources.as_file(f) as p:
            pm = thumbnails.thumbnail(p)
        if pm is not None:
            it.setIcon(QIcon(pm))

    # -- actions --------------------------------------------------------------------------------
    def _open_example(self, item: QListWidgetItem) -> None:
        f = self._files.get(item.data(Qt.UserRole))
        if f is not None and self.win.maybe_save():
            self.win._open_example(f)

    def open_template(self, t) -> None:
        win = self.win
        if not win.maybe_save():
            return
        if t.build is None:
            path = resources.files("memdesigner.resources").joinpath("examples", "hf", t.hf_config)
            with resources.as_file(path) as p:
                win.import_hf(str(p), seq_len=t.seq_len, task="causal-lm", transformers_major=t.transformers_major)
            return
        from memdesigner._qt.document.opened_settings import opened_settings

        d = t.build()
        d.settings = opened_settings(d.settings)
        win.set_design(d, None)

    def fill_recent(self) -> None:
        while self.recent_box.count():
            w = self.recent_box.takeAt(0).widget()
            if w is not None:
                w.hide()  # at once: deleteLater waits for the event loop
                w.deleteLater()
        self.recent_buttons = []
        paths = recent_files(self.win)[:MAX_RECENT_SHOWN]
        if not paths:
            none = QLabel("No recent files yet")
            none.setStyleSheet(f"color: {theme.muted()}; padding-left: 8px;")
            self.recent_box.addWidget(none)
        for p in paths:
            b = _button(Path(p).name, p)
            b.setFlat(True)
            b.clicked.connect(lambda _=False, p=p: self.win.maybe_save() and self.win.open_path(p))
            self.recent_box.addWidget(b)
            self.recent_buttons.append(b)


def thumbnails_placeholder():
    from PySide6.QtGui import QColor, QPixmap

    pm = QPixmap(thumbnails.SIZE)
    pm.fill(QColor(theme.canvas_colors()["bg"]))
    return pm


def install(win) -> StartView | None:
    """The start view over the window's canvas (none in a headless window: renders)."""
    return None if win.headless else StartView(win)

"""The inspector: typed editors generated from the selected layer's Prop declarations. A value
the registry refuses stays out of the design and the reason appears under the field."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from memdesigner._qt import theme
from memdesigner._qt.document import undo_bursts
from memdesigner._qt.document.commands import SetBitsCmd, SetNameCmd, SetPropCmd
from memdesigner._qt.icons import family_pixmap
from memdesigner._qt.settings.finetune_widgets import SetTrainableCmd
from memdesigner.model.design import BITS, Design
from memdesigner.model.registry import LayerError, Prop

INT_LIMIT = 2**31 - 1


def display(prop: Prop, value) -> str:
    """How a value reads in a text field (and parses back with parse())."""
    if value is None:
        return ""
    if prop.kind == "shape" and isinstance(value, (list, tuple)):
        return " × ".join(map(str, value))
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    if prop.kind == "float":
        return f"{float(value):g}"
    return str(value)


def parse(prop: Prop, text: str):
    """Text -> a value for Prop.coerce; pairs and pads accept '3', '3, 3', '3x3', 'same'."""
    t = text.strip()
    if not t and prop.optional:
        return None
    if prop.kind in ("pair", "pad"):
        if prop.kind == "pad" and t.upper() in ("SAME", "VALID"):
            return t.upper()
        parts = [p for p in re.split(r"[,x×\s]+", t) if p]
        try:
            vals = [int(p) for p in parts]
        except ValueError:
            extra = ", SAME or VALID" if prop.kind == "pad" else ""
            raise LayerError(prop.name, f"{t!r} is not a number or two numbers{extra}") from None
        if not vals:
            raise LayerError(prop.name, "a value is required")
        return vals[0] if len(vals) == 1 else vals
    if prop.kind in ("shape", "ints"):
        return [p for p in re.split(r"[,x×\s]+", t) if p]
    return t


class FieldRow(QWidget):
    """An editor; a refused value or an issue marks it red, and the reason goes to the
    inspector's banner (below the fields, so nothing moves under the pointer)."""

    committed = Signal(str, object)  # prop name, raw value
    error_changed = Signal()

    def __init__(self, prop: Prop, parent=None):
        super().__init__(parent)
        self.prop = prop
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        self.editor = self._make_editor()
        lay.addWidget(self.editor)
        tip = prop.doc or prop.name
        if prop.min is not None or prop.max is not None:
            tip += f"  (range {prop.min if prop.min is not None else '−∞'} … {prop.max if prop.max is not None else '∞'})"
        self.tip = tip
        self.editor.setToolTip(tip)
        self.refused = False
        self.error_text = ""  # "Refused: -5 is below the minimum 1", an analysis issue, or ""

    def _make_editor(self):
        p = self.prop
        # number fields take what is typed, whatever the range: a spin box clamped to the range
        # would turn "-5" into 5 without a word; the registry refuses it with the field's reason
        if p.kind == "int":
            w = QSpinBox()
            w.setRange(-INT_LIMIT, INT_LIMIT)
            w.setKeyboardTracking(False)
            w.setAccelerated(True)
            w.valueChanged.connect(lambda v: self.committed.emit(p.name, int(v)))
            return w
        if p.kind == "float" and p.min is not None and p.max is not None and p.max - p.min <= 1000:
            w = QDoubleSpinBox()
            w.setRange(-1e9, 1e9)
            w.setDecimals(4)
            w.setSingleStep(0.05 if p.max - p.min <= 1 else 0.5)
            w.setKeyboardTracking(False)
            w.valueChanged.connect(lambda v: self.committed.emit(p.name, float(v)))
            return w
        if p.kind == "bool":
            w = QCheckBox()
            w.toggled.connect(lambda v: self.committed.emit(p.name, bool(v)))
            return w
        if p.kind == "choice":
            w = QComboBox()
            for c in p.choices:
                w.addItem(str(c), c)
            w.activated.connect(lambda i: self.committed.emit(p.name, w.itemData(i)))
            return w
        w = QLineEdit()
        hints = {"shape": "e.g. 3 × 224 × 224", "ints": "e.g. 0, 2, 1", "pad": "e.g. 1, 2×2, SAME or VALID",
                 "pair": "e.g. 3 or 3×3", "float": "a number"}
        w.setPlaceholderText(hints.get(p.kind, ""))
        w.editingFinished.connect(lambda: w.isModified() and self._text_committed(w))
        return w

    def _text_committed(self, w: QLineEdit):
        w.setModified(False)
        try:
            value = parse(self.prop, w.text())
        except LayerError as err:
            self.show_error(err.message)
            return
        self.committed.emit(self.prop.name, value)

    def set_value(self, value):
        w = self.editor
        w.blockSignals(True)
        try:
            if isinstance(w, QSpinBox):
                w.setValue(int(value))
            elif isinstance(w, QDoubleSpinBox):
                w.setValue(float(value))
            elif isinstance(w, QCheckBox):
                w.setChecked(bool(value))
            elif isinstance(w, QComboBox):
                i = w.findData(value)
                w.setCurrentIndex(max(i, 0))
            else:
                w.setText(display(self.prop, value))
                w.setModified(False)
        except (TypeError, ValueError):
            if isinstance(w, QLineEdit):
                w.setText(str(value))
        finally:
            w.blockSignals(False)

    def show_error(self, message: str | None, kind: str = "refused"):
        """kind 'refused': the value was not taken; 'issue': the design's analysis flags this field."""
        self.refused = bool(message) and kind == "refused"
        text = (("Refused: " if kind == "refused" else "") + message) if message else ""
        changed = text != self.error_text
        self.error_text = text
        self.editor.setToolTip(f"{text}\n{self.tip}" if text else self.tip)
        if bool(self.editor.property("invalid")) != bool(message):  # a re-polish only when the mark changes
            self.editor.setProperty("invalid", bool(message))
            self.editor.style().unpolish(self.editor)
            self.editor.style().polish(self.editor)
        if changed:
            self.error_changed.emit()


class Inspector(QScrollArea):
    message = Signal(str)

    def __init__(self, stack, parent=None):
        super().__init__(parent)
        self.stack = stack
        self.design: Design | None = None
        self.node_id: str | None = None
        self.fields: dict[str, FieldRow] = {}
        self.extra_panel = None  # (graph, node id) -> QWidget | None: a layer type's own section (blocks)
        self._issue = None
        self._pages: dict = {}  # (layer type, muted colour) -> its page, reused by each layer of the type
        self._empty: QLabel | None = None
        self._empty_color = ""
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.NoFrame)
        self.setMinimumWidth(260)
        self.setStyleSheet(f"*[invalid=\"true\"] {{ border: 1.5px solid {theme.BAD_COLOR}; border-radius: 3px; }}")
        # the reason for a refused value or the layer's error: in the scroll area's bottom margin,
        # so the fields above stay where they are when it appears (nothing jumps under the pointer)
        self.issue_label = QLabel(self)
        self.issue_label.setWordWrap(True)
        self.issue_label.setTextFormat(Qt.RichText)
        self.issue_label.hide()
        self._node_issue = ("", False)  # (text, calm)
        self._show_empty("Select a layer to edit its properties.")

    def set_design(self, design: Design):
        if self.design is not None:
            self.design.unsubscribe(self._on_design)
        self.design = design
        self._pages.clear()
        design.subscribe(self._on_design)
        self.show_node(None)

    # -- building ---------------------------------------------------------------------------
    def _show_empty(self, text: str):
        """One label for every empty state ("3 layers selected."): its text changes, nothing is rebuilt."""
        if self._empty is None or theme.muted() != self._empty_color:
            self._empty_color = theme.muted()
            self._empty = QLabel()
            self._empty.setAlignment(Qt.AlignCenter)
            self._empty.setWordWrap(True)
            self._empty.setStyleSheet(f"color: {self._empty_color}; padding: 24px;")
        if self._empty.text() != text:
            self._empty.setText(text)
        self.fields = {}
        self.name_edit = self.bits_combo = self.trainable_box = None
        self._put(self._empty)
        if hasattr(self, "issue_label"):
            self._node_issue = ("", False)
            self._update_banner()

    def show_selection(self, ids: list):
        if len(ids) == 1:
            self.show_node(ids[0])
        else:
            self.node_id = None
            self._show_empty(f"{len(ids)} layers selected." if ids else "Select a layer to edit its properties.")

    def show_node(self, nid: str | None):
        if nid is None or self.design is None or nid not in self.design.nodes:
            self.node_id = None
            self._show_empty("Select a layer to edit its properties.")
            return
        self.node_id = nid
        node = self.design.nodes[nid]
        extra = self.extra_panel(self.design, nid) if self.extra_panel else None
        key = (node.layer.name, theme.muted())
        page = self._pages.get(key) if extra is None else None
        if page is None:
            page = self._build_page(node.layer, extra)
            if extra is None:  # a page of a layer type serves each layer of that type (no per-node section)
                self._pages[key] = page
        self.name_edit, self.bits_combo, self.trainable_box, self.fields = page.parts
        for row in self.fields.values():  # what the previous layer had refused is not this one's
            row.refused = False
        self._put(page)
        self._load_values()
        self._show_issue()

    def _put(self, w: QWidget):
        """Show ``w``, keeping the previous page alive (taken back, not deleted by setWidget) so the
        next selection of its kind reuses it instead of building new widgets."""
        if self.widget() is not w:
            self.takeWidget()
            self.setWidget(w)

    def page(self) -> QWidget:
        """The page shown (the empty note or a layer type's editors)."""
        return self.widget()

    def _build_page(self, lt, extra) -> QWidget:
        page = QWidget()
        outer = QVBoxLayout(page)
        outer.setContentsMargins(10, 10, 10, 10)
        outer.setSpacing(8)
        head = QHBoxLayout()
        icon = QLabel()
        icon.setPixmap(family_pixmap(lt.family, 64).scaled(28, 28, Qt.KeepAspectRatio, Qt.SmoothTransformation))
        title = QLabel(f"<b style='font-size:14px'>{lt.name}</b><br><span style='color:{theme.muted()}'>{lt.family}</span>")
        head.addWidget(icon)
        head.addWidget(title, 1)
        outer.addLayout(head)
        doc = QLabel(lt.doc)
        doc.setWordWrap(True)
        doc.setStyleSheet(f"color: {theme.muted()};")
        outer.addWidget(doc)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        form.setLabelAlignment(Qt.AlignRight | Qt.AlignVCenter)
        name_edit = QLineEdit()
        name_edit.editingFinished.connect(self._rename)
        form.addRow("name", name_edit)
        bits_combo = QComboBox()
        bits_combo.addItem("default (run dtype)", None)
        for b in BITS:
            bits_combo.addItem(f"{b}-bit", b)
        bits_combo.setToolTip("Weight precision of this layer (quantised weights), independent of the run dtype")
        bits_combo.activated.connect(self._bits)
        form.addRow("weight bits", bits_combo)
        trainable_box = QCheckBox("trains (unchecked: frozen)")
        trainable_box.setToolTip("Frozen parameters get no gradient and no optimizer state; backward stops where "
                                 "nothing upstream needs it")
        trainable_box.toggled.connect(self._trainable)
        form.addRow("parameters", trainable_box)
        fields = {}
        for p in lt.props:
            row = FieldRow(p)
            row.committed.connect(lambda key, raw: self.commit(key, raw, burst=undo_bursts.current()))
            row.error_changed.connect(self._update_banner)
            fields[p.name] = row
            form.addRow(p.name.replace("_", " "), row)
        outer.addLayout(form)
        if extra is not None:
            outer.addWidget(extra)
        if lt.keeps_for_backward:
            keeps = QLabel(f"<b>Kept for backward:</b> {lt.keeps_for_backward}")
            keeps.setWordWrap(True)
            keeps.setStyleSheet(f"color: {theme.muted()};")
            outer.addWidget(keeps)
        outer.addStretch(1)
        page.parts = (name_edit, bits_combo, trainable_box, fields)
        return page

    def _load_values(self):
        node = self.design.nodes[self.node_id]
        if self.name_edit.text() != node.name:
            self.name_edit.setText(node.name)
        i = self.bits_combo.findData(node.bits) if node.bits is not None else 0
        self.bits_combo.setCurrentIndex(max(i, 0))
        if self.trainable_box.isChecked() != node.trainable:
            self.trainable_box.blockSignals(True)
            self.trainable_box.setChecked(node.trainable)
            self.trainable_box.blockSignals(False)
        for name, row in self.fields.items():
            row.set_value(node.props.get(name, row.prop.default))

    # -- editing ----------------------------------------------------------------------------
    def commit(self, key: str, raw, burst: int | None = None) -> bool:
        """Coerce through the registry; refuse at the field with the reason, or push an undoable
        edit (merged with the previous one of this field in the same ``burst``: the field's own
        editor passes undo_bursts.current()). The benchmark drives edits through here."""
        if self.node_id is None:
            return False
        node = self.design.nodes[self.node_id]
        row = self.fields.get(key)
        try:
            value = node.layer.prop(key).coerce(raw)
        except LayerError as err:
            if row is not None:
                row.show_error(err.message)
            self.message.emit(f"{node.name}.{key}: {err.message}")
            return False
        if row is not None:
            row.show_error(None)
        if node.props.get(key) == value:
            return True
        self.stack.push(SetPropCmd(self.design, self.node_id, key, value, burst=burst))
        return True

    def _rename(self):
        if self.node_id is None:
            return
        name = self.name_edit.text().strip()
        if name and name != self.design.nodes[self.node_id].name:
            self.stack.push(SetNameCmd(self.design, self.node_id, name))

    def _trainable(self, on: bool):
        nid = self.node_id
        if nid is not None and nid in self.design.nodes and self.design.nodes[nid].trainable != on:
            self.stack.push(SetTrainableCmd(self.design, nid, on))

    def _bits(self, index: int):
        if self.node_id is not None:
            bits = self.bits_combo.itemData(index)
            if bits != self.design.nodes[self.node_id].bits:
                self.stack.push(SetBitsCmd(self.design, self.node_id, bits))

    def _on_design(self, event, payload):
        if self.node_id is None:
            return
        if event == "node_changed" and payload.id == self.node_id:
            self._load_values()
        elif event in ("node_removed", "nodes_removed", "reset") and self.node_id not in self.design.nodes:
            self.show_node(None)

    # -- analysis feedback ------------------------------------------------------------------
    def apply_analysis(self, analysis):
        info = analysis.nodes.get(self.node_id) if analysis is not None and self.node_id else None
        self._issue = info.issue if info is not None else None
        self._blocked = info.blocked_by if info is not None else None
        self._show_issue()

    def _show_issue(self):
        if self.node_id is None or not self.fields and self.name_edit is None:
            self._node_issue = ("", False)
            self._update_banner()
            return
        iss = self._issue if self._issue is not None and self._issue.node_id == self.node_id else None
        for name, row in self.fields.items():
            if not row.refused:
                row.show_error(iss.message if iss is not None and iss.field == name else None, kind="issue")
        if iss is not None and iss.pending:
            self._node_issue = ("Not connected yet: drag from another layer's output port (right side) to this "
                                "layer's input port (left side).", True)
        elif iss is not None:
            self._node_issue = (f"<b>Error</b> ({iss.field}): {iss.message}", False)
        else:
            self._node_issue = ("", False)
        self._update_banner()

    # -- the banner -------------------------------------------------------------------------
    def banner_text(self) -> tuple[str, bool]:
        """(text, calm): a refused value first (what the user just typed), else the layer's issue."""
        for name, row in self.fields.items():
            if row.refused:
                return f"<b>{name.replace('_', ' ')}</b> — {row.error_text}", False
        return self._node_issue

    def _update_banner(self):
        text, calm = self.banner_text() if self.node_id is not None else ("", False)
        lbl = self.issue_label
        style = f"background: {theme.muted() if calm else theme.BAD_COLOR}; color: white; border-radius: 4px; padding: 6px;"
        if lbl.styleSheet() != style:  # each set re-polishes the label: on every estimate, 3-15 ms
            lbl.setStyleSheet(style)
        if lbl.text() != text:
            lbl.setText(text)
        lbl.setVisible(bool(text))
        self._place_banner()

    def _place_banner(self):
        m = 6
        if self.issue_label.isHidden():
            if not self.viewportMargins().isNull():  # (each set lays the panel out again: 5 ms)
                self.setViewportMargins(0, 0, 0, 0)
            return
        w = max(60, self.width() - 2 * m)
        h = self.issue_label.heightForWidth(w)
        h = h if h > 0 else self.issue_label.sizeHint().height()
        self.setViewportMargins(0, 0, 0, h + 2 * m)
        self.issue_label.setGeometry(m, self.height() - h - m, w, h)
        self.issue_label.raise_()

    def resizeEvent(self, ev):
        super().resizeEvent(ev)
        self._place_banner()

"""The verdict at a glance: peak, device capacity, headroom, fits or not, the largest batch that
fits, parameters and FLOPs."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QVBoxLayout, QWidget

from memdesigner._qt import theme
from memdesigner.engine.sanity import ABSURD_BYTES
from memdesigner.units import format_bytes, format_count, format_flops

NOTHING = "nothing to estimate"
SEARCHING = "searching for these settings"


class _Stat(QWidget):
    def __init__(self, title: str):
        super().__init__()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        self.title = QLabel(title.upper())
        self.title.setStyleSheet(f"color: {theme.muted()}; font-size: 10px; letter-spacing: 1px;")
        self.value = QLabel("—")
        self.value.setStyleSheet("font-size: 16px; font-weight: 600;")
        self.value.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.sub = QLabel("")
        self.sub.setWordWrap(True)
        self.sub.setStyleSheet(f"color: {theme.muted()}; font-size: 11px;")
        lay.addWidget(self.title)
        lay.addWidget(self.value)
        lay.addWidget(self.sub)

    def set(self, value: str, sub: str = "", tip: str = ""):
        self.value.setText(value)
        self.sub.setText(sub)
        self.setToolTip(tip)


class SummaryPanel(QFrame):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.verdict = QLabel("No estimate yet")
        self.verdict.setAlignment(Qt.AlignCenter)
        self.verdict.setMinimumHeight(30)
        self._style_verdict(None)
        self.peak = _Stat("Peak")
        self.capacity = _Stat("Device")
        self.headroom = _Stat("Headroom")
        self.max_batch = _Stat("Largest batch")
        self.params = _Stat("Parameters")
        self.flops = _Stat("FLOPs / step")
        grid = QGridLayout(self)
        grid.setContentsMargins(12, 10, 12, 10)
        grid.setHorizontalSpacing(18)
        grid.setVerticalSpacing(10)
        grid.addWidget(self.verdict, 0, 0, 1, 2)
        for i, w in enumerate((self.peak, self.capacity, self.headroom, self.max_batch, self.params, self.flops)):
            grid.addWidget(w, 1 + i // 2, i % 2)
        self.import_note = QLabel("")
        self.import_note.setWordWrap(True)
        self.import_note.setStyleSheet(f"color: {theme.WARN_COLOR}; font-size: 11px;")
        self.import_note.hide()
        grid.addWidget(self.import_note, 4, 0, 1, 2)
        self.verified = QLabel("")  # checked against PyTorch, or estimated from rules (engine/verified.py)
        self.verified.setWordWrap(True)
        self.verified.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.verified.setStyleSheet("color: #8A8F98; font-size: 11px;")
        grid.addWidget(self.verified, 5, 0, 1, 2)
        grid.setRowStretch(6, 1)
        self.setMinimumWidth(300)

    def _style_verdict(self, fits):
        color = {True: theme.OK_COLOR, False: theme.BAD_COLOR}.get(fits, "#8A8F98")
        self.verdict.setStyleSheet(f"background: {color}; color: white; border-radius: 6px; font-weight: 700;"
                                   "font-size: 13px; padding: 4px 10px;")

    def set_report(self, report, error: str | None = None, import_warnings=(), verified: dict | None = None):
        """``verified``: engine/verified.py's verdict for this estimate (its line is shown)."""
        self._import_note(import_warnings)
        self.verified.setText(verified["line"] if verified and report is not None else "")
        self.verified.setToolTip(_verified_tip(verified) if verified and report is not None else "")
        if report is None:
            self.verdict.setText("Estimate failed" if error else "No estimate")
            self.verdict.setToolTip(error or "")
            self._style_verdict(None)
            return
        self.verdict.setToolTip("")
        s = report.settings
        self.peak.set(format_bytes(report.device_peak_bytes if report.device else report.peak_bytes, 2),
                      _peak_parts(report) if report.device else f"{s['mode']} · batch {s['batch']} · {s['dtype']}",
                      f"tensors {format_bytes(report.peak_bytes, 2)} ({report.peak_bytes:,} B); allocator rounding "
                      f"{report.rounding_bytes:,} B; runtime {report.runtime_overhead_bytes:,} B; on the device "
                      f"{format_bytes(report.device_peak_bytes, 2)}")
        dev = report.device
        n_iss = sum(not i.pending for i in report.issues)
        n_pending = len(report.issues) - n_iss
        if dev is None:
            self.capacity.set("none", "pick a device above")
            self.headroom.set("—")
            self.max_batch.set("—", "pick a device")
            self.verdict.setText(f"{n_iss} error(s) in the graph" if n_iss else
                                 f"{n_pending} layer(s) not connected yet" if n_pending else "No device selected")
            self._style_verdict(None if not n_iss else False)
        else:
            self.capacity.set(format_bytes(dev["capacity_bytes"]), dev["name"])
            head = dev["headroom_bytes"]
            pct = 100 * max(head, -dev["capacity_bytes"] * 10**9) / dev["capacity_bytes"]  # no float overflow
            self.headroom.set(format_bytes(head), f"{pct:.0f}% of capacity")
            # until the engine's search for these settings lands (the last one was for others)
            self.max_batch.set("…", SEARCHING)
            if n_iss:
                self.verdict.setText(f"⚠ {n_iss} error(s) in the graph — estimate covers the valid part")
                self._style_verdict(False)
            elif n_pending:  # freshly dropped layers: no verdict yet, and no alarm either
                self.verdict.setText(f"{n_pending} layer(s) not connected yet")
                self._style_verdict(None)
            elif not any(r.type != "Input" for r in report.layers):  # no "Fits" over an empty canvas
                self.verdict.setText("Nothing to estimate yet: add layers")
                self.headroom.set("—", NOTHING)  # (the runtime alone leaves no headroom worth a figure)
                self.max_batch.set("—", NOTHING)
                self._style_verdict(None)
            elif report.unruled_ops:  # never a silent green: some memory is a guess
                n = len(report.unruled_ops)
                self.verdict.setText(f"⚠ {'Fits' if dev['fits'] else 'Does not fit'} — but {n} layer"
                                     f"{'s' if n != 1 else ''} not modelled")
                self.verdict.setToolTip(report.not_modelled_note + ": " + ", ".join(report.unruled_ops[:20]))
                self._style_verdict(False)
            else:
                # the device name is in the DEVICE cell; the banner stays short enough never to clip
                if dev["fits"]:
                    self.verdict.setText(f"✓ Fits — {format_bytes(head)} to spare")
                else:
                    self.verdict.setText(f"✗ Does not fit — {format_bytes(-head)} over")
                self.verdict.setToolTip(f"{'Fits on' if dev['fits'] else 'Does not fit on'} {dev['name']}")
                self._style_verdict(dev["fits"])
        if report.peak_bytes >= ABSURD_BYTES and report.warnings:
            self.verdict.setText("\u26a0 " + report.warnings[0])  # the absurd-size warning comes first
            self.verdict.setToolTip(report.warnings[0])
            self._style_verdict(False)
        if report.max_batch is not None:
            self.max_batch.set(str(report.max_batch))
        self.params.set(format_count(report.params), format_bytes(report.param_bytes) + " of weights")
        self.flops.set(format_flops(report.flops), "forward, whole batch")

    def _import_note(self, warnings) -> None:
        warnings = list(warnings or ())
        self.import_note.setVisible(bool(warnings))
        if warnings:
            n = len(warnings)
            self.import_note.setText(f"⚠ the importer warned about {n} thing{'s' if n != 1 else ''} (hover)")
            self.import_note.setToolTip("\n".join(warnings[:30]) + ("\n…" if n > 30 else ""))

    def set_max_batch(self, sweep):
        if sweep is not None and getattr(sweep, "empty", False):
            self.max_batch.set("—", NOTHING)
        elif sweep is None or sweep.max_batch is None:
            self.max_batch.set("—", "pick a device" if sweep is not None else "")
        else:
            ctx = getattr(sweep, "max_context", None)
            sub = "fits in device memory" if sweep.max_batch else "batch 1 does not fit"
            if ctx is not None:  # generate: the engine's longest context (estimate --max-context)
                sub = f"longest context {ctx:,} tokens" if ctx else "no context fits"
            self.max_batch.set(str(sweep.max_batch) if sweep.max_batch else "none", sub)


def _verified_tip(v: dict) -> str:
    if not v.get("checked"):
        return v.get("reason", "")
    return (f"measured by PyTorch {format_bytes(v['measured_peak'], 2)}, estimated {format_bytes(v['estimate_peak'], 2)}"
            f" ({v['diff_pct']:+.2f} %) at {', '.join(f'{k} {x}' for k, x in v['settings'].items())}")


def _peak_parts(report) -> str:
    """Tensors + what the device adds, each part named as the engine reports it."""
    parts = [f"{format_bytes(report.peak_bytes)} tensors"]
    if report.rounding_bytes:
        parts.append(f"{format_bytes(report.rounding_bytes)} allocator rounding")
    if report.runtime_overhead_bytes:
        parts.append(f"{format_bytes(report.runtime_overhead_bytes)} CUDA runtime")
    return " + ".join(parts)

"""Everything a report shows, collected once from the engine: the HTML and Markdown writers only
format it, so both variants carry the same numbers (bytes as ints, formatted only when written)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

from memdesigner.engine.batch_curve import SEARCH_LIMIT
from memdesigner.engine.devices import Device, shipped_devices
from memdesigner.engine.estimate import estimate, explain_peak
from memdesigner.engine.report import LayerRow, Report
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import CATS
from memdesigner.model.analysis import analyze
from memdesigner.model.blocks import expand
from memdesigner.model.design import Design
from memdesigner.reports.suggestions import suggestions_for
from memdesigner.reports.svg_timeline import timeline_svg
from memdesigner.text import encodable

# where a batch search has to stop (a non-affine step, a peak that does not grow with the batch):
# that exact result means "at least"; an affine curve's largest batch is exact at any size
BATCH_LIMIT = SEARCH_LIMIT
TOP_TENSORS = 15  # the peak breakdown lists this many tensors, the rest as one line


class ReportError(ValueError):
    """The design cannot be estimated (one line, names the node and field)."""


@dataclass
class DeviceVerdict:
    id: str
    name: str
    kind: str
    capacity_bytes: int
    runtime_overhead_bytes: int
    peak_bytes: int  # live tensor bytes under this device's semantics
    device_peak_bytes: int  # + allocator rounding + runtime: what the verdict compares
    fits: bool
    headroom_bytes: int
    max_batch: int | None  # None: not searched
    chosen: bool = False


@dataclass
class PeakTensor:
    bytes: int
    category: str
    layer_id: str | None
    layer_name: str
    tensor: str
    rule: str


@dataclass
class ReportContent:
    design_name: str
    layer_count: int
    settings: Settings
    estimate: Report  # under the chosen device (or the backend's semantics without one)
    device: DeviceVerdict | None  # the chosen device
    devices: list[DeviceVerdict]  # every shipped profile (the chosen one marked)
    layers: list[LayerRow]  # the same rows as the per-layer CSV and JSON
    at_peak: dict  # category -> bytes, CATS order
    peak_tensors: list[PeakTensor]  # largest first, at most TOP_TENSORS
    rest_count: int  # tensors left out of peak_tensors
    rest_bytes: int
    peak_layer_name: str
    timeline_svg: str
    graph_png: bytes | None = None  # the canvas picture, when a Qt renderer supplied one
    timeline_png: bytes | None = None  # timeline_svg rasterised (Markdown viewers refuse SVG data URIs)
    suggestions: list[str] | None = None  # None: no fit advisor in the engine yet; nothing is shown
    warnings: list[str] = field(default_factory=list)
    generated: str = ""
    version: str = ""
    libraries: str = ""  # the library versions the graph follows (model/library_versions.py)
    verified: str = ""  # checked against PyTorch, or estimated from rules (engine/verified.py)

    @property
    def params(self) -> int:
        return self.estimate.params


def _verdict(design: Design, settings: Settings, dev: Device, an, chosen: bool, max_batch: bool,
             rep: Report | None = None) -> DeviceVerdict:
    rep = rep or estimate(design, settings, device=dev, analysis=an, max_batch=max_batch)
    d = rep.device
    return DeviceVerdict(dev.id, dev.name, dev.kind, d["capacity_bytes"], d["runtime_overhead_bytes"],
                         rep.peak_bytes, rep.device_peak_bytes, d["fits"], d["headroom_bytes"], rep.max_batch,
                         chosen)


def collect(design: Design, settings: Settings | None = None, device: Device | None = None, *,
            graph_png: bytes | None = None, devices: list[Device] | None = None, max_batch: bool = True,
            now: _dt.datetime | None = None) -> ReportContent:
    """Estimate the design under ``settings`` on ``device`` (and on every profile of ``devices``,
    the shipped ones by default) and gather what the report shows. Raises ReportError when the
    design has errors."""
    from memdesigner import __version__

    settings = settings or Settings()
    if device is not None and settings.backend != device.kind:
        settings = settings.with_(backend=device.kind)
    from memdesigner.engine.verified import verdict
    from memdesigner.model.library_versions import describe

    libraries = describe(getattr(design, "library_versions", None) or {})
    checked = design
    design = expand(design)  # the flat network (model/blocks.py)
    an = analyze(design)
    rep = estimate(design, settings, device=device, analysis=an, max_batch=max_batch and device is not None)
    if rep.issues:
        more = f" (and {len(rep.issues) - 1} more)" if len(rep.issues) > 1 else ""
        raise ReportError(f"{rep.issues[0]}{more}")
    chosen = _verdict(design, settings, device, an, True, max_batch, rep) if device is not None else None
    table = []
    for dev in (shipped_devices() if devices is None else devices):
        if chosen is not None and dev.id == chosen.id:
            table.append(chosen)
        else:
            table.append(_verdict(design, settings, dev, an, False, max_batch))
    rows = explain_peak(design, settings, device=device)
    tensors = [PeakTensor(r["bytes"], r["category"], r["layer"], r["name"], r["tensor"], r["why"]) for r in rows]
    peak_node = design.nodes.get(rep.peak_layer) if rep.peak_layer else None
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return ReportContent(
        design_name=design.name or "untitled", layer_count=len(rep.layers), settings=settings, estimate=rep,
        device=chosen, devices=table, layers=list(rep.layers), at_peak={k: rep.at_peak.get(k, 0) for k in CATS},
        peak_tensors=tensors[:TOP_TENSORS], rest_count=max(0, len(tensors) - TOP_TENSORS),
        rest_bytes=sum(t.bytes for t in tensors[TOP_TENSORS:]),
        peak_layer_name=peak_node.name if peak_node else (rep.peak_layer or ""),
        timeline_svg=encodable(timeline_svg(rep, design, width=1080)), graph_png=graph_png,
        suggestions=suggestions_for(design, settings, device, rep), warnings=list(rep.warnings),
        generated=now.strftime("%Y-%m-%d %H:%M UTC"), version=__version__, libraries=libraries,
        verified=verdict(checked, settings, rep.peak_bytes)["line"],
    )


def settings_rows(s: Settings) -> list[tuple[str, str]]:
    """The run settings as (label, value) lines, in words."""
    rows = [("Mode", "training: one step (forward, loss, backward, optimizer step)" if s.training
             else "inference: forward under torch.no_grad()"),
            ("Batch size", f"{s.batch:,}")]
    if s.training:
        rows.append(("Optimizer", s.optimizer))
        if s.optimizer != "none":
            rows.append(("Optimizer path", "foreach (multi-tensor)" if s.use_foreach else "per-parameter loop"))
    prec = s.dtype + (f" weights, autocast to {s.amp_dtype} (AMP)" if s.amp else "")
    rows.append(("Precision", prec))
    if s.training:
        rows.append(("Activation checkpointing", "on (√n segments)" if s.checkpointing else "off"))
    rows.append(("Semantics", f"{s.backend} (eager PyTorch on {s.backend.upper() if s.backend != 'cpu' else 'CPU'})"))
    return rows

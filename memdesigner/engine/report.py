"""The estimate's result: numbers people read and scripts parse (bytes as integers)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from memdesigner.engine.simulate import CATS
from memdesigner.io.atomic_write import write_atomic
from memdesigner.text import encodable

# the per-layer export's columns: the window's CSV, the reports and scripts read the same rows
CSV_COLUMNS = ("id", "name", "type", "output_shape", "params", "weight_bytes", "activation_bytes", "kept_bytes",
               "flops")


def shape_text(shape) -> str:
    """[1, 16, 30, 30] -> '1×16×30×30'; several outputs are joined with ', '."""
    if shape and isinstance(shape[0], (list, tuple)):
        return ", ".join(shape_text(x) for x in shape)
    return "×".join(map(str, shape))


@dataclass
class LayerRow:
    id: str
    name: str
    type: str
    output_shape: list  # with batch
    params: int
    param_bytes: int
    activation_bytes: int  # new output storages this op creates
    kept_bytes: int  # extra tensors it keeps for backward (masks, indices, statistics)
    flops: int  # forward, whole batch
    non_trainable: int = 0  # float buffers (BatchNorm's moving statistics): Keras counts them per layer
    not_modelled: str = ""  # why this layer's memory is a guess (a Generic op without a rule); "" when modelled

    def to_dict(self) -> dict:
        return {
            "id": self.id, "name": self.name, "type": self.type, "output_shape": self.output_shape,
            "params": self.params, "non_trainable": self.non_trainable, "param_bytes": self.param_bytes, "activation_bytes": self.activation_bytes,
            "kept_bytes": self.kept_bytes, "flops": self.flops,
        }

    def csv_values(self) -> list:
        """One row of the per-layer CSV, in CSV_COLUMNS order (exact integers)."""
        return [encodable(self.id), encodable(self.name), self.type, shape_text(self.output_shape), self.params,
                self.param_bytes,
                self.activation_bytes, self.kept_bytes, self.flops]


def write_layers_csv(rows, path) -> None:
    """The per-layer table as CSV, rows in the order given (the window passes its sorted view)."""
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for row in rows:
        w.writerow(row.csv_values())
    write_atomic(path, buf.getvalue())  # a full disk leaves the old table whole


@dataclass
class Report:
    settings: dict
    params: int
    param_bytes: int
    buffer_bytes: int
    flops: int
    peak_bytes: int
    device_peak_bytes: int
    phase_peaks: dict
    at_peak: dict
    peak_phase: str | None
    peak_layer: str | None
    lower_bound_bytes: int
    layers_fn: object  # () -> list[LayerRow]; rows are built when first read (the GUI's table, JSON)
    timeline: list  # list[Event]
    issues: list  # list[Issue]
    warnings: list = field(default_factory=list)
    device: dict | None = None
    max_batch: int | None = None
    runtime_overhead_bytes: int = 0
    recompute_flops: int = 0  # forward FLOPs that activation checkpointing runs again in backward
    non_trainable_params: int = 0  # float buffers: Keras's "Non-trainable params" (moving mean/variance)
    per_rank: list = field(default_factory=list)  # [{rank, peak_bytes, phase_peaks, at_peak}] (engine/per_rank.py)
    unruled_ops: list = field(default_factory=list)  # "id (op)" of Generic nodes with a guessed rule
    traced_ops: list = field(default_factory=list)  # "id (op)" of Generic nodes characterised by PyTorch
    # per block instance: memory per repetition and in total (model/blocks.py instance_totals)
    blocks: dict = field(default_factory=dict)
    generate: dict | None = None  # generate mode: prompt, new tokens, cache (engine/generate.py)
    trainable_params: int | None = None  # parameters that require grad (None: all of them train)
    finetune: dict | None = None  # what engine/finetune.py did: adapters, frozen nodes, counts
    paged_optimizer_bytes: int = 0  # paged optimizer state in unified memory (not in peak_bytes)
    # rank -> its timeline (list[Event]) where ranks differ (pipeline stages, zero shards): the
    # window's rank picker; ``timeline`` is the busiest rank's. Not in to_dict (per_rank has the peaks)
    rank_timelines: dict = field(default_factory=dict)
    sequence_length: int | None = None  # token models: the length estimated (settings' seq_len or the design's)
    # the run's storages and peaks (engine/alloc_log.py CheckPoint): the largest batch checks its
    # one-probe lines against them instead of running the step again. Not in to_dict
    batch_check: object = field(default=None, repr=False, compare=False)

    _layers: list | None = None

    @property
    def layers(self) -> list:
        if self._layers is None:
            self._layers = self.layers_fn()
        return self._layers

    @property
    def total_params(self) -> int:
        """Trainable + non-trainable: Keras's "Total params"."""
        return self.params + self.non_trainable_params

    @property
    def ok(self) -> bool:
        return not self.issues

    @property
    def rounding_bytes(self) -> int:
        """What the caching allocator's block rounding adds on top of the tensors at the peak."""
        return self.device_peak_bytes - self.peak_bytes - (self.runtime_overhead_bytes if self.device else 0)

    @property
    def peak_event(self) -> int | None:
        """Index of the timeline event at the peak (the engine puts every peak-raising moment in
        the timeline, so one event's bytes equal peak_bytes); None for an empty timeline."""
        for i, e in enumerate(self.timeline):
            if e.bytes == self.peak_bytes:
                return i
        return None

    @property
    def not_modelled_note(self) -> str:
        """One line for the verdict when some layers are Generic ops without a memory rule (an
        importer's unknown layer): their memory is a guess, so no verdict is a plain "fits"."""
        n = len(self.unruled_ops)
        if not n:
            return ""
        return f"{n} layer{'s' if n != 1 else ''} not modelled (Generic, no memory rule): the estimate is a guess there"

    @property
    def fits(self) -> bool | None:
        return None if self.device is None else self.device["fits"]

    def to_dict(self) -> dict:
        d = {
            "settings": self.settings,
            "params": self.params,
            "non_trainable_params": self.non_trainable_params,
            "total_params": self.total_params,
            "param_bytes": self.param_bytes,
            "buffer_bytes": self.buffer_bytes,
            "flops": self.flops,
            "peak_bytes": self.peak_bytes,
            "device_peak_bytes": self.device_peak_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "phase_peaks": dict(self.phase_peaks),
            "at_peak": dict(self.at_peak),
            "peak_phase": self.peak_phase,
            "peak_layer": self.peak_layer,
            "layers": [r.to_dict() for r in self.layers],
            "timeline": [
                {"phase": e.phase, "layer": e.node, "label": e.label, "bytes": e.bytes,
                 "by_category": dict(zip(CATS, e.by_category))}
                for e in self.timeline
            ],
            "issues": [{"node": i.node_id, "field": i.field, "message": i.message} for i in self.issues],
            "warnings": list(self.warnings),
            "recompute_flops": self.recompute_flops,
            "per_rank": [dict(r, phase_peaks=dict(r["phase_peaks"]), at_peak=dict(r["at_peak"])) for r in self.per_rank],
            "unruled_ops": list(self.unruled_ops),
            "traced_ops": list(self.traced_ops),
        }
        if self.device is not None:
            d["device"] = dict(self.device)
        if self.max_batch is not None:
            d["max_batch"] = self.max_batch
        if self.sequence_length is not None:
            d["sequence_length"] = self.sequence_length
        if self.blocks:
            d["blocks"] = {k: dict(v) for k, v in self.blocks.items()}
        if self.generate is not None:
            d["generate"] = dict(self.generate)
        if self.trainable_params is not None:
            d["trainable_params"] = self.trainable_params
        if self.finetune is not None:
            d["finetune"] = dict(self.finetune)
        if self.paged_optimizer_bytes:
            d["paged_optimizer_bytes"] = self.paged_optimizer_bytes
        return d

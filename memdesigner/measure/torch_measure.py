"""Measure a design with real PyTorch: build the exported module and run one step the way
shared/truth/measure.py does (two steps; the second, steady one is reported with the first).

    from memdesigner.measure.torch_measure import measure_design
    res = measure_design(design, Settings(mode="train", batch=8, optimizer="adam", backend="cpu"))
    res["peak_bytes"], res["phase_peaks"], res["timeline"]

When the truth harness is found (MEMDESIGNER_TRUTH_DIR, or ../shared/truth next to the
repository) its ``measure(methods="a")`` is used; otherwise a self-contained TorchDispatchMode
storage tracker (the same method, simplified) runs the step. torch is imported lazily.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from memdesigner.importers._torch_step import ENGINE_PHASE  # noqa: F401 - where it was
from memdesigner.importers._torch_step import builtin_measure as _builtin_measure
from memdesigner.importers._torch_step import make_tracker as _make_tracker  # noqa: F401

OPT_NAMES = {"sgd": "sgd", "momentum": "sgd_momentum", "adam": "adam", "adamw": "adamw", "none": "sgd"}
REPO = Path(__file__).resolve().parent.parent.parent


def truth_dir() -> Path | None:
    """The shared/truth folder, if there is one."""
    env = os.environ.get("MEMDESIGNER_TRUTH_DIR")
    cands = [Path(env)] if env else []
    cands.append((REPO / ".." / "shared" / "truth").resolve())
    for c in cands:
        if (c / "measure.py").exists():
            return c
    return None


def _load_truth_measure():
    d = truth_dir()
    if d is None:
        return None
    name = "_memdesigner_truth_measure"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, str(d / "measure.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception:  # noqa: BLE001 - fall back to the built-in tracker
        sys.modules.pop(name, None)
        return None
    return mod


def factory_from_design(design, tags=None):
    """A zoo-style factory ``() -> (module, input_shape)`` built from the exported code. ``tags``
    (a list, filled in): the LayerTags (measure/layer_tags.py) hooked into every model it makes."""
    from memdesigner.exporters.torch_code import to_python
    from memdesigner.measure.layer_tags import LayerTags

    layers: dict = {}
    code = to_python(design, layers=layers)
    ns: dict = {"__name__": "_memdesigner_exported"}
    exec(compile(code, f"<memdesigner export of {design.name}>", "exec"), ns)  # noqa: S102 - our own code
    if tags is None:
        return ns["make"]
    lt = LayerTags(layers)
    tags.append(lt)

    def make():
        model, shape = ns["make"]()
        lt.install(model)
        return model, shape

    return make


SNAPSHOT_MAX_ENTRIES = 200_000  # trace events kept by the allocator's ring buffer (a few KB each)
SNAPSHOT_UNAVAILABLE = "memory snapshots need CUDA: this run was on {device}"


class CudaSnapshotRecorder:
    """The only code that touches PyTorch's (private) snapshot API: record the caching
    allocator's history around the run, then take ``torch.cuda.memory._snapshot()`` (the dict
    ``_dump_snapshot()`` pickles; memdesigner.snapshot reads it)."""

    def __init__(self, torch, max_entries: int = SNAPSHOT_MAX_ENTRIES):
        self.memory = torch.cuda.memory
        self.max_entries = max_entries

    def start(self) -> None:
        self.memory._record_memory_history(max_entries=self.max_entries)

    def stop(self) -> dict:
        try:
            return self.memory._snapshot()
        finally:
            self.memory._record_memory_history(enabled=None)


def snapshot_recorder(torch, device: str):
    """A recorder for a CUDA run; None elsewhere (CPU and MPS have no allocator history)."""
    if device != "cuda":
        return None
    return CudaSnapshotRecorder(torch)


def save_snapshot(result: dict, path) -> None:
    """Write a measurement's snapshot as ``_dump_snapshot()`` does (opens in memory_viz)."""
    import pickle

    if not result.get("snapshot"):
        raise ValueError(result.get("snapshot_note") or "this measurement has no memory snapshot")
    from memdesigner.io.atomic_write import write_atomic

    write_atomic(path, pickle.dumps(result["snapshot"], protocol=4))


def measure_design(design, settings=None, *, method: str = "auto", steps: int = 2, seed: int = 0) -> dict:
    """Run one real step of ``design`` and return what the storage tracker saw.

    Returns ``{"peak_bytes", "phase_peaks": {forward, backward, optimizer_step}, "timeline": [bytes
    after each op], "timeline_phases": [the engine phase of each entry, or None], "timeline_layers":
    [(the forward or backward, the design's node ids) the entry happened in, or None],
    "device", "method", "record", "snapshot", "snapshot_note"}``. phase_peaks follow
    the engine's phases: the forward includes the loss. On CUDA ``snapshot`` is PyTorch's memory
    snapshot of the whole run (allocator history included); elsewhere it is None and
    ``snapshot_note`` says why. method: "auto" (the truth harness if found, else built-in),
    "truth" or "builtin".
    """
    import torch

    from memdesigner.engine.settings import Settings

    s = settings or Settings(backend="cpu")
    device = "cuda" if s.backend == "cuda" and torch.cuda.is_available() else "cpu"
    recorder = snapshot_recorder(torch, device)
    if recorder is not None:
        recorder.start()
        try:
            res = _measure(design, s, device, method, steps, seed)
        finally:
            snap = recorder.stop()
        res["snapshot"], res["snapshot_note"] = snap, None
    else:
        res = _measure(design, s, device, method, steps, seed)
        res["snapshot"], res["snapshot_note"] = None, SNAPSHOT_UNAVAILABLE.format(device=device)
    return res


def _measure(design, s, device: str, method: str, steps: int, seed: int) -> dict:
    tags: list = []
    factory = factory_from_design(design, tags)
    opt = OPT_NAMES.get(s.optimizer, s.optimizer)
    truth = _load_truth_measure() if method in ("auto", "truth") else None
    if method == "truth" and truth is None:
        raise RuntimeError("the truth harness (shared/truth/measure.py) was not found")
    if truth is not None:
        from memdesigner.measure.layer_tags import tagged_tracker_class

        base = truth.DispatchStorageTracker
        tagged = truth.DispatchStorageTracker = tagged_tracker_class(base, tags[0])
        try:
            rec = truth.measure(factory, batch=s.batch, mode=s.mode, optimizer=opt, dtype=s.dtype, device=device,
                                steps=steps, seed=seed, methods="a", foreach=s.foreach, timeline=True, amp=s.amp)
        finally:
            truth.DispatchStorageTracker = base
        a = rec["method_a"]
        steady = a["steady"]
        timeline = a.get("timeline") or []
        layer_of = tagged.last.tags if tagged.last is not None and len(tagged.last.tags) == len(timeline) else None
        steady_tl = [(ph[1], cur, layer_of[i] if layer_of else None)
                     for i, (ph, _what, _delta, cur) in enumerate(timeline) if ph is not None and ph[0] == steps]
        return {"peak_bytes": a["peak_overall"], "phase_peaks": _phases(steady, s.mode),
                "timeline": [cur for _, cur, _ in steady_tl],
                "timeline_phases": [ENGINE_PHASE.get(ph) for ph, _, _ in steady_tl],
                "timeline_layers": [lay for _, _, lay in steady_tl] if layer_of else None,
                "device": device, "method": "truth", "record": rec}
    res = _builtin_measure(factory, s, device, opt, steps, seed, tags[0])
    res["method"] = "builtin"
    return res


def _phases(steady: dict, mode: str) -> dict:
    if mode != "train":
        return {"forward": steady.get("peak_forward", 0)}
    return {"forward": max(steady.get("peak_forward", 0), steady.get("peak_loss", 0)),
            "backward": steady.get("peak_backward", 0), "optimizer_step": steady.get("peak_step", 0)}


__all__ = ["CudaSnapshotRecorder", "factory_from_design", "measure_design", "save_snapshot", "snapshot_recorder",
           "truth_dir"]

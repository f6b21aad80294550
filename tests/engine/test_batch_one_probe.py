"""The largest batch in one pass (engine/batch_curve.py, engine/alloc_log.py): one logged run at
batch M, the estimate's own run as the check, exact peaks replayed from the log. The answers are
the three-probe curve's, to the byte; a rule that is not affine falls back to it."""

import dataclasses
from pathlib import Path

import pytest

import memdesigner
from memdesigner.engine import batch_curve as bc
from memdesigner.engine.batch_sweep import batch_sweep
from memdesigner.engine.devices import get_device
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import Simulation
from memdesigner.model import registry
from memdesigner.model.analysis import analyze
from memdesigner.model.oprules import T

EX = Path(__file__).resolve().parents[2] / "resources" / "examples"
EXAMPLES = sorted(p.stem for p in EX.glob("*.json"))
GRID = [dict(mode="inference", optimizer="none"), dict(mode="inference", optimizer="none", batch=7),
        dict(mode="train", optimizer="sgd"), dict(mode="train", optimizer="adamw", batch=3),
        dict(mode="train", optimizer="adafactor"), dict(mode="train", optimizer="adam", amp=True),
        dict(mode="train", optimizer="adam", checkpointing=True, batch=5),
        dict(mode="train", optimizer="adam", gpus=3, strategy="zero3"),
        dict(mode="train", optimizer="adam", tensor_parallel=2, batch=2)]


def _three_probes(monkeypatch, fn):
    """``fn()`` with the one-probe curve switched off: the three runs at batch 1, 2, 7."""
    with monkeypatch.context() as m:
        m.setattr(bc, "_one_probe", lambda *a: None)
        return fn()


def _points(sw):
    return None if sw is None else (sw.batches, sw.peaks, sw.max_batch)


@pytest.mark.parametrize("name", EXAMPLES)
def test_one_probe_answers_are_the_three_probe_answers(name, monkeypatch):
    """Every example over modes, optimizers, AMP, checkpointing, zero3 and tensor parallel, on a
    CUDA device (512 B rounding) and a CPU one: the window's sweep (batches, exact and envelope
    peaks, largest batch) and ``estimate --max-batch`` are the same with the estimate's run as the
    check, with a run of its own, and with the three probes."""
    design = memdesigner.load_design(EX / f"{name}.json")
    an = analyze(design)
    for kw in GRID:
        for dev_id in ("t4", "cpu-32gb"):
            dev = get_device(dev_id)
            s = Settings(backend=dev.kind, **kw)
            rep = memdesigner.estimate(design, s, device=dev, analysis=an, max_batch=True)
            old = _three_probes(monkeypatch, lambda s=s, dev=dev: batch_sweep(design, s, dev, an))
            want = _points(old)
            assert _points(batch_sweep(design, s, dev, an, report=rep)) == want, (kw, dev_id)
            assert _points(batch_sweep(design, s, dev, an)) == want, (kw, dev_id)
            if old is not None:
                assert rep.max_batch == old.max_batch, (kw, dev_id)


def test_lora_on_llama_is_the_three_probe_answer(monkeypatch):
    """LoRA (frozen bf16 base, adapters) and QLoRA on Llama-3-8B at 64 tokens, on a 24 GB card."""
    from memdesigner.importers.hf_config import import_file

    design = import_file(EX / "hf" / "llama-3-8b.json", seq_len=64)
    dev = get_device("rtx4090")
    for kw in (dict(lora_r=8, checkpointing=True), dict(lora_r=8, base_bits=4, batch=2)):
        s = Settings(mode="train", optimizer="adamw", dtype="bf16", backend="cuda", **kw)
        rep = memdesigner.estimate(design, s, device=dev, max_batch=True)
        old = _three_probes(monkeypatch, lambda s=s: batch_sweep(design, s, dev))
        assert _points(batch_sweep(design, s, dev, report=rep)) == _points(old)
        assert rep.max_batch == old.max_batch > 0


@pytest.mark.parametrize("name,kw", [("resnet18", dict(mode="train", optimizer="adam", batch=4)),
                                     ("transformer_encoder", dict(mode="train", optimizer="adam", checkpointing=True)),
                                     ("seed_keras_audio", dict(mode="train", optimizer="adam", amp=True, batch=3)),
                                     ("mobilenet_v2", dict(mode="train", optimizer="adamw", checkpointing=True))])
def test_replayed_peaks_are_simulated_peaks(name, kw):
    """The log replays the exact rounded peak at any batch: every inline free and checked moment
    of the passes is in it (fan-in gradient sums, checkpoint reruns, AMP casts). MobileNetV2 with
    checkpointing has a storage of s·batch - 512 B: read back with its negative constant."""
    design = memdesigner.load_design(EX / f"{name}.json")
    an = analyze(design)
    dev = get_device("t4")
    s = Settings(backend="cuda", **kw)
    curve = bc.batch_curve(design, s, dev, an)
    assert curve.replay is not None
    for b in (2, 3, 17, 250, 1001):
        sim = Simulation(design, an, s.with_(batch=b), 512).run()
        assert curve.replay.peaks(b) == (sim.mem.peak, sim.mem.rpeak)
        assert curve.device_peak(b) == sim.mem.rpeak + dev.runtime_overhead_bytes


def test_the_estimates_run_is_the_check():
    """With the estimate's report the curve costs one run (at batch M); without it, two."""
    design = memdesigner.load_design(EX / "resnet18.json")
    dev = get_device("rtx3080-10gb")
    s = Settings(mode="train", optimizer="adam", batch=8, backend="cuda")
    rep = memdesigner.estimate(design, s, device=dev)
    with_check = bc.batch_curve(design, s, dev, check=rep.batch_check)
    alone = bc.batch_curve(design, s, dev)
    assert (with_check.runs, alone.runs) == (1, 2)
    best = with_check.largest_batch(dev.memory_bytes)
    assert best == alone.largest_batch(dev.memory_bytes) == 454 and with_check.runs == 1
    assert memdesigner.estimate(design, s.with_(batch=best), device=dev).device["fits"]
    assert not memdesigner.estimate(design, s.with_(batch=best + 1), device=dev).device["fits"]


def test_batch_one_is_asked_exactly_where_it_differs(monkeypatch):
    """An LSTM's time-major input copy exists only for batch > 1 (without grad): checked at M and
    batch 7 the lines miss batch 1, so the sweep's point there is simulated (35,888,168 B live, not
    the lines' 36,019,240), as the three probes found it."""
    design = memdesigner.load_design(EX / "lstm_classifier.json")
    an = analyze(design)
    dev = get_device("t4")
    s = Settings(mode="inference", optimizer="none", batch=7, backend="cuda")
    curve = bc.batch_curve(design, s, dev, an)
    assert curve.replay is not None and not curve.affine and curve.one is False
    assert curve.raw_peak(1) == Simulation(design, an, s.with_(batch=1), 1).run().mem.peak == 35_888_168
    assert curve.replay.peaks(1)[0] == 36_019_240
    old = _three_probes(monkeypatch, lambda: batch_sweep(design, s, dev, an))
    assert _points(batch_sweep(design, s, dev, an)) == _points(old)


def test_a_rule_that_is_not_affine_falls_back(monkeypatch):
    """A workspace of ceil(batch / 8) blocks (flagged affine) reads back at M as some line, but the
    run at the user's batch disagrees: the curve falls back to the three probes."""
    get = registry.get

    def ceil_workspace(m, rule):
        op = rule(m)
        return dataclasses.replace(op, temps=list(op.temps) + [T(128 * -(-m.batch // 8), "float32", "ws")])

    def patched(name):
        lt = get(name)
        if name != "ReLU":
            return lt
        return dataclasses.replace(lt, memory=lambda m, rule=lt.memory: ceil_workspace(m, rule))

    from memdesigner.engine.compiled_rule import RULES

    RULES.clear()
    monkeypatch.setattr(registry, "get", patched)
    try:
        design = memdesigner.load_design(EX / "resnet18.json")
        dev = get_device("t4")
        s = Settings(mode="train", optimizer="sgd", batch=4, backend="cuda")
        curve = bc.batch_curve(design, s, dev)
        assert curve.replay is None
        old = _three_probes(monkeypatch, lambda: bc.batch_curve(design, s, dev))
        assert curve.largest_batch(dev.memory_bytes) == old.largest_batch(dev.memory_bytes)
    finally:
        RULES.clear()

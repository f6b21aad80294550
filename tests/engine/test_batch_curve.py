"""The batch curve: peak vs batch from three runs, exact where every size is a + b·batch."""

from pathlib import Path

import pytest

import memdesigner
from memdesigner.engine.batch_curve import batch_curve
from memdesigner.engine.devices import get_device
from memdesigner.engine.search import largest_fitting
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import Simulation
from memdesigner.model.analysis import analyze

EX = Path(__file__).resolve().parents[2] / "resources" / "examples"
CASES = [
    ("resnet18", dict(mode="train", optimizer="adam"), "rtx3080-10gb"),
    ("mobilenet_v2", dict(mode="train", optimizer="sgd", amp=True), "jetson-orin-nano-8gb"),
    ("transformer_encoder", dict(mode="train", optimizer="adam", checkpointing=True), "t4"),
    ("vgg16", dict(mode="inference", optimizer="none"), "rtx3080-10gb"),
    ("lstm_classifier", dict(mode="train", optimizer="adam"), "jetson-orin-nano-8gb"),  # not affine
    ("seed_keras_audio", dict(mode="train", optimizer="sgd"), "h200"),
]


@pytest.mark.parametrize("name,kw,dev_id", CASES, ids=[c[0] for c in CASES])
def test_largest_batch_equals_a_full_search(name, kw, dev_id):
    design = memdesigner.load_design(EX / f"{name}.json")
    dev = get_device(dev_id)
    s = Settings(backend=dev.kind, **kw)
    curve = batch_curve(design, s, dev)
    best = curve.largest_batch(dev.memory_bytes)
    # the reference: doubling + bisection over exact simulations
    assert best == largest_fitting(lambda b: curve.device_peak(b) <= dev.memory_bytes, 1, 1 << 24)
    assert best > 0
    assert curve.device_peak(best) <= dev.memory_bytes < curve.device_peak(best + 1)


@pytest.mark.parametrize("name,kw,dev_id", CASES[:4], ids=[c[0] for c in CASES[:4]])
def test_envelope_is_the_simulated_peak(name, kw, dev_id):
    design = memdesigner.load_design(EX / f"{name}.json")
    an = analyze(design)
    dev = get_device(dev_id)
    s = Settings(backend=dev.kind, **kw)
    curve = batch_curve(design, s, dev, an)
    assert curve.affine
    for b in (3, 10, 33, 250):
        raw = Simulation(design, an, s.with_(batch=b), 1).run().mem.peak
        assert curve.raw_peak(b) == raw
        lo, hi = curve.device_peak_bounds(b)
        assert lo <= curve.device_peak(b) <= hi


def test_one_pass_not_a_search():
    """Three runs build the curve; the bounds leave one or two exact runs for the largest batch."""
    design = memdesigner.load_design(EX / "resnet18.json")
    dev = get_device("a100-80gb")
    curve = batch_curve(design, Settings(mode="train", optimizer="adam"), dev)
    curve.largest_batch(dev.memory_bytes)
    assert curve.runs <= 3 + 3


def test_page_rounded_lstm_workspace_is_not_fitted_as_a_line():
    design = memdesigner.load_design(EX / "lstm_classifier.json")
    curve = batch_curve(design, Settings(mode="train", optimizer="adam"), get_device("t4"))
    assert not curve.affine


def test_largest_batch_is_not_capped_where_the_curve_is_affine():
    """seed_fc inference on an H200: 31,284,810 samples fit (the old search stopped at 2^24)."""
    design = memdesigner.load_design(EX / "seed_fc.json")
    rep = memdesigner.estimate(design, mode="inference", device="h200", max_batch=True)
    assert rep.max_batch == 31_284_810
    over = memdesigner.estimate(design, mode="inference", batch=rep.max_batch + 1, device="h200")
    assert not over.device["fits"]


def test_an_empty_design_has_a_flat_curve():
    from memdesigner.model.design import Design

    curve = batch_curve(Design("empty"), Settings(mode="inference"), get_device("t4"))
    assert curve.raw_peak(64) == 0 and curve.device_peak_bounds(64)[0] == get_device("t4").runtime_overhead_bytes


@pytest.mark.parametrize("last,lo,limit,want", [(5, 1, 100, 5), (6, 1, 6, 6), (7, 1, 6, 6), (0, 1, 100, 0),
                                                (9, 4, 1000, 9), (3, 4, 1000, 3)])
def test_largest_fitting_searches_up_to_the_limit_itself(last, lo, limit, want):
    """Doubling then bisection: the answer is exact right up to the limit (1, 2, 4 fit and 8 is
    past a limit of 6: 5 and 6 are still tried), and lo - 1 when nothing fits."""
    calls = []

    def fits(n):
        calls.append(n)
        return n <= last

    assert largest_fitting(fits, lo, limit) == want
    assert len(calls) <= 2 * limit.bit_length() + 2


def test_an_exact_peak_is_replayed_not_simulated():
    """The window's sweep asks for the batch, the largest batch and the one after it: the one-probe
    log replays each exactly (allocator rounding included), with no new run; twice, from the memo."""
    design = memdesigner.load_design(EX / "resnet18.json")
    dev = get_device("t4")
    curve = batch_curve(design, Settings(mode="train", optimizer="adam"), dev)
    assert curve.replay is not None
    runs = curve.runs
    first = curve.device_peak(5)
    assert curve.device_peak(5) == first and curve.runs == runs
    assert first == memdesigner.estimate(design, mode="train", optimizer="adam", batch=5, device=dev).device_peak_bytes


def test_a_llama_design_is_affine_in_the_batch():
    """RotaryEmbedding's tables are shared by the batch (a constant: a + 0·batch), so a Llama
    design's curve holds: the largest batch comes from the lines, not from a search."""
    from memdesigner.importers.hf_config import import_file
    from memdesigner.model.blocks import for_engine

    design, an = for_engine(import_file(EX / "hf" / "llama-3-8b.json", seq_len=256), None)
    dev = get_device("h100-80gb")
    s = Settings(mode="train", optimizer="adamw", dtype="bf16", backend="cuda")
    curve = batch_curve(design, s, dev, an)
    assert curve.affine
    for b in (5, 12):
        assert curve.raw_peak(b) == Simulation(design, an, s.with_(batch=b), 1).run().mem.peak
    best = curve.largest_batch(dev.memory_bytes)
    assert curve.device_peak(best) <= dev.memory_bytes < curve.device_peak(best + 1)

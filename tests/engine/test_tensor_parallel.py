"""Tensor parallel per rank (memdesigner/engine/tensor_parallel.py): the colwise / rowwise rule,
the sharded shapes and DTensor's collective buffers, derived by hand and measured with real
``parallelize_module`` (DTensor on gloo, benchmarks/distributed.py)."""

import json
import sys

import pytest
from helpers import EXAMPLES, ROOT, TRUTH

import memdesigner
from memdesigner.cli import main
from memdesigner.engine import tensor_parallel
from memdesigner.engine.settings import Settings
from memdesigner.io.design_file import load_design
from memdesigner.model.analysis import analyze
from memdesigner.model.design import Design

TRUTH_JSON = ROOT / "benchmarks" / "distributed_truth.json"


@pytest.fixture(scope="module")
def fc():
    return load_design(EXAMPLES / "seed_fc.json")


def _est(design, **kw):
    return memdesigner.estimate(design, mode="train", batch=4, backend="cpu", **kw)


def test_plan_pairs_colwise_with_rowwise_and_keeps_the_head_replicated(fc):
    # fc1 1000->100 colwise (its input is replicated), fc2 rowwise (its input is fc1's shard after a
    # ReLU), fc3 / fc4 the same; fc5 (100->10) would shard the model's output: replicated
    plan = tensor_parallel.make_plan(fc, analyze(fc), 2)
    assert plan.styles == {"fc1": "colwise", "fc2": "rowwise", "fc3": "colwise", "fc4": "rowwise"}


def test_a_shard_that_reaches_a_norm_stays_replicated():
    d = Design()
    d.add_node("Input", {"shape": (16, 64)}, id="x")
    d.add_node("Linear", {"out_features": 128}, id="up")
    d.add_node("LayerNorm", {}, id="norm")  # normalises over the sharded features: needs them all
    d.add_node("Linear", {"out_features": 64}, id="down")
    for a, b in (("x", "up"), ("up", "norm"), ("norm", "down")):
        d.add_edge(a, b)
    assert tensor_parallel.make_plan(d, analyze(d), 2).styles == {}
    rep = memdesigner.estimate(d, mode="train", batch=2, backend="cpu", tensor_parallel=2)
    assert rep.peak_bytes == memdesigner.estimate(d, mode="train", batch=2, backend="cpu").peak_bytes
    assert any("no colwise / rowwise" in w for w in rep.warnings)


def test_shards_and_the_forward_all_reduce_by_hand(fc):
    """tp 2, SGD, batch 4. Parameters per rank: fc1 50x1000 + 50, fc2 100x50 + 100 (rowwise: the
    bias is replicated), fc3 50x100 + 50, fc4 100x50 + 100, fc5 100x10 + 10 -> 66,310 x 4 B.
    Forward peak at fc4's all-reduce: relu1 (4x50), relu2 (4x100), relu3 (4x50), fc4's partial sum
    (4x100) and the all-reduce's output (4x100): 6,400 B over the weights and the input (16,000 B)."""
    rep = _est(fc, optimizer="sgd", tensor_parallel=2)
    assert rep.param_bytes == 4 * 66_310 == 265_240
    assert rep.phase_peaks["forward"] == 265_240 + 16_000 + 6_400
    # backward of fc3 (colwise, its input needs a gradient): weights and input (281,240 B), the
    # gradients of fc5 and fc4 (4,040 + 20,400), out, loss and ones_like (168), relu1 and relu2 (saved:
    # 800 + 1,600), fc3's incoming gradient (800) and its dX (1,600, partial), dW and db (20,200) =
    # 330,848 B; then the incoming gradient dies and dX's all-reduced copy (1,600) is made
    fc3 = next(e for e in rep.timeline if e.phase == "backward" and e.node == "fc3")
    assert fc3.bytes == 330_848 - 800 + 1_600
    assert [r["rank"] for r in rep.per_rank] == [0, 1]
    assert {r["peak_bytes"] for r in rep.per_rank} == {rep.peak_bytes}


def test_sequence_parallel_collectives_by_hand():
    """x (8 tokens x 16) -> LayerNorm -> Linear 32 -> ReLU -> Linear 16 -> + x; tp 2 with sequence
    parallel, SGD, batch 1. Weights per rank: LayerNorm 32 + up 16x16 + 16 + down 16x16 + 16 floats
    (2,304 B). Each rank holds 4 of the 8 tokens: x and the norm's output 256 B, its mean and rstd
    32 B. The all-gather: its collective buffer and the gathered cat, 512 B each (3,872 B). The
    reduce-scatter after down: the gathered input (kept by up) 512, up's shard (8 tokens x 16
    of its 32 features) 512 and ReLU's 512, down's partial sums 512, their cat layout 512 and the shard
    256 B (4,896 B; the norm's output is gone)."""
    d = Design()
    d.add_node("Input", {"shape": (8, 16)}, id="x")
    d.add_node("LayerNorm", {}, id="norm")
    d.add_node("Linear", {"out_features": 32}, id="up")
    d.add_node("ReLU", {}, id="act")
    d.add_node("Linear", {"out_features": 16}, id="down")
    d.add_node("Add", {}, id="res")
    for a, b in (("x", "norm"), ("norm", "up"), ("up", "act"), ("act", "down"), ("down", "res")):
        d.add_edge(a, b)
    d.add_edge("x", "res", 0, 1)
    rep = memdesigner.estimate(d, mode="train", batch=1, optimizer="sgd", backend="cpu", tensor_parallel=2,
                               sequence_parallel=True)
    ev = {(e.phase, e.node): e.bytes for e in rep.timeline}
    assert rep.param_bytes == 2_304
    assert ev[("forward", "up.sp_all_gather")] == 2_304 + 256 + 256 + 32 + 512 + 512
    assert ev[("forward", "down.sp_reduce_scatter")] == 2_304 + 256 + 32 + 4 * 512 + 256


def test_world_is_data_parallel_times_tensor_parallel(fc):
    rep = _est(fc, optimizer="adam", gpus=2, strategy="zero1", tensor_parallel=2)
    assert [(r["rank"], r["dp_rank"], r["tp_rank"]) for r in rep.per_rank] == [(0, 0, 0), (1, 0, 1), (2, 1, 0),
                                                                                (3, 1, 1)]
    # zero1 partitions each tensor-parallel rank's local shards over the data-parallel ranks
    assert rep.per_rank[0]["peak_bytes"] != rep.per_rank[2]["peak_bytes"]


def _tp_records():
    truth = json.loads(TRUTH_JSON.read_text())
    return sorted(k for k in truth if k.split("|")[1] in ("tp", "tp_sp"))


@pytest.mark.parametrize("key", _tp_records())
def test_matches_the_measured_ranks(key):
    """Every rank's step peak and phase peaks as measured (DTensor on gloo, the storage tracker
    counting tensor subclasses by what they wrap)."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import distributed as bench

    rec = json.loads(TRUTH_JSON.read_text())[key]
    for row, rr in zip(bench.compare(rec), rec["ranks"]):
        assert row["estimated_bytes"] == row["measured_bytes"], row  # every rank exact to the byte
        assert row["tp"] == rec["world"]
        # the phases as one of the steady steps measured them (steps 2 and 3 differ by when the
        # collector frees a reference cycle)
        steps = rr["steps"][1:]
        assert row["phase_estimated"]["forward"] in {max(s["peak_forward"], s["peak_loss"]) for s in steps}, row
        assert row["phase_estimated"]["backward"] in {s["peak_backward"] for s in steps}, row


def test_settings_and_cli(fc, capsys, tmp_path):
    with pytest.raises(ValueError, match="tensor_parallel"):
        Settings(tensor_parallel=0)
    with pytest.raises(ValueError, match="sequence_parallel"):
        Settings(sequence_parallel=True)
    data = json.loads((EXAMPLES / "seed_fc.json").read_text())
    data["settings"] = {**data.get("settings", {}), "mode": "train", "optimizer": "sgd", "backend": "cpu",
                        "batch": 4, "tensor_parallel": 2}
    path = tmp_path / "fc.json"
    path.write_text(json.dumps(data))
    assert main(["estimate", str(path), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["peak_bytes"] for r in d["per_rank"]] == [547_448] * 2
    assert main(["estimate", str(path), "--format", "json", "--tensor-parallel", "1"]) == 0
    assert len(json.loads(capsys.readouterr().out)["per_rank"]) == 1
    assert main(["estimate", str(EXAMPLES / "seed_fc.json"), "--sequence-parallel"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sequence_parallel" in err


@pytest.mark.slow
def test_measured_tp_world_2_with_dtensor():
    pytest.importorskip("torch")
    if not (TRUTH / "measure.py").exists():
        pytest.skip("../shared/truth/measure.py not found")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import distributed as bench

    cases = bench.tp_grid(networks=("tp_mlp",), worlds=(2,), strategies=("tp",), optimizers=("adam",))
    for rec in bench.measure_cases(cases, TRUTH).values():
        for row in bench.compare(rec):
            assert row["estimated_bytes"] == row["measured_bytes"], row

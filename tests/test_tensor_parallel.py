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


def test_shards_and_the_forward_all_reduce_by_hand(fc):
    """tp 2, SGD, batch 4. Parameters per rank: fc1 50x1000 + 50, fc2 100x50 + 100 (rowwise: the
    bias is replicated), fc3 50x100 + 50, fc4 100x50 + 100, fc5 100x10 + 10 -> 66,310 x 4 B.
    Forward peak at fc4's all-reduce: relu1 (4x50), relu2 (4x100), relu3 (4x50), fc4's partial sum
    (4x100) and the all-reduce's output (4x100): 6,400 B over the weights and the input (16,000 B)."""
    rep = _est(fc, optimizer="sgd", tensor_parallel=2)
    assert rep.param_bytes == 4 * 66_310 == 265_240
    assert rep.phase_peaks["forward"] == 265_240 + 16_000 + 6_400
    assert [r["rank"] for r in rep.per_rank] == [0, 1]
    assert {r["peak_bytes"] for r in rep.per_rank} == {rep.peak_bytes}


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
    for row in bench.compare(rec):
        assert abs(row["rel_error"]) <= 0.01, row
        assert row["tp"] == rec["world"]


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

"""Pipeline parallel per stage (memdesigner/engine/pipeline_parallel.py): the stage split, 1F1B's
in-flight micro-batches, receive buffers and deferred sends, derived by hand and measured with
torch.distributed.pipelining (PipelineStage + Schedule1F1B on gloo, benchmarks/distributed.py)."""

import json
import sys

import pytest
from helpers import EXAMPLES, ROOT

import memdesigner
from memdesigner.engine.pipeline_parallel import in_flight, split_stages
from memdesigner.engine.settings import Settings
from memdesigner.io.design_file import load_design
from memdesigner.model.analysis import analyze

TRUTH_JSON = ROOT / "benchmarks" / "distributed_truth.json"


@pytest.fixture(scope="module")
def fc():
    return load_design(EXAMPLES / "seed_fc.json")


def test_stages_split_by_parameter_count(fc):
    # fc1 holds 100,100 of 131,410 parameters: over half, so stage 0 is the input and fc1; 4 stages
    # close after fc1, fc2 (+10,100 >= 2/4 of the total) and fc3 (>= 3/4)
    an = analyze(fc)
    assert [s.nodes for s in split_stages(fc, an, 2)] == [
        ["input", "fc1"], ["relu1", "fc2", "relu2", "fc3", "relu3", "fc4", "relu4", "fc5"]]
    assert [s.nodes[-1] for s in split_stages(fc, an, 4)] == ["fc1", "fc2", "fc3", "fc5"]
    with pytest.raises(ValueError, match="only 5"):
        split_stages(fc, an, 6)


def test_in_flight_is_1f1b():
    assert [in_flight(4, 8, s) for s in range(4)] == [4, 3, 2, 1]
    assert [in_flight(4, 2, s) for s in range(4)] == [2, 2, 2, 1]


def test_first_stage_by_hand(fc):
    """P 2, M 4, SGD, micro-batch 4. Stage 0 (fc1): weights and the gradients of earlier
    micro-batches (2 x 400,400 B), the whole batch (16 x 1,000 x 4 B), fc1's dW and db being made
    (400,400 B), four output-gradient buffers (4 x 1,600 B), the other in-flight micro-batch's output,
    the previous micro-batch's output (its send not completed) and this one's (3 x 1,600 B), and the
    loss the simulation puts on the stage's output (4 + 4 B)."""
    rep = memdesigner.estimate(fc, mode="train", batch=4, optimizer="sgd", backend="cpu", pipeline_parallel=2,
                               micro_batches=4)
    stage0 = rep.per_rank[0]
    assert stage0["stage"] == 0
    assert stage0["peak_bytes"] == 3 * 400_400 + 64_000 + 4 * 1_600 + 3 * 1_600 + 8 == rep.peak_bytes
    truth = json.loads(TRUTH_JSON.read_text())["mlp|pp|sgd|w2|b4|m4"]
    assert truth["ranks"][0]["steps"][1]["peak_overall"] == 1_276_400  # measured: no loss on stage 0


def _pp_records():
    return sorted(k for k in json.loads(TRUTH_JSON.read_text()) if k.split("|")[1] == "pp")


@pytest.mark.parametrize("key", _pp_records())
def test_matches_the_measured_stages(key):
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import distributed as bench

    for row in bench.compare(json.loads(TRUTH_JSON.read_text())[key]):
        assert abs(row["rel_error"]) <= 0.001, row  # all 64 stage rows: within 0.021 %


def test_settings_need_a_micro_batch_per_stage():
    with pytest.raises(ValueError, match="micro_batches"):
        Settings(pipeline_parallel=4, micro_batches=2)
    assert Settings(pipeline_parallel=2, micro_batches=2).micro_batches == 2

"""Planned selective checkpointing: the cheapest set of layers to recompute for a memory budget,
against checkpointing everything, torch's greedy knapsack and brute force."""

import pytest
from helpers import EXAMPLES

import memdesigner as md
from memdesigner.engine.checkpoint_plan import (
    _Planner,
    brute_force_plan,
    knapsack_min_cost,
    plan_checkpoints,
    unit_segments,
    units,
)
from memdesigner.engine.devices import Device
from memdesigner.engine.settings import Settings
from memdesigner.model.analysis import analyze
from memdesigner.model.design import Design

BIG = Device("big", "no limit", "cuda", 10**15)


def _mlp() -> Design:
    """Six Linear + activation layers of unlike widths: savings and recompute differ per layer."""
    d = Design("mlp")
    d.add_node("Input", {"shape": (256,)}, id="in")
    prev = "in"
    for i, (w, act) in enumerate([(1024, "GELU"), (3072, "ReLU"), (2048, "GELU"), (1536, "Tanh"), (2560, "GELU"),
                                  (1024, "ReLU"), (10, None)]):
        prev_ = d.add_node("Linear", {"out_features": w}, id=f"fc{i}").id
        d.add_edge(prev, prev_)
        prev = prev_
        if act:
            a = d.add_node(act, {}, id=f"act{i}").id
            d.add_edge(prev, a)
            prev = a
    return d


def _budget(design, s, frac) -> Device:
    """A device between 'every layer checkpointed' and 'none': the plan has something to choose."""
    p = _Planner(design, s, BIG)
    lo, hi = p.run(p.names).device_peak_bytes, p.run(()).device_peak_bytes
    return Device("budget", "budget", "cuda", int(lo + frac * (hi - lo)))


def test_units_are_layers_with_their_activations():
    d = _mlp()
    an = analyze(d)
    u = units(an.order, d.nodes, {e.dst: [e] for e in d.edges})
    assert u["fc1"] == [["fc1", "act1"]] and u["fc6"] == [["fc6"]] and "in" not in u
    with pytest.raises(ValueError, match="'nope' is no layer"):
        unit_segments(an.order, d.nodes, ("nope",))


def test_knapsack_is_exact_on_a_hand_instance():
    # need 10: {0, 2} costs 5 (weights 6+4), {1} costs 9, greedy by ratio takes 3 (7/1) then needs 0 or 2
    w, c = [6, 10, 4, 7], [3, 9, 2, 1]
    assert knapsack_min_cost(w, c, 10) == [2, 3]  # 4 + 7 = 11 >= 10 at cost 3
    assert knapsack_min_cost(w, c, 27) == [0, 1, 2, 3]
    assert knapsack_min_cost(w, c, 28) is None
    assert knapsack_min_cost(w, c, 0) == []


@pytest.mark.parametrize("frac", [0.1, 0.5])
def test_plan_equals_brute_force_on_a_small_design(frac):
    d = _mlp()
    s = Settings(mode="train", optimizer="sgd", batch=4096)
    dev = _budget(d, s, frac)
    plan = plan_checkpoints(d, s, dev)
    brute = brute_force_plan(d, s, dev)
    assert plan.fits and brute.fits
    assert plan.recompute_flops == brute.recompute_flops
    greedy = plan_checkpoints(d, s, dev, method="greedy")
    assert greedy.fits and plan.recompute_flops <= greedy.recompute_flops


def test_plan_beats_greedy_where_the_ratio_order_misleads():
    d = _mlp()
    s = Settings(mode="train", optimizer="sgd", batch=4096)
    dev = _budget(d, s, 0.5)
    plan = plan_checkpoints(d, s, dev)
    greedy = plan_checkpoints(d, s, dev, method="greedy")
    # greedy takes fc2 (the best saving per FLOP after fc0); the knapsack finds fc4 enough and cheaper
    assert plan.units == ("fc0", "fc4") and greedy.units == ("fc0", "fc2")
    assert plan.recompute_flops < greedy.recompute_flops


def test_plan_checkpoints_fewer_layers_than_all_or_nothing_and_re_estimates():
    design = md.load_design(EXAMPLES / "vgg16.json")
    s = Settings(mode="train", optimizer="sgd", batch=32)
    dev = _budget(design, s, 0.2)
    every = md.estimate(design, s.with_(checkpointing=True), device=dev)  # checkpoint_sequential, sqrt(n)
    plan = plan_checkpoints(design, s, dev)
    assert plan.fits
    assert len(plan.units) < plan.candidates and plan.recompute_flops < every.recompute_flops
    rep = md.estimate(design, s.with_(checkpoint_units=plan.units), device=dev)
    assert rep.device_peak_bytes == plan.report.device_peak_bytes <= dev.memory_bytes
    assert rep.recompute_flops == plan.recompute_flops
    greedy = plan_checkpoints(design, s, dev, method="greedy")
    assert plan.recompute_flops <= greedy.recompute_flops


def test_named_layers_run_as_hf_checkpoints():
    """checkpoint_units naming every decoder layer is gradient_checkpointing_enable() (measured rule)."""
    from memdesigner.importers.hf_config import import_file

    d = import_file(EXAMPLES / "hf" / "gpt2.json", seq_len=256)
    s = Settings(mode="train", optimizer="sgd", batch=4)
    layers = tuple(f"transformer.h.{i}" for i in range(12))
    hf = md.estimate(d, s.with_(checkpoint_layers=True))
    named = md.estimate(d, s.with_(checkpoint_units=layers))
    assert named.peak_bytes == hf.peak_bytes < md.estimate(d, s).peak_bytes
    few = md.estimate(d, s.with_(checkpoint_units=layers[:4]))
    assert hf.peak_bytes < few.peak_bytes and few.recompute_flops < named.recompute_flops


def test_checkpoint_units_settings():
    s = Settings(mode="train", checkpoint_units="a, b")
    assert s.checkpoint_units == ("a", "b") and s.to_dict()["checkpoint_units"] == ["a", "b"]
    with pytest.raises(ValueError, match="checkpoint_units: choose one"):
        Settings(mode="train", checkpointing=True, checkpoint_units=("a",))
    with pytest.raises(ValueError, match="'conv9' is no layer"):
        md.estimate(md.load_design(EXAMPLES / "vgg16.json"), mode="train", checkpoint_units=("conv9",))


def test_knapsack_at_least_as_good_as_torchs_selective_checkpointing_solvers():
    """On the same additive instances, torch's SAC memory-budget solvers (greedy, DP and, with
    scipy, ILP: torch/_functorch/_activation_checkpointing/knapsack.py) recompute no less."""
    import random

    k = pytest.importorskip("torch._functorch._activation_checkpointing.knapsack")
    exact = [k.dp_knapsack]  # torch's DP takes seconds a call: two instances
    try:
        import scipy.optimize  # noqa: F401

        exact.append(k.ilp_knapsack)
    except ImportError:
        pass
    rng = random.Random(9)
    strictly_better = 0
    for i in range(40):
        solvers = [k.greedy_knapsack] + (exact if i < 2 else [])
        n = rng.randint(3, 12)
        mem = [rng.randint(1, 500) for _ in range(n)]
        run = [rng.randint(1, 500) for _ in range(n)]
        budget = rng.randint(0, sum(mem))  # what may stay saved; the rest is recomputed
        ours = knapsack_min_cost(mem, run, sum(mem) - budget)
        ours_cost = sum(run[i] for i in ours)
        assert sum(mem) - sum(mem[i] for i in ours) <= budget
        for solve in solvers:
            _, saved, recomputed = solve([float(m) for m in mem], [float(r) for r in run], float(budget))
            theirs = sum(run[i] for i in recomputed)
            assert ours_cost <= theirs, (solve.__name__, mem, run, budget)
            strictly_better += ours_cost < theirs
    assert strictly_better > 0  # greedy's ratio order loses somewhere


def test_units_follow_the_module_structure_of_a_llama():
    """One checkpoint unit per decoder layer, holding only that layer's ops: the final
    ``model.norm`` reads the last layer's residual add, but it is a module of its own, so it is not
    recomputed with layer 31. Checkpointing all 32 units is then HF's gradient_checkpointing_enable()
    (``checkpoint_layers``), recompute FLOPs and all."""
    from memdesigner.engine.finetune import layer_of
    from memdesigner.importers.hf_config import import_file
    from memdesigner.model.blocks import for_engine

    design = import_file(EXAMPLES / "hf" / "llama-3-8b.json", seq_len=16)
    d, an = for_engine(design, None)
    in_edges: dict = {}
    for e in d.edges:
        in_edges.setdefault(e.dst, []).append(e)
    u = units(an.order, d.nodes, in_edges)
    layers = tuple(f"model.layers.{k}" for k in range(32))
    assert [n for n in u if n.startswith("model.layers.")] == list(layers)
    for name in layers:
        assert {layer_of(d.nodes[nid]) for run in u[name] for nid in run} == {name}
    assert [[d.nodes[nid].name for nid in run] for run in u["model.norm"]] == [["model.norm"]]
    s = Settings(mode="train", optimizer="sgd", batch=1, dtype="bf16")
    hf = md.estimate(design, s.with_(checkpoint_layers=True))
    named = md.estimate(design, s.with_(checkpoint_units=layers))
    assert (named.peak_bytes, named.recompute_flops) == (hf.peak_bytes, hf.recompute_flops)

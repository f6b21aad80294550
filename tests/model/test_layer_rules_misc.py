"""Multi-input and special layer types: shapes against torch, and their error messages."""

import pytest

import memdesigner as md
from memdesigner.model.analysis import analyze
from memdesigner.model.design import Design


def two_inputs(sa, sb, layer, props=None):
    d = Design()
    d.add_node("Input", {"shape": sa}, id="a")
    d.add_node("Input", {"shape": sb}, id="b")
    d.add_node(layer, props or {}, id="op")
    d.add_edge("a", "op", dst_port=0)
    d.add_edge("b", "op", dst_port=1)
    return d


def test_matmul_shape_and_error():
    torch = pytest.importorskip("torch")
    an = analyze(two_inputs((3, 5, 4), (3, 4, 6), "MatMul"))
    assert an.nodes["op"].outputs[0].shape == tuple((torch.zeros(2, 3, 5, 4) @ torch.zeros(2, 3, 4, 6)).shape[1:])
    bad = analyze(two_inputs((3, 5, 4), (3, 5, 6), "MatMul")).nodes["op"].issue
    assert bad.field == "inputs" and "inner sizes 4 and 5 differ" in bad.message


def test_multiply_broadcasts():
    an = analyze(two_inputs((3, 5), (1, 5), "Multiply"))
    assert an.nodes["op"].outputs[0].shape == (3, 5)


def test_sdpa_and_scale():
    d = Design()
    for n in "qkv":
        d.add_node("Input", {"shape": (4, 10, 8)}, id=n)
    d.add_node("ScaledDotProductAttention", {}, id="att")
    for i, n in enumerate("qkv"):
        d.add_edge(n, "att", dst_port=i)
    d.add_node("Scale", {"factor": 0.5}, id="s")
    d.add_edge("att", "s")
    an = analyze(d)
    assert an.ok and an.nodes["s"].outputs[0].shape == (4, 10, 8)
    r = md.estimate(d, mode="inference", batch=2, backend="cpu")
    # q, k, v (2,560 B each) stay alive as inputs; the attention output and its scaled copy
    # coexist (5 x 2,560); the fp32 logsumexp (320 B) was transient inside the fused op
    assert r.peak_bytes == 5 * (2 * 4 * 10 * 8 * 4) == 12_800


def test_loss_node_trains_on_target():
    d = Design()
    d.add_node("Input", {"shape": (20,)}, id="x")
    d.add_node("Linear", {"out_features": 10}, id="fc")
    d.add_node("Loss", {"kind": "cross_entropy"}, id="loss")
    d.add_edge("x", "fc")
    d.add_edge("fc", "loss")
    r = md.estimate(d, mode="train", batch=8, optimizer="sgd", backend="cpu")
    assert r.ok
    assert r.layers[-1].output_shape == [8]


def test_generic_counts_output_and_warns():
    d = Design()
    d.add_node("Input", {"shape": (16,)}, id="x")
    d.add_node("Generic", {"op": "aten.foo", "out_shape": (32,)}, id="g")
    d.add_edge("x", "g")
    r = md.estimate(d, mode="inference", batch=4, backend="cpu")
    assert r.layers[-1].activation_bytes == 4 * 32 * 4
    assert "aten.foo" in r.warnings[0]


def test_unconnected_input_is_an_error_on_the_node():
    d = Design()
    d.add_node("Linear", {"out_features": 4}, id="fc")
    an = analyze(d)
    assert str(an.issues[0]) == "fc.inputs: needs 1 connected input(s), has 0"


def test_contiguous_copies_only_a_transposed_tensor():
    from helpers import sequential

    x = 2 * 6 * 8 * 4  # batch 2 of (6, 8) fp32
    plain = sequential((6, 8), [("Contiguous", {})])
    moved = sequential((6, 8), [("Transpose", {"dim0": 1, "dim1": 2}), ("Contiguous", {})])
    clone = sequential((6, 8), [("Contiguous", {"always_copy": True})])
    for d, extra in ((plain, 0), (moved, x), (clone, x)):
        assert md.estimate(d, mode="inference", batch=2, backend="cpu").peak_bytes == x + extra
    # batch 1: a transpose that only moves a size-1 dimension leaves the tensor contiguous
    one = sequential((1, 8), [("Transpose", {"dim0": 1, "dim1": 2}), ("Contiguous", {})])
    assert md.estimate(one, mode="inference", batch=1, backend="cpu").peak_bytes == 8 * 4


def test_max_keeps_int64_indices_for_backward():
    from helpers import sequential

    d = sequential((6, 8), [("Linear", {"out_features": 8}), ("Max", {"dim": 1})])
    an = analyze(d)
    assert [o.shape for o in an.nodes["n1"].outputs] == [(8,), (8,)]
    assert an.nodes["n1"].outputs[1].kind == "int64"
    r = md.estimate(d, mode="train", batch=2, optimizer="sgd", backend="cpu")
    row = r.layers[-1]
    assert row.activation_bytes == 2 * 8 * 4 + 2 * 8 * 8  # values + int64 indices


def test_generic_node_carries_its_parameters():
    d = Design()
    d.add_node("Input", {"shape": (16,)}, id="x")
    d.add_node("Generic", {"op": "PReLU", "out_shape": (16,), "params": 16}, id="g")
    d.add_edge("x", "g")
    r = md.estimate(d, mode="train", batch=4, optimizer="adam", backend="cpu")
    assert r.params == 16 and r.param_bytes == 64
    assert r.at_peak["optimizer_state"] == 2 * 64 + 4  # exp_avg, exp_avg_sq, step


def test_gru_cell_in_a_loop_shares_its_weights():
    d = Design()
    d.add_node("Input", {"shape": (16,)}, id="x")
    d.add_node("GRUCell", {"hidden_size": 32}, id="c1")
    d.add_node("GRUCell", {"hidden_size": 32}, id="c2",
               tied={"weight_ih": "c1.weight_ih", "weight_hh": "c1.weight_hh", "bias_ih": "c1.bias_ih",
                     "bias_hh": "c1.bias_hh"})
    d.add_edge("x", "c1")
    d.add_edge("x", "c2", dst_port=0)
    d.add_edge("c1", "c2", dst_port=1)
    an = analyze(d)
    assert an.ok and an.nodes["c2"].outputs[0].shape == (32,)
    r = md.estimate(d, mode="train", batch=4, optimizer="sgd", backend="cpu")
    assert r.params == 3 * 32 * 16 + 3 * 32 * 32 + 2 * 3 * 32  # one set of weights for both steps
    # per step (measured, CPU): the hidden gate projection (B x 3H), two clones and the new gate
    # (B x H each); the input projection dies with the op. c1 has no hidden input: its zero one is kept
    assert r.layers[2].kept_bytes == (4 * 3 * 32 + 3 * 4 * 32) * 4
    assert r.layers[1].kept_bytes == (4 * 3 * 32 + 3 * 4 * 32 + 4 * 32) * 4

"""Timeline-exact checks: the live bytes at every event of forward, backward and the optimizer
step of small designs (CPU semantics, fp32, batch 2), each derived by hand below from the sizes of
the tensors PyTorch makes. They guard the rules that do not set the peak of any example: what an
op saves (and for how long), the fan-in sum in each backward path, the optimizer state and step
temporaries in each place_weights path. benchmarks/mutations.py shows each of them failing when
its rule is removed."""

import pytest
from helpers import sequential, two_branch_residual

import memdesigner as md
from memdesigner.engine.estimate import explain_peak

F = 4  # fp32 bytes


def timeline(design, **kw) -> list[tuple]:
    rep = md.estimate(design, batch=2, backend="cpu", **kw)
    return [(e.phase, e.node, e.bytes) for e in rep.timeline]


def expect(base: int, rows: list[tuple]) -> list[tuple]:
    """(phase, node, live bytes beside ``base``) -> (phase, node, bytes)."""
    return [(p, n, base + b) for p, n, b in rows]


# -- a Linear chain with a residual fan-in, Sigmoid and Dropout -----------------------------------

def mlp_fan_in():
    """x(8) -> a Linear 16 -> b Linear 16 -> s = b + a -> act Sigmoid -> drop Dropout -> head Linear 4.
    a's output is read by b (which saves it) and by s (which saves nothing): two gradients meet."""
    d = md.Design("mlp_fan_in")
    d.add_node("Input", {"shape": [8]}, id="x")
    d.add_node("Linear", {"out_features": 16}, id="a")
    d.add_node("Linear", {"out_features": 16}, id="b")
    d.add_node("Add", {}, id="s")
    d.add_node("Sigmoid", {}, id="act")
    d.add_node("Dropout", {"p": 0.5}, id="drop")
    d.add_node("Linear", {"out_features": 4}, id="head")
    for src, dst in (("x", "a"), ("a", "b"), ("b", "s"), ("s", "act"), ("act", "drop"), ("drop", "head")):
        d.add_edge(src, dst)
    d.add_edge("a", "s", dst_port=1)
    return d


# bytes of the tensors (batch 2): inputs, 16-wide feature maps, head output, the scalar loss
X1, H, O1, L = 2 * 8 * F, 2 * 16 * F, 2 * 4 * F, F
PA, PB, PH = (8 * 16 + 16) * F, (16 * 16 + 16) * F, (16 * 4 + 4) * F  # parameters a, b, head
P1 = PA + PB + PH  # 1,936
MLP_FORWARD = [
    ("forward", "x", X1),
    ("forward", "a", X1 + H),
    ("forward", "b", X1 + 2 * H),  # b saves a's output (addmm's input, for dW)
    ("forward", "s", X1 + 3 * H),
    ("forward", "act", X1 + 3 * H),  # b's output died after s; sigmoid's output is new
    ("forward", "drop", X1 + 4 * H),  # output + CPU dropout's float noise; act keeps its output
    ("forward", "head", X1 + 4 * H + O1),  # head saves drop's output
    ("forward", None, X1 + 4 * H + O1 + L),  # loss = out.mean()
]
# after forward: x, a (saved by b), act (saved by act), drop output and noise, head output, loss
A0 = X1 + 4 * H + O1 + L
MLP_BACKWARD = [
    ("backward", None, A0 + L + O1),  # ones_like(loss), MeanBackward0's gradient
    ("backward", "head", A0 + L + O1 + H + 16 * 4 * F + 4 * F),  # dx, dW, db
    ("backward", "drop", A0 - H + L + (16 * 4 + 4) * F + H + H),  # drop output freed; dx beside dy
    ("backward", "act", A0 - 2 * H + L + PH + H + H),  # noise freed; dx beside dy
    ("backward", "s", A0 - 3 * H + L + PH + H),  # act's output freed; both inputs alias dy
    ("backward", "b", A0 - 3 * H + L + PH + H + H + PB),  # dx (to a), dW, db
    # a's gradient: the out-of-place sum of b's dx and s's dy replaced both; then dW, db
    ("backward", "a", A0 - 4 * H + L + PH + PB + H + PA),
]
A_END = X1 + O1 + L  # the batch, the model's output and the loss live through the step


def test_mlp_sgd_timeline():
    got = timeline(mlp_fan_in(), mode="train", optimizer="sgd")
    step = [("optimizer_step", n, P1 + P1 + A_END) for n in ("a", "b", "head")]  # in place: weights + grads
    assert got == expect(P1, MLP_FORWARD + MLP_BACKWARD) + step


ADAM_STATE = 2 * P1 + 6 * 4  # exp_avg, exp_avg_sq, and a 4-byte step tensor per parameter on CPU


def test_mlp_for_loop_adam_timeline():
    """Per parameter, sqrt(exp_avg_sq) and the denominator; the previous parameter's denominator
    is freed only when the next one is made."""
    got = timeline(mlp_fan_in(), mode="train", optimizer="adam", foreach=False)
    base = P1 + ADAM_STATE
    step_base = P1 + P1 + ADAM_STATE + A_END
    step = [("optimizer_step", "a", step_base + 2 * 8 * 16 * F),  # a.weight (a.bias is smaller)
            ("optimizer_step", "b", step_base + 2 * 16 * 16 * F + 16 * F),  # b.weight + a.bias's denominator
            ("optimizer_step", "head", step_base + 2 * 16 * 4 * F + 16 * F)]  # head.weight + b.bias's
    assert got == expect(base, MLP_FORWARD + MLP_BACKWARD) + step


def test_mlp_foreach_adam_timeline():
    """foreach Adam: one _foreach_sqrt copy of every exp_avg_sq at once."""
    got = timeline(mlp_fan_in(), mode="train", optimizer="adam", foreach=True)
    base = P1 + ADAM_STATE
    assert got == expect(base, MLP_FORWARD + MLP_BACKWARD) + [
        ("optimizer_step", None, P1 + P1 + ADAM_STATE + A_END + P1)]


# -- convolutions, BatchNorm, an in-place SiLU, MaxPool --------------------------------------------

def conv_net():
    return sequential((2, 4, 4), [("Conv2d", {"out_channels": 2, "kernel": 3, "padding": 1}),
                                  ("Conv2d", {"out_channels": 2, "kernel": 3, "padding": 1}),
                                  ("BatchNorm2d", {}), ("SiLU", {"inplace": True}), ("MaxPool2d", {"kernel": 2}),
                                  ("Flatten", {}), ("Linear", {"out_features": 3})])


FM = 2 * 2 * 4 * 4 * F  # every (2, 2, 4, 4) feature map
POOLED = 2 * 2 * 2 * 2 * F
IDX = 2 * 2 * 2 * 2 * 8  # MaxPool's int64 argmax indices
STATS = 2 * 2 * F  # BatchNorm's save_mean and save_invstd (2 channels each)
Y3 = 2 * 3 * F
CONV = (2 * 2 * 9 + 2) * F
BN_P, BN_BUF = 4 * F, 4 * F + 8  # weight, bias; running mean, var and the int64 num_batches_tracked
FC = (8 * 3 + 3) * F
P2 = 2 * CONV + BN_P + BN_BUF + FC  # 452


def test_conv_net_training_timeline():
    fwd = [
        ("forward", "in", FM),
        ("forward", "n0", 2 * FM),
        ("forward", "n1", 3 * FM),  # n1 saves n0's output (its input)
        ("forward", "n2", 4 * FM + STATS),  # BatchNorm keeps its input, mean and invstd
        ("forward", "n3", 5 * FM + STATS),  # in-place SiLU clones its input for backward
        ("forward", "n4", 5 * FM + STATS + POOLED + IDX),  # MaxPool keeps its input and indices
        ("forward", "n5", 5 * FM + STATS + POOLED + IDX),  # Flatten: a view
        ("forward", "n6", 5 * FM + STATS + POOLED + IDX + Y3),
        ("forward", None, 5 * FM + STATS + POOLED + IDX + Y3 + L),
    ]
    a0 = 5 * FM + STATS + POOLED + IDX + Y3 + L
    g_fc = 8 * 3 * F + 3 * F
    bwd = [
        ("backward", None, a0 + L + Y3),
        ("backward", "n6", a0 + L + Y3 + POOLED + g_fc),
        ("backward", "n5", a0 - POOLED + L + g_fc + POOLED),  # the view's gradient is dy itself
        ("backward", "n4", a0 - POOLED + L + g_fc + POOLED + FM),
        ("backward", "n3", a0 - POOLED - FM - IDX + L + g_fc + FM + FM),  # pool's input and indices freed
        ("backward", "n2", a0 - POOLED - 2 * FM - IDX + L + g_fc + FM + FM + BN_P),  # the clone freed
        ("backward", "n1", a0 - POOLED - 3 * FM - IDX - STATS + L + g_fc + BN_P + FM + FM + CONV),
        ("backward", "n0", a0 - POOLED - 4 * FM - IDX - STATS + L + g_fc + BN_P + CONV + FM + CONV),  # no dx
    ]
    grads = 2 * CONV + BN_P + FC
    step = [("optimizer_step", n, P2 + grads + FM + Y3 + L) for n in ("n0", "n1", "n2", "n6")]
    assert timeline(conv_net(), mode="train", optimizer="sgd") == expect(P2, fwd + bwd) + step


def test_conv_net_inference_timeline():
    """Without grad nothing is saved: each input dies after its op; MaxPool still makes its int64
    indices and drops them."""
    fwd = [
        ("forward", "in", FM),
        ("forward", "n0", 2 * FM),
        ("forward", "n1", 3 * FM),
        ("forward", "n2", 3 * FM),  # n0's output died; BatchNorm (eval) makes only its output
        ("forward", "n3", 2 * FM),  # in place: nothing new
        ("forward", "n4", 2 * FM + POOLED + IDX),
        ("forward", "n5", FM + POOLED),
        ("forward", "n6", FM + POOLED + Y3),
    ]
    assert timeline(conv_net(), mode="inference") == expect(P2, fwd)


# -- LayerNorm and cross-entropy -------------------------------------------------------------------

def test_layernorm_cross_entropy_timeline():
    d = sequential((8,), [("Linear", {"out_features": 16}), ("LayerNorm", {}), ("Linear", {"out_features": 10}),
                          ("Loss", {"kind": "cross_entropy"})])
    lg = 2 * 10 * F  # logits, log-probabilities and their gradients
    rows = 2 * F  # LayerNorm's mean, and its rstd: one per row
    tw, target = F, 2 * 8  # total_weight, the int64 target ids
    p0, pln, p2 = (8 * 16 + 16) * F, 2 * 16 * F, (16 * 10 + 10) * F
    p = p0 + pln + p2
    fwd = [
        ("forward", "in", X1),
        ("forward", "n0", X1 + H),
        ("forward", "n1", X1 + 2 * H + 2 * rows),  # LayerNorm keeps its input, mean and rstd
        ("forward", "n2", X1 + 2 * H + 2 * rows + lg),
        ("forward", "n3", X1 + 2 * H + 2 * rows + lg + lg + L + tw + target),  # log_softmax kept
        ("forward", None, X1 + 2 * H + 2 * rows + lg + L + tw + target),  # the logits died
    ]
    a0 = X1 + 2 * H + 2 * rows + lg + L + tw + target
    bwd = [
        ("backward", None, a0 + L),  # ones_like(loss)
        ("backward", "n3", a0 + L + lg),  # NllLossBackward0's gradient
        ("backward", "n3", a0 - tw - target + L + lg + lg),  # target, total_weight freed; dx
        ("backward", "n2", a0 - tw - target - lg + L + lg + H + p2),  # log_softmax freed
        ("backward", "n1", a0 - tw - target - lg - H + L + H + p2 + H + pln),
        ("backward", "n0", a0 - tw - target - lg - 2 * H - 2 * rows + L + p2 + pln + H + p0),  # dy; no dx
    ]
    step = [("optimizer_step", n, p + p + X1 + L) for n in ("n0", "n1", "n2")]
    assert timeline(d, mode="train", optimizer="sgd") == expect(p, fwd + bwd) + step


# -- two bottleneck branches and a residual: fan-in sums, shared parameters ------------------------

def two_branch(tie: bool):
    """a feeds b1 -> c1, b2 -> c2 and the residual s2 = (c1 + c2) + a. b1 and b2 both save a's
    output, so at b2's backward the sum of a's gradients is a moment of its own. ``tie``: b2's
    weight is b1's (the shared-parameter paths of place_weights and backward)."""
    return two_branch_residual(16, 4, tie)


XB, B4 = 2 * 16 * F, 2 * 4 * F  # the 16-wide tensors, the 4-wide bottleneck outputs
PA2, PBW, PBB, PC = (16 * 16 + 16) * F, 16 * 4 * F, 4 * F, (4 * 16 + 16) * F
TB_FWD = [
    ("forward", "x", XB),
    ("forward", "a", 2 * XB),
    ("forward", "b1", 2 * XB + B4),
    ("forward", "c1", 3 * XB + B4),
    ("forward", "b2", 3 * XB + 2 * B4),
    ("forward", "c2", 4 * XB + 2 * B4),
    ("forward", "s1", 5 * XB + 2 * B4),
    ("forward", "s2", 4 * XB + 2 * B4),  # c1's and c2's outputs died after s1
    ("forward", None, 3 * XB + 2 * B4 + L),  # s1's output died after s2
]
TB_A0 = 3 * XB + 2 * B4 + L  # x, a, b1 and b2 outputs, s2's output, loss


def two_branch_backward(tie: bool) -> list:
    g0 = L + XB  # ones_like(loss) and dy (s2, s1, c1, c2 and a's first gradient alias it)
    gc2 = B4 + PC
    # b2's backward makes dx (to a) and its parameter gradients beside c2's dx (its incoming
    # gradient), frees that, then sums a's two gradients out of place: the sum is the moment this
    # event shows (a's output is still saved by b1, so nothing of its size died before it)
    gb2_sum = g0 + PC + B4 + XB + (PBW + PBB) - B4 + XB
    gb2_after = gb2_sum - XB  # b2's dx died with the sum (dy, a's first gradient, is still c1's)
    gc1 = gb2_after + B4 + PC
    # c1's backward frees dy's last reference; b1 makes its dx (to a) and its gradients. A shared
    # weight already has .grad (from b2): the contribution and the sum are transients of the op.
    after_c1 = gc1 - XB
    if tie:
        gb1, kb1 = after_c1 + XB + PBB, 2 * PBW
    else:
        gb1, kb1 = after_c1 + XB + PBW + PBB, 0
    # after b1: c1's dx freed, the sum of a's gradients replaced both summands; then a's dW and db
    ga = gb1 - B4 + XB - XB - XB + PA2
    return [
        ("backward", None, TB_A0 + g0),
        ("backward", "s2", TB_A0 + g0),
        ("backward", "s1", TB_A0 + g0),
        ("backward", "c2", TB_A0 + g0 + gc2),
        ("backward", "b2", TB_A0 - B4 + gb2_sum),
        ("backward", "c1", TB_A0 - B4 + gc1),
        ("backward", "b1", TB_A0 - 2 * B4 + gb1 + kb1),
        ("backward", "a", TB_A0 - 2 * B4 - XB + ga),
    ]


TB_NODES = ("a", "b1", "c1", "b2", "c2")
TB_END = XB + XB + L  # x, the output, the loss


def test_two_branch_sgd_timeline():
    p = PA2 + 2 * (PBW + PBB) + 2 * PC  # 2,272
    step = [("optimizer_step", n, p + p + TB_END) for n in TB_NODES]
    assert timeline(two_branch(False), mode="train", optimizer="sgd") == \
        expect(p, TB_FWD + two_branch_backward(False)) + step


P_TIED = PA2 + PBW + 2 * PBB + 2 * PC  # b2's weight is b1's: 2,016


def test_tied_two_branch_momentum_timeline():
    """Shared parameters take place_weights' general loop: one momentum buffer per parameter."""
    base = P_TIED + P_TIED
    step = [("optimizer_step", n, base + P_TIED + TB_END) for n in TB_NODES]
    assert timeline(two_branch(True), mode="train", optimizer="momentum") == \
        expect(base, TB_FWD + two_branch_backward(True)) + step


def test_tied_two_branch_adam_timeline():
    """The general loop's Adam: two states and a step tensor for each of the 9 trainable tensors;
    the for-loop step's temporaries, parameter by parameter in the model's order."""
    state = 2 * P_TIED + 9 * 4
    base = P_TIED + state
    sb = P_TIED + state + P_TIED + TB_END
    step = [("optimizer_step", "a", sb + 2 * 16 * 16 * F),
            ("optimizer_step", "b1", sb + 2 * PBW + 16 * F),  # + a.bias's denominator
            ("optimizer_step", "c1", sb + 2 * 4 * 16 * F + PBB),  # + b1.bias's
            ("optimizer_step", "b2", sb + 2 * PBB + 16 * F),  # its bias only; + c1.bias's
            ("optimizer_step", "c2", sb + 2 * 4 * 16 * F + PBB)]  # + b2.bias's
    assert timeline(two_branch(True), mode="train", optimizer="adam", foreach=False) == \
        expect(base, TB_FWD + two_branch_backward(True)) + step


def test_explain_lists_the_fan_in_sum_at_the_peak():
    """explain_peak reruns the step with a capture (the backward's traced path, not the inline
    one): the live set at a's backward, the peak, includes the 128-byte sum of a's gradients."""
    rows = explain_peak(two_branch(False), backend="cpu", batch=2, mode="train", optimizer="sgd")
    got = sorted((r["layer"] or "", r["tensor"], r["bytes"]) for r in rows)
    assert got == sorted([
        ("", "parameters and buffers (all layers)", PA2 + 2 * (PBW + PBB) + 2 * PC),
        ("a", "parameter gradients", PA2), ("c1", "parameter gradients", PC), ("c2", "parameter gradients", PC),
        ("b1", "parameter gradients", PBW + PBB), ("b2", "parameter gradients", PBW + PBB),
        ("x", "input batch", XB), ("s2", "sum", XB), ("", "accumulated gradient", XB),
        ("", "loss = out.mean()", L), ("", "ones_like(loss)", L)])
    assert sum(r[2] for r in got) == md.estimate(two_branch(False), backend="cpu", batch=2, mode="train",
                                                 optimizer="sgd").peak_bytes


@pytest.mark.parametrize("tie", [False, True])
def test_timeline_maximum_is_the_reported_peak(tie):
    rep = md.estimate(two_branch(tie), batch=2, backend="cpu", mode="train", optimizer="adam", foreach=False)
    assert max(e.bytes for e in rep.timeline) == rep.peak_bytes


# -- CPU autocast (bf16) ---------------------------------------------------------------------------

def test_autocast_linear_chain_timeline():
    """x(8) -> n0 Linear 16 -> n1 Linear 4 under CPU autocast: each op casts its fp32 weight and
    bias to bf16 (kept in autocast's cache until the forward ends), n0 casts x; n0 saves x's cast,
    n1 saves its bf16 input and the weight's cast (x needs no grad: n0 keeps no weight). Backward
    makes bf16 parameter gradients and casts each to its fp32 .grad after the op's saved tensors
    and incoming gradient are released (the event is the first cast, both halves still alive)."""
    d = sequential((8,), [("Linear", {"out_features": 16}), ("Linear", {"out_features": 4})])
    bf = 2
    w0, b0, w1, b1 = 8 * 16, 16, 16 * 4, 4  # numels
    p = (w0 + b0 + w1 + b1) * F  # 848
    xc, y0, y1 = 2 * 8 * bf, 2 * 16 * bf, 2 * 4 * bf  # x's cast, the bf16 outputs
    lb = bf  # the bf16 loss (and its ones_like)
    fwd = [
        ("forward", "in", X1),
        ("forward", "n0", X1 + xc + w0 * bf + b0 * bf + y0),
        ("forward", "n1", X1 + xc + w0 * bf + b0 * bf + y0 + w1 * bf + b1 * bf + y1),
        # the cast cache is gone when autocast exits; n1's weight cast is still saved
        ("forward", None, X1 + xc + y0 + w1 * bf + y1 + lb),
    ]
    a0 = X1 + xc + y0 + w1 * bf + y1 + lb
    g1 = lb + y0 + (w1 + b1) * bf + w1 * F  # n1: ones, dx, both halves, weight.grad
    g0 = lb + y0 + (w1 + b1) * F + (w0 + b0) * bf + w0 * F - y0  # n0: n1's dx (its dy) freed; no dx
    bwd = [
        ("backward", None, a0 + lb + y1),  # ones_like(loss), MeanBackward0's bf16 gradient
        ("backward", "n1", a0 - y0 - w1 * bf + g1),  # n1's input and weight cast released, dy freed
        ("backward", "n0", a0 - y0 - w1 * bf - xc + g0),
    ]
    step = [("optimizer_step", n, p + p + X1 + y1 + lb) for n in ("n0", "n1")]
    assert timeline(d, mode="train", optimizer="sgd", amp=True) == expect(p, fwd + bwd) + step

"""Byte-exact checks of the engine against hand-derived PyTorch numbers (shared/truth README,
nn.Linear(1000, 100) at batch 256, fp32, CPU semantics), and the liveness rules."""

from helpers import sequential

import memdesigner as md
from memdesigner.io.design_file import copy_design

W, B_ = 400_000, 400
P = W + B_
X = 256 * 1000 * 4
Y = 256 * 100 * 4


def linear():
    return sequential((1000,), [("Linear", {"out_features": 100})])


def test_linear_inference_peak():
    r = md.estimate(linear(), mode="inference", batch=256, backend="cpu")
    assert r.peak_bytes == P + X + Y == 1_526_800


def test_linear_sgd_backward_peak():
    # P+X + Y (out) + loss 4 + ones 4 + dL/dY + dW + db
    r = md.estimate(linear(), mode="train", batch=256, optimizer="sgd", backend="cpu")
    assert r.phase_peaks["backward"] == P + X + Y + 4 + 4 + Y + W + B_ == 2_029_608
    assert r.peak_bytes == 2_029_608
    assert r.phase_peaks["optimizer_step"] == P + X + P + Y + 4 == 1_927_204


def test_linear_adam_step_peak():
    # state 2P + two 4-byte step tensors; for-loop temporaries sqrt + div of the weight
    r = md.estimate(linear(), mode="train", batch=256, optimizer="adam", backend="cpu")
    assert r.phase_peaks["optimizer_step"] == 3_528_012
    assert r.peak_bytes == 3_528_012
    assert r.at_peak["optimizer_state"] == 2 * P + 8


def test_adam_foreach_holds_all_params_once():
    r = md.estimate(linear(), mode="train", batch=256, optimizer="adam", backend="cpu", foreach=True)
    assert r.phase_peaks["optimizer_step"] == P + X + P + Y + 4 + 2 * P + 8 + P


def test_cuda_defaults_foreach_and_host_step_tensor():
    r = md.estimate(linear(), mode="train", batch=256, optimizer="adam", backend="cuda")
    # foreach sqrt over all params; Adam's step counters stay on the host
    assert r.phase_peaks["optimizer_step"] == P + X + P + Y + 4 + 2 * P + P


def test_momentum_adds_one_copy():
    r = md.estimate(linear(), mode="train", batch=256, optimizer="momentum", backend="cpu")
    assert r.at_peak["optimizer_state"] == P


def test_bf16_inference_halves():
    r = md.estimate(linear(), mode="inference", batch=256, dtype="bf16", backend="cpu")
    assert r.peak_bytes == (P + X + Y) // 2


def test_amp_linear_inference_weight_cache():
    # fp32 P + X, bf16 casts of bias, weight and input, bf16 output (truth README: 2,187,800)
    r = md.estimate(linear(), mode="inference", batch=256, amp=True, backend="cpu")
    assert r.peak_bytes == 2_187_800


def test_amp_linear_sgd_backward():
    r = md.estimate(linear(), mode="train", batch=256, optimizer="sgd", amp=True, backend="cpu")
    assert r.phase_peaks["backward"] == 2_239_004


def test_dropout_mask_dtype_follows_backend():
    d = sequential((1000,), [("Linear", {"out_features": 100}), ("Dropout", {"p": 0.5})])
    cpu = md.estimate(d, mode="train", batch=256, optimizer="sgd", backend="cpu")
    cuda = md.estimate(d, mode="train", batch=256, optimizer="sgd", backend="cuda")
    drop_cpu = next(r for r in cpu.layers if r.type == "Dropout")
    drop_cuda = next(r for r in cuda.layers if r.type == "Dropout")
    assert drop_cpu.kept_bytes == 256 * 100 * 4  # float noise
    assert drop_cuda.kept_bytes == 256 * 100 * 1  # bool mask


def test_maxpool_keeps_int64_indices_in_training():
    d = sequential((3, 8, 8), [("Conv2d", {"out_channels": 4, "kernel": 3, "padding": 1}), ("MaxPool2d", {"kernel": 2})])
    r = md.estimate(d, mode="train", batch=2, optimizer="sgd", backend="cpu")
    pool = next(x for x in r.layers if x.type == "MaxPool2d")
    assert pool.kept_bytes == 2 * 4 * 4 * 4 * 8


def test_inplace_relu_is_free_but_relu6_clones():
    base = [("Conv2d", {"out_channels": 8, "kernel": 3, "padding": 1, "bias": False}), ("BatchNorm2d", {})]
    act = 2 * 8 * 16 * 16 * 4
    relu = md.estimate(sequential((3, 16, 16), base + [("ReLU", {"inplace": True})]), mode="train", batch=2,
                       optimizer="sgd", backend="cpu")
    relu6 = md.estimate(sequential((3, 16, 16), base + [("ReLU6", {"inplace": True})]), mode="train", batch=2,
                        optimizer="sgd", backend="cpu")
    assert relu6.phase_peaks["forward"] - relu.phase_peaks["forward"] == act


def test_inference_frees_after_last_consumer():
    # conv1 output dies once conv2 ran: peak = params + input + conv1 out + conv2 out
    d = sequential((3, 200, 300), [("Conv2d", {"out_channels": 100, "kernel": 3, "stride": 2, "padding": "SAME"}),
                                   ("Conv2d", {"out_channels": 200, "kernel": 3, "stride": 2, "padding": "SAME"}),
                                   ("Conv2d", {"out_channels": 400, "kernel": 3, "stride": 2, "padding": "SAME"})])
    r = md.estimate(d, mode="inference", batch=1, backend="cpu")
    params = 903_400 * 4
    assert r.peak_bytes == params + 720_000 + 6_000_000 + 3_000_000


def test_quantized_bits_pack_weights():
    d = sequential((1, 32, 32), [("Conv2d", {"out_channels": 64, "kernel": 7})])
    d.set_bits("n0", 1)
    r = md.estimate(d, mode="inference", batch=1)
    assert r.layers[1].param_bytes == 392 + 64 * 4  # 3,136 one-bit weights + fp32 biases


def test_residual_fan_in_sums_gradients():
    from memdesigner.model.design import Design

    d = Design()
    d.add_node("Input", {"shape": (64,)}, id="in")
    d.add_node("Linear", {"out_features": 64}, id="a")
    d.add_node("Linear", {"out_features": 64}, id="b")
    d.add_node("Add", {}, id="add")
    d.add_node("Linear", {"out_features": 8}, id="c")
    d.add_edge("in", "a")
    d.add_edge("a", "b")
    d.add_edge("a", "add", dst_port=0)
    d.add_edge("b", "add", dst_port=1)
    d.add_edge("add", "c")
    r = md.estimate(d, mode="train", batch=4, optimizer="sgd", backend="cpu")
    assert r.ok and r.peak_bytes > 0
    labels = [e.label for e in r.timeline if e.phase == "backward"]
    assert labels[0] == "loss backward" and labels[-1] == "a"


def test_checkpointing_lowers_training_peak():
    layers = []
    for _ in range(12):
        layers += [("Linear", {"out_features": 512}), ("GELU", {})]
    d = sequential((512,), layers)
    plain = md.estimate(d, mode="train", batch=512, optimizer="sgd")
    ck = md.estimate(d, mode="train", batch=512, optimizer="sgd", checkpointing=True)
    assert ck.peak_bytes < plain.peak_bytes


def test_largest_batch_is_exact():
    from memdesigner.engine.devices import Device
    from memdesigner.engine.estimate import largest_batch, peak_for_batch
    from memdesigner.engine.settings import Settings
    from memdesigner.model.analysis import analyze

    d = sequential((3, 64, 64), [("Conv2d", {"out_channels": 32, "kernel": 3, "padding": 1}), ("ReLU", {})])
    dev = Device("tiny", "tiny", "cuda", memory_bytes=200 * 2**20, runtime_overhead_bytes=10 * 2**20)
    s = Settings(mode="train", optimizer="adam")
    an = analyze(d)
    b = largest_batch(d, s, dev, an)
    assert b > 1
    assert peak_for_batch(d, s, dev, an, b) <= dev.memory_bytes < peak_for_batch(d, s, dev, an, b + 1)


def test_errors_name_node_and_field():
    d = sequential((3, 5, 5), [("Conv2d", {"out_channels": 4, "kernel": 7})])
    r = md.estimate(d)
    assert not r.ok
    assert str(r.issues[0]) == "n0.kernel: 7 is larger than the padded input 5"


def test_module_call_holds_its_input():
    """``return self.body(x)``: x lives in the caller's frame until body returns."""
    d = sequential((4, 8, 8), [("Conv2d", {"out_channels": 4, "kernel": 3, "padding": 1, "bias": False}),
                               ("Conv2d", {"out_channels": 4, "kernel": 3, "padding": 1, "bias": False}),
                               ("Sigmoid", {}), ("Sigmoid", {})])
    act = 2 * 4 * 8 * 8 * 4  # every feature map at batch 2
    params = 2 * 4 * 4 * 9 * 4
    flat = md.estimate(d, mode="inference", batch=2, backend="cpu")
    assert flat.peak_bytes == params + 3 * act  # x + the two maps alive at each op
    for nid in ("n1", "n2", "n3"):
        d.nodes[nid].scope = "body"
    held = md.estimate(d, mode="inference", batch=2, backend="cpu")
    assert held.peak_bytes == params + 4 * act  # n0's output is held until body's last op ran


def test_explain_peak_lists_every_live_tensor():
    from memdesigner.engine.estimate import explain_peak

    d = sequential((1000,), [("Linear", {"out_features": 100})])
    rows = explain_peak(d, mode="train", batch=256, optimizer="adam", backend="cpu")
    assert sum(r["bytes"] for r in rows) == 3_528_012  # the Adam step peak, tensor by tensor
    temps = [r for r in rows if r["tensor"].startswith("Adam step temporary")]
    assert sorted(r["bytes"] for r in temps) == [W, W]  # sqrt and denominator of the weight


def test_cuda_autocast_runs_layernorm_in_fp32():
    d = sequential((16, 64), [("Linear", {"out_features": 64}), ("LayerNorm", {})])
    cuda = md.estimate(d, mode="inference", batch=4, amp=True, backend="cuda")
    cpu = md.estimate(d, mode="inference", batch=4, amp=True, backend="cpu")
    ln_out = 4 * 16 * 64
    # CUDA: fp16 linear output is cast to fp32 for layer_norm, whose output is fp32 too
    assert cuda.layers[-1].activation_bytes == ln_out * 4
    assert cpu.layers[-1].activation_bytes == ln_out * 2


def test_tied_parameters_count_once():
    """lm_head.weight = wte.weight: one tensor, one gradient, one Adam state; the second
    gradient contribution is accumulated into .grad and dies."""
    from memdesigner.model.design import Design

    d = Design()
    d.add_node("Input", {"shape": (16,), "dtype": "int64"}, id="idx")
    d.add_node("Embedding", {"num_embeddings": 1000, "embedding_dim": 64}, id="wte")
    d.add_node("Linear", {"out_features": 1000, "bias": False}, id="head", tied={"weight": "wte.weight"})
    d.add_edge("idx", "wte")
    d.add_edge("wte", "head")
    r = md.estimate(d, mode="train", batch=2, optimizer="adam", backend="cpu")
    assert r.params == 64_000 and r.param_bytes == 256_000
    untied = copy_design(d)
    untied.nodes["head"].tied = {}
    u = md.estimate(untied, mode="train", batch=2, optimizer="adam", backend="cpu")
    assert u.params == 128_000
    assert u.at_peak["optimizer_state"] - r.at_peak["optimizer_state"] == 2 * 256_000 + 4

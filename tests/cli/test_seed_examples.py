"""The issue's worked examples, through the CLI's JSON (the numbers people asked about)."""

import json

from helpers import EXAMPLES

from memdesigner.cli import main


def run(capsys, *args):
    code = main(["estimate", *map(str, args), "--format", "json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_geron_cnn(capsys):
    r = run(capsys, EXAMPLES / "seed_geron_cnn.json", "--batch", 1, "--mode", "inference", "--dtype", "fp32")
    assert r["params"] == 903_400
    convs = [x for x in r["layers"] if x["type"] == "Conv2d"]
    assert [c["output_shape"] for c in convs] == [[1, 100, 100, 150], [1, 200, 50, 75], [1, 400, 25, 38]]
    assert [c["activation_bytes"] for c in convs] == [6_000_000, 3_000_000, 1_520_000]
    # the textbook answer (18,613,600 B) is a lower bound; eager PyTorch keeps conv and ReLU outputs
    assert r["lower_bound_bytes"] < r["peak_bytes"]


def test_keras_audio_training_does_not_fit_3080(capsys):
    r = run(capsys, EXAMPLES / "seed_keras_audio.json", "--mode", "train", "--optimizer", "adam", "--batch", 1,
            "--dtype", "fp32", "--device", "rtx3080-10gb")
    assert r["params"] == 770_482_865
    assert r["param_bytes"] == 3_081_931_460
    assert r["peak_bytes"] >= 4 * r["param_bytes"]
    assert r["device"]["fits"] is False
    assert r["device"]["headroom_bytes"] < 0
    inf = run(capsys, EXAMPLES / "seed_keras_audio.json", "--mode", "inference", "--batch", 1,
              "--device", "rtx3080-10gb")
    assert inf["device"]["fits"] is True


def test_fc_activation_elements(capsys):
    r = run(capsys, EXAMPLES / "seed_fc.json", "--batch", 256)
    assert r["params"] == 131_410
    elems = sum(x["activation_bytes"] for x in r["layers"] if x["type"] in ("Input", "Linear")) // 4
    assert elems == 1_410 * 256


def test_quantized_weight_bytes(capsys, tmp_path):
    r = run(capsys, EXAMPLES / "seed_quantized.json")
    convs = [x for x in r["layers"] if x["type"] == "Conv2d"]
    assert [c["param_bytes"] for c in convs] == [392, 73_728]  # 3,136 x 1 bit, 73,728 x 8 bits
    # with biases: below 16-bit weights they stay 32-bit (integer accumulators / fp32)
    import memdesigner

    d = memdesigner.load_design(EXAMPLES / "seed_quantized.json")
    for n in d.nodes.values():
        if n.type == "Conv2d":
            d.set_prop(n.id, "bias", True)
    rep = memdesigner.estimate(d)
    assert [x.param_bytes for x in rep.layers if x.type == "Conv2d"] == [392 + 64 * 4, 73_728 + 128 * 4]


def test_json_has_documented_keys(capsys):
    r = run(capsys, EXAMPLES / "resnet18.json", "--mode", "train", "--batch", 8, "--device", "t4", "--max-batch")
    for k in ("params", "param_bytes", "peak_bytes", "device_peak_bytes", "phase_peaks", "at_peak", "layers",
              "timeline", "device", "max_batch"):
        assert k in r
    assert set(r["phase_peaks"]) == {"forward", "backward", "optimizer_step"}
    assert set(r["at_peak"]) == {"weights", "gradients", "optimizer_state", "activations", "workspace"}
    assert set(r["device"]) >= {"id", "name", "capacity_bytes", "fits", "headroom_bytes"}
    assert {"phase", "layer", "bytes", "by_category"} <= set(r["timeline"][0])
    assert r["max_batch"] > 8
    assert all(isinstance(v, int) for v in r["at_peak"].values())


def test_python_api_matches_cli(capsys):
    import memdesigner

    d = memdesigner.load_design(EXAMPLES / "lenet5.json")
    rep = memdesigner.estimate(d, mode="train", batch=8, optimizer="sgd", backend="cpu")
    cli = run(capsys, EXAMPLES / "lenet5.json", "--mode", "train", "--batch", 8, "--optimizer", "sgd",
              "--backend", "cpu")
    assert rep.to_dict() == cli

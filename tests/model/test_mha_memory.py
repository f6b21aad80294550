"""nn.MultiheadAttention(batch_first=True) self-attention, one layer on a (4, L, E) input, SGD
train step / eval no_grad on the CPU: the peaks the truth harness measured with torch 2.14.1
(benchmarks/mha_sweep.py, benchmarks/mha_sweep_truth.json; 2.13.0 runs the same Python).

Derived by hand for L=32, E=128, 4 heads, need_weights=True (s = B*L*E*4 = 65,536 B, the
scores P = B*H*L*L*4 = 65,536 B, parameters 66,048 x 4 = 264,192 B, the input 65,536 B):
forward peak = params + input + kept (linear's copy of the transposed input s, packed q, k, v
3s, scaled q s, softmax P, out_proj's re-laid-out input s) + output s + head-averaged weights
16,384 = 870,400 (the scores died with the softmax). Backward peak at select_backward: params,
input, output, loss 4 + its gradient 4, out_proj's gradients 66,048, the input copy s, the v
gradient waiting for its scatter s, and q's and k's gradients scattered into (3, L, B, E) zeros
with their sum 9s = 1,182,216. The old rule kept the scores and every saved tensor through the
backward: 1,511,432 (+27.8 %)."""

import pytest
from helpers import sequential

import memdesigner

B = 4
# (L, E, heads, kernel, need_weights, dropout, mode): (measured peak, measured forward peak; the
# engine's forward phase ends with the loss, so where the forward peaks at its end: the loss phase's)
CASES = {
    (32, 128, 4, "math", True, 0.0, "train"): (1_182_216, 870_400),
    (32, 128, 4, "fused", False, 0.0, "train"): (1_182_216, 788_480),
    (32, 128, 4, "fused", False, 0.0, "inference"): (395_264, 395_264),
    (64, 64, 2, "math", True, 0.0, "train"): (1_000_712, 787_456),
    (64, 64, 2, "fused", False, 0.0, "train"): (935_176, 590_848),
    (64, 64, 2, "fused", False, 0.0, "inference"): (197_632, 197_632),
    (64, 64, 2, "math", True, 0.1, "train"): (1_197_320, 1_049_600),
    (32, 128, 4, "fused", False, 0.1, "train"): (1_247_752, 1_050_628),  # CPU SDPA's math path
}


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: "-".join(map(str, c)))
def test_mha_peak_matches_pytorch(case):
    n, e, h, kernel, need, p, mode = case
    d = sequential((n, e), [("MultiHeadAttention", {"num_heads": h, "kernel": kernel, "need_weights": need,
                                                    "dropout": p})])
    rep = memdesigner.estimate(d, mode=mode, batch=B, optimizer="sgd" if mode == "train" else "none",
                               backend="cpu")
    peak, fwd = CASES[case]
    assert rep.peak_bytes == peak
    assert rep.phase_peaks["forward"] == fwd

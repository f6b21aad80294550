"""nn.MultiheadAttention called with a key_padding_mask made from the input (as models do), imported
from PyTorch: the peaks the truth harness measured with torch 2.14.1 on the CPU, batch 4
(benchmarks/mha_sweep.py, benchmarks/mha_sweep_truth.json). multi_head_attention_forward makes a
float (B, S) copy of the bool mask (_canonical_mask, 512 B at S=32) and, after in_proj, merges it
into attn_mask as a (B * heads, 1, S) copy (2,048 B at 4 heads); SDPA (need_weights=False) keeps
the merged mask, the math path does not; the eval fast path takes only the float copy. The mask is
the layer's second input, so the bool mask dies with the layer (it is no model output).
L=32, E=128, 4 heads, need_weights: forward peak 870,400 (no mask) + 2,560 + the bool mask 128
= 873,088; eval 411,648 + 512 + 128 = 412,288. Before the fix the masks were not modelled and the
bool mask was kept as a model output: eval 411,776, train 1,182,344."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

B = 4


class Masked(nn.Module):
    def __init__(self, e, h, need, batch_first):
        super().__init__()
        self.attn = nn.MultiheadAttention(e, h, batch_first=batch_first)
        self.need, self.batch_first = need, batch_first

    def forward(self, x):
        kpm = x[..., 0] != x[..., 0]
        if not self.batch_first:
            x = x.transpose(0, 1)
        y = self.attn(x, x, x, key_padding_mask=kpm, need_weights=self.need)[0]
        return y if self.batch_first else y.transpose(0, 1)


# (L, E, heads, need_weights, batch_first): measured (train SGD peak, its forward peak, eval peak)
CASES = {
    (32, 128, 4, True, True): (1_182_216, 873_088, 412_288),
    (32, 128, 4, False, True): (1_182_216, 789_120, 395_904),
    (64, 64, 2, True, True): (1_000_712, 790_784, 264_448),
    (32, 128, 4, True, False): (1_182_216, 873_088, 725_632),
    (64, 64, 2, False, False): (935_176, None, 526_592),
}


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: "-".join(map(str, c)))
def test_key_padding_mask_is_the_layers_input_and_matches_pytorch(case):
    n, e, h, need, bf = case
    with torch.device("meta"):
        m = Masked(e, h, need, bf)
    d = from_module(m, (n, e))
    assert not any("mask" in w for w in d.import_warnings)
    (node,) = [nd for nd in d.nodes.values() if nd.type == "MultiHeadAttention"]
    assert len(d.inputs_of(node.id)) == 2
    train = memdesigner.estimate(d, mode="train", batch=B, optimizer="sgd", backend="cpu")
    infer = memdesigner.estimate(d, mode="inference", batch=B, optimizer="none", backend="cpu")
    peak, fwd, eval_peak = CASES[case]
    assert train.peak_bytes == peak
    if fwd is not None:
        assert train.phase_peaks["forward"] == fwd
    assert infer.peak_bytes == eval_peak

"""nn.MultiheadAttention(batch_first=True) in eval under no_grad with a float (L, L) attn_mask:
MultiheadAttention.forward sets why_not_fast_path ("floating-point masks are not supported for
fast path"), so _native_multi_head_attention does not run and multi_head_attention_forward runs
op by op on the (L, B, E) transposed view, as for batch_first=False. Measured with the truth
harness, torch 2.14.1 CPU, batch 4 (benchmarks/mha_sweep.py row mha_weights_mask, benchmarks/
mha_sweep_truth.json): L=32, E=128, 4 heads, s = B*L*E*4 = 65,536 B; eval peak = params 264,192
+ input s + in_proj's mm and bias add (3s each) + the (L, L) float mask 4,096 = 727,040. Before
the fix the fast path was assumed: 411,648 + 4,096 (-42.8 %). A bool mask keeps the fast path."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

B, L, E, H = 4, 32, 128, 4


class Masked(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.attn = nn.MultiheadAttention(E, H, batch_first=True)
        self.kind = kind

    def forward(self, x):
        m = torch.full((L, L), float("-inf"), device=x.device).triu(1)
        return self.attn(x, x, x, attn_mask=m if self.kind == "float" else m.isinf())[0]


def _import(kind):
    with torch.device("meta"):
        m = Masked(kind)
    d = from_module(m, (L, E))
    (node,) = [nd for nd in d.nodes.values() if nd.type == "MultiHeadAttention"]
    return d, node


def test_float_attn_mask_eval_runs_op_by_op_as_measured():
    d, node = _import("float")
    assert node.props["float_mask"] is True
    est = memdesigner.estimate(d, mode="inference", batch=B, optimizer="none", backend="cpu")
    assert est.peak_bytes == 727_040


def test_bool_attn_mask_is_not_a_float_mask():
    _, node = _import("bool")
    assert node.props["float_mask"] is False


class BoolMasked(nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.attn = nn.MultiheadAttention(E, H, batch_first=True)
        self.causal = causal

    def forward(self, x):
        mask = torch.full((L, L), float("-inf"), device=x.device).triu(1).isinf()
        return self.attn(x, x, x, attn_mask=mask, need_weights=False, is_causal=self.causal)[0]


@pytest.mark.parametrize("causal", [False, True])
def test_bool_attn_mask_eval_keeps_its_float_copy(causal):
    """MultiheadAttention.forward's _canonical_mask turns a bool attn_mask into a float copy
    (zeros_like in the query's dtype, masked_fill_ -inf) before the fast path, alive through
    _native_multi_head_attention; is_causal does not change it. Measured (same harness, both
    is_causal): params 264,192 + input 65,536 + output 65,536 + the bool (L, L) mask 1,024 + its
    float copy L*L*4 = 4,096 -> 400,384 B (without the copy -1.02 %)."""
    with torch.device("meta"):
        m = BoolMasked(causal)
    d = from_module(m, (L, E))
    (node,) = [nd for nd in d.nodes.values() if nd.type == "MultiHeadAttention"]
    assert node.props["bool_mask"] is True and node.props["float_mask"] is False
    est = memdesigner.estimate(d, mode="inference", batch=B, optimizer="none", backend="cpu")
    assert est.peak_bytes == 264_192 + 65_536 + 65_536 + 1_024 + 4_096


def test_float_attn_mask_is_not_a_bool_mask():
    _, node = _import("float")
    assert node.props["bool_mask"] is False

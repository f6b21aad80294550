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

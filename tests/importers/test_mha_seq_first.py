"""nn.MultiheadAttention / nn.TransformerEncoderLayer with batch_first=False (PyTorch's default),
imported from PyTorch: the peaks the truth harness measured with torch 2.14.1 on the CPU, batch
4 (benchmarks/mha_sweep.py, benchmarks/mha_sweep_truth.json). The modules read the (L, B, E)
transposed view of the (B, L, E) input, as batch_first=True reads its own transpose, so training
keeps the same tensors (1,182,216 B, as batch_first); eval differs: the fast path needs
batch_first, so multi_head_attention_forward runs op by op. For L=32, E=128, 4 heads
(s = B*L*E*4 = 65,536 B, parameters 264,192 B, input s): eval peak = params + input + in_proj's
mm and bias add (3s each) = 722,944. For L=64, E=64, 2 heads, need_weights (probabilities
P = B*H*L*L*4 = 2s): packed q, k, v 3s + scores and softmax 2P = 7s, + params 132,096 + input s
= 590,848. Before the fix the module imported as a Generic node with no parameters: 0.12 MiB."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

B = 4


class SeqFirst(nn.Module):
    """``inner`` on the (L, B, E) transposed view of the design's (B, L, E) input."""

    def __init__(self, inner, mha=False, need=True):
        super().__init__()
        self.inner, self.mha, self.need = inner, mha, need

    def forward(self, x):
        x = x.transpose(0, 1)
        y = self.inner(x, x, x, need_weights=self.need)[0] if self.mha else self.inner(x)
        return y.transpose(0, 1)


def _peaks(design):
    train = memdesigner.estimate(design, mode="train", batch=B, optimizer="sgd", backend="cpu").peak_bytes
    infer = memdesigner.estimate(design, mode="inference", batch=B, optimizer="none", backend="cpu").peak_bytes
    return train, infer


# (L, E, heads, need_weights): measured (train SGD peak, eval no_grad peak)
MHA = {
    (32, 128, 4, True): (1_182_216, 722_944),
    (32, 128, 4, False): (1_182_216, 722_944),
    (64, 64, 2, True): (1_000_712, 590_848),
    (64, 64, 2, False): (935_176, 525_312),
}


@pytest.mark.parametrize("case", list(MHA), ids=lambda c: "-".join(map(str, c)))
def test_seq_first_mha_imports_as_the_layer_and_matches_pytorch(case):
    n, e, h, need = case
    with torch.device("meta"):
        m = SeqFirst(nn.MultiheadAttention(e, h), mha=True, need=need)
    d = from_module(m, (n, e))
    (node,) = [nd for nd in d.nodes.values() if nd.type == "MultiHeadAttention"]
    assert node.props["batch_first"] is False
    assert _peaks(d) == MHA[case]


# norm_first: measured (train SGD peak, eval no_grad peak); L=32, E=128, 4 heads, FF 512, dropout 0.1
ENCODER = {False: (3_220_488, 1_448_448), True: (3_220_488, 1_513_984)}


@pytest.mark.parametrize("norm_first", [False, True])
def test_seq_first_encoder_layer_matches_pytorch(norm_first):
    with torch.device("meta"):
        m = SeqFirst(nn.Sequential(nn.TransformerEncoderLayer(128, 4, dim_feedforward=512, dropout=0.1,
                                                              norm_first=norm_first)))
    d = from_module(m, (32, 128))
    assert not [nd for nd in d.nodes.values() if nd.type == "Generic"]
    assert _peaks(d) == ENCODER[norm_first]

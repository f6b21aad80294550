"""transformers 4.x MoE blocks (Mixtral's experts as a ModuleList of w1/w2/w3 MLPs, looped over with a
data-dependent ``nonzero``): fx and torch.export cannot trace them, so the dispatch-level trace
records the block whole, and its tuple output (hidden states, router logits) becomes getitem nodes;
SparseMoE reads the experts' width from the first MLP and follows the eager loop. Before: "a leaf
module returned tuple", then "'ModuleList' object has no attribute 'down_proj'"."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from memdesigner.importers.torch_fx import from_module  # noqa: E402

H, FFN, E, K = 16, 32, 4, 2


class Top2MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(H, FFN, bias=False)
        self.w2 = nn.Linear(FFN, H, bias=False)
        self.w3 = nn.Linear(H, FFN, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MixtralSparseMoeBlock(nn.Module):  # the class name transformers 4.57 gives it
    def __init__(self):
        super().__init__()
        self.top_k = K
        self.gate = nn.Linear(H, E, bias=False)
        self.experts = nn.ModuleList(Top2MLP() for _ in range(E))

    def forward(self, hidden):
        b, t, h = hidden.shape
        x = hidden.view(-1, h)
        logits = self.gate(x)
        w = F.softmax(logits, dim=1, dtype=torch.float)
        w, sel = torch.topk(w, K, dim=-1)
        w = (w / w.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        mask = F.one_hot(sel, num_classes=E).permute(2, 1, 0)
        for e in torch.nonzero(mask.sum(dim=(-1, -2)) > 0)[:, 0].tolist():
            idx, top = torch.where(mask[e])
            out.index_add_(0, top, self.experts[e](x[top]) * w[top, idx, None])
        return out.view(b, t, h), logits


class TinyMoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, H)
        self.moe = MixtralSparseMoeBlock()
        self.head = nn.Linear(H, 64)

    def forward(self, ids):
        h, _ = self.moe(self.emb(ids))
        return self.head(h)


def test_a_transformers_4_moe_block_imports_whole():
    torch.manual_seed(0)
    m = TinyMoE()
    d = from_module(m, (12,), "int64", rebuild=TinyMoE)
    moe = [n for n in d.nodes.values() if n.type == "SparseMoE"]
    assert len(moe) == 1
    p = moe[0].props
    assert (p["num_experts"], p["top_k"], p["intermediate_size"], p["impl"]) == (E, K, FFN, "modulelist")
    assert d.import_params == sum(q.numel() for q in m.parameters())

"""A model that torch.fx cannot trace (a Python ``if`` on a traced shape, as transformers 5's
``create_causal_mask`` has) but torch.export can: export inlines every module, so a MoE block
became its routing and expert ops (grouped_mm a Generic, the router a Linear that LoRA wrapped:
5.25 Mixtral LoRA "shapes 64x2, 64x4 do not broadcast", SGD +6.2 %, Qwen2-MoE SGD +13.3 %). The
importer now takes the dispatch-level trace there, which keeps the block whole as SparseMoE
(5.25 Mixtral SGD +1.5 %, Qwen2-MoE +3.5 %; benchmarks/hf_versions.py)."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from memdesigner.importers.torch_fx import from_module  # noqa: E402
from memdesigner.model.layers import moe as moe_layer  # noqa: E402

H, FFN, E, K, T = 16, 32, 4, 2, 12


def _block_class():
    ns = {"torch": torch, "nn": nn, "F": torch.nn.functional}
    exec(moe_layer._TORCH_CLASS, ns)  # the exported block (class SparseMoeBlock), eager experts
    return ns["SparseMoeBlock"]


class FxUntraceable(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, H)
        self.pos = nn.Parameter(torch.zeros(T, H))
        self.moe = _block_class()(H, E, K, FFN, True, 0, "eager")
        self.head = nn.Linear(H, 64)

    def forward(self, ids):
        h = self.emb(ids)
        if h.shape[1] != self.pos.shape[0]:  # fx: a Proxy in control flow; export: a static shape
            raise ValueError("sequence length")
        return self.head(self.moe(h + self.pos))


def test_a_moe_block_stays_whole_where_only_export_could_trace():
    torch.manual_seed(0)
    m = FxUntraceable()
    d = from_module(m, (T,), "int64", rebuild=FxUntraceable)
    moe = [n for n in d.nodes.values() if n.type == "SparseMoE"]
    assert len(moe) == 1
    p = moe[0].props
    assert (p["num_experts"], p["top_k"], p["intermediate_size"], p["impl"]) == (E, K, FFN, "eager")
    assert not [n for n in d.nodes.values() if n.name.startswith("moe.") and n.type == "Linear"]
    assert d.import_params == sum(q.numel() for q in m.parameters())

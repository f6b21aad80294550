"""Single-layer cases of the LLM layer types: the Hugging Face modules (built by the measuring
script benchmarks/hf_layers_measure.py in the benchmark venv) and the same layers as designs,
so that tests/test_llm_layers_measured.py compares the estimate with the stored measurement
without transformers."""

from memdesigner.model.design import Design

T, IN, H, HEADS, HD = 32, 64, 256, 4, 32


def _design(kind: str) -> Design:
    d = Design(kind)
    d.add_node("Input", {"shape": (T, IN)}, id="x")
    if kind.startswith("rmsnorm"):
        d.add_node("Linear", {"out_features": H, "bias": False}, id="0")
        d.add_node("RMSNorm", {"eps": 1e-6, "variant": kind.split("_")[1]}, id="1")
        d.add_edge("x", "0")
        d.add_edge("0", "1")
        return d
    # rotary: q = Linear(x).view(B, T, heads, hd).transpose(1, 2); rotary tables from x; q rotated
    d.add_node("Linear", {"out_features": HEADS * HD, "bias": False}, id="q_proj")
    d.add_node("RotaryEmbedding", {"head_dim": HD}, id="rotary_emb")
    d.add_node("Reshape", {"shape": (T, HEADS, HD)}, id="view")
    d.add_node("Transpose", {"dim0": 1, "dim1": 2}, id="transpose")
    d.add_node("ApplyRotary", {}, id="rotate")
    d.add_edge("x", "q_proj")
    d.add_edge("x", "rotary_emb")
    d.add_edge("q_proj", "view")
    d.add_edge("view", "transpose")
    d.add_edge("transpose", "rotate", 0, 0)
    d.add_edge("rotary_emb", "rotate", 0, 1)
    d.add_edge("rotary_emb", "rotate", 1, 2)
    return d


KINDS = ("rmsnorm_llama", "rmsnorm_gemma", "rmsnorm_torch", "rotary")
# (key, mode, optimizer, amp)
MODES = (("inference-fp32", "inference", None, False), ("train-sgd-fp32", "train", "sgd", False),
         ("train-sgd-amp", "train", "sgd", True), ("inference-amp", "inference", None, True))
BATCH = 4


def design(kind: str) -> Design:
    return _design(kind)


def module(kind: str):
    """The Hugging Face module (needs torch and transformers)."""
    import torch
    import torch.nn as nn
    import transformers
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm
    from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding, rotate_half

    if kind == "rmsnorm_llama":
        return nn.Sequential(nn.Linear(IN, H, bias=False), LlamaRMSNorm(H, eps=1e-6))
    if kind == "rmsnorm_gemma":
        return nn.Sequential(nn.Linear(IN, H, bias=False), GemmaRMSNorm(H, eps=1e-6))
    if kind == "rmsnorm_torch":
        return nn.Sequential(nn.Linear(IN, H, bias=False), nn.RMSNorm(H, eps=1e-6))

    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            cfg = transformers.LlamaConfig(hidden_size=HEADS * HD, num_attention_heads=HEADS, head_dim=HD)
            self.q_proj = nn.Linear(IN, HEADS * HD, bias=False)
            self.rotary_emb = LlamaRotaryEmbedding(cfg)

        def forward(self, x):
            b, t, _ = x.shape
            position_ids = torch.arange(t, device=x.device).unsqueeze(0)
            cos, sin = self.rotary_emb(x, position_ids)
            q = self.q_proj(x).view(b, t, HEADS, HD).transpose(1, 2)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            return (q * cos) + (rotate_half(q) * sin)

    return Rotary()

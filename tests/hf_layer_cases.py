"""Single-layer cases of the LLM layer types: the Hugging Face modules (built by the measuring
script benchmarks/hf_layers_measure.py in the benchmark venv) and the same layers as designs,
so that tests/accuracy/test_llm_layers_measured.py compares the estimate with the stored measurement
without transformers."""

from memdesigner.model.design import Design

T, IN, H, HEADS, HD = 32, 64, 256, 4, 32
PARTIAL_RD = 24  # Phi-4-mini: partial_rotary_factor 0.75


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
    # (Phi-3: the rotated part concatenated with the pass-through part; partial: 3/4 of head_dim)
    rd = PARTIAL_RD if kind == "rotary_phi3_partial" else HD
    d.add_node("Linear", {"out_features": HEADS * HD, "bias": False}, id="q_proj")
    d.add_node("RotaryEmbedding", {"head_dim": rd}, id="rotary_emb")
    d.add_node("Reshape", {"shape": (T, HEADS, HD)}, id="view")
    d.add_node("Transpose", {"dim0": 1, "dim1": 2}, id="transpose")
    d.add_node("ApplyRotary", {"concat_pass": kind.startswith("rotary_phi3")}, id="rotate")
    d.add_edge("x", "q_proj")
    d.add_edge("x", "rotary_emb")
    d.add_edge("q_proj", "view")
    d.add_edge("view", "transpose")
    d.add_edge("transpose", "rotate", 0, 0)
    d.add_edge("rotary_emb", "rotate", 0, 1)
    d.add_edge("rotary_emb", "rotate", 1, 2)
    return d


KINDS = ("rmsnorm_llama", "rmsnorm_gemma", "rmsnorm_torch", "rotary", "rotary_phi3", "rotary_phi3_partial")
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

    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding
    from transformers.models.phi3.modeling_phi3 import rotate_half as phi3_rotate_half

    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(IN, HEADS * HD, bias=False)
            if kind.startswith("rotary_phi3"):
                cfg = transformers.Phi3Config(hidden_size=HEADS * HD, num_attention_heads=HEADS, pad_token_id=0,
                                              partial_rotary_factor=PARTIAL_RD / HD if kind.endswith("partial")
                                              else 1.0)
                self.rotary_emb = Phi3RotaryEmbedding(cfg)
            else:
                cfg = transformers.LlamaConfig(hidden_size=HEADS * HD, num_attention_heads=HEADS, head_dim=HD)
                self.rotary_emb = LlamaRotaryEmbedding(cfg)

        def forward(self, x):
            b, t, _ = x.shape
            position_ids = torch.arange(t, device=x.device).unsqueeze(0)
            cos, sin = self.rotary_emb(x, position_ids)
            q = self.q_proj(x).view(b, t, HEADS, HD).transpose(1, 2)
            if kind.startswith("rotary_phi3"):  # modeling_phi3.apply_rotary_pos_emb, for q alone
                cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
                rd = cos.shape[-1]
                q_rot, q_pass = q[..., :rd], q[..., rd:]
                return torch.cat([(q_rot * cos) + (phi3_rotate_half(q_rot) * sin), q_pass], dim=-1)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            return (q * cos) + (rotate_half(q) * sin)

    return Rotary()

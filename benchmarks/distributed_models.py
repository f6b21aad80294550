"""Small networks for the distributed benchmark (benchmarks/distributed.py): four processes must
fit a 2-core machine quickly, so these are scaled-down versions of the truth zoo's MLP, CNN,
transformer and LSTM (same layer code, fewer/narrower layers), and a BatchNorm CNN (module buffers:
DDP broadcasts them from rank 0 at every forward). Every factory returns ``(module, input_shape_without_batch)``."""

from __future__ import annotations

import torch
import torch.nn as nn


def mlp():
    """seed_fc's MLP 1000-100-100-100-100-10 (131,410 parameters)."""
    dims = [1000, 100, 100, 100, 100, 10]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers), (1000,)


def wide_mlp():
    """784-1024-1024-10 (1.86 M parameters, 7.1 MiB: more than DDP's 1 MiB first bucket)."""
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10)), (784,)


def lenet5():
    """LeNet-5 on 1x32x32 (61,706 parameters)."""
    return nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.Tanh(), nn.AvgPool2d(2),
        nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.Tanh(),
        nn.Linear(120, 84), nn.Tanh(),
        nn.Linear(84, 10),
    ), (1, 32, 32)


def small_cnn():
    """conv-relu-maxpool x2 on 3x32x32, then a linear head."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10),
    ), (3, 32, 32)


def bn_cnn():
    """conv-BN-relu x2 with a stride-2 conv between, on 3x32x32 (BatchNorm buffers)."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    ), (3, 32, 32)


class _Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * self.scale
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class _Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = _Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """The zoo's ViT at 32x32, patch 8, width 64, 2 blocks."""

    def __init__(self, img=32, patch=8, dim=64, depth=2, heads=2, num_classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        n = (img // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[_Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def tiny_vit():
    return TinyViT(), (3, 32, 32)


class LSTMClassifier(nn.Module):
    """The zoo's LSTM classifier, narrower: Embedding(1000, 32) -> 2-layer LSTM(64) -> Linear."""

    def __init__(self, vocab=1000, emb=32, hidden=64, layers=2, num_classes=10):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)
        self.truth_input = ("tokens", vocab)

    def forward(self, idx):
        out, _ = self.lstm(self.embedding(idx))
        return self.fc(out[:, -1])


def small_lstm():
    return LSTMClassifier(), (16,)


class ZeroOrder(nn.Module):
    """An MLP 64-80-75-96-84-10 whose layers are registered in another order than they run
    (``model.parameters()``: head, fc_c, fc_a, fc_d, fc_b): ZeroRedundancyOptimizer's partition
    (largest first, each to the emptiest rank) gives other shards than assigning the tensors in
    either order unsorted, and the ranks' Adam peaks differ."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(84, 10)
        self.fc_c = nn.Linear(75, 96)
        self.fc_a = nn.Linear(64, 80)
        self.fc_d = nn.Linear(96, 84)
        self.fc_b = nn.Linear(80, 75)

    def forward(self, x):
        for fc in (self.fc_a, self.fc_b, self.fc_c, self.fc_d):
            x = torch.relu(fc(x))
        return self.head(x)


def zero_order():
    return ZeroOrder(), (64,)


MODELS = {"mlp": mlp, "wide_mlp": wide_mlp, "lenet5": lenet5, "small_cnn": small_cnn, "bn_cnn": bn_cnn, "tiny_vit": tiny_vit,
          "small_lstm": small_lstm, "zero_order": zero_order}


# --------------------------------------------------------------------------
# tensor parallel (benchmarks/distributed.py --strategy tp): every Linear is a named child that
# torch's parallelize_module plan can address (memdesigner.engine.tensor_parallel's rule)
# --------------------------------------------------------------------------
class _TpMlpBlock(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.act = nn.ReLU()
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class TpMlp(nn.Module):
    """A stack of Megatron MLP blocks 256-1024-256 on (B, 256) rows: up colwise, down rowwise."""

    def __init__(self, dim=256, hidden=1024, depth=2):
        super().__init__()
        self.layers = nn.Sequential(*[_TpMlpBlock(dim, hidden) for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)


def tp_mlp():
    return TpMlp(), (256,)


class _TpResMlpBlock(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = _TpMlpBlock(dim, hidden)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class TpResMlp(nn.Module):
    """Pre-norm residual MLP blocks on (B, S, D) tokens: the MLP half of a transformer."""

    def __init__(self, dim=128, hidden=512, depth=2):
        super().__init__()
        self.layers = nn.Sequential(*[_TpResMlpBlock(dim, hidden) for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)


def tp_resmlp():
    return TpResMlp(), (32, 128)


class _TpAttention(nn.Module):
    """Llama-style attention: separate q/k/v/o projections; the head count follows the local
    width (``view(B, S, -1, head_dim)``), as torchtitan's does, so it runs sharded."""

    def __init__(self, dim, heads):
        super().__init__()
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, dim)
        self.wk = nn.Linear(dim, dim)
        self.wv = nn.Linear(dim, dim)
        self.wo = nn.Linear(dim, dim)

    def forward(self, x):
        B, S, _ = x.shape
        q = self.wq(x).view(B, S, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, S, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, S, -1, self.head_dim).transpose(1, 2)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(B, S, -1))


class _TpFeedForward(nn.Module):
    """SwiGLU: w1 (gate) and w3 (up) colwise, w2 (down) rowwise."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))


class _TpBlock(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.attention_norm = nn.LayerNorm(dim)
        self.attention = _TpAttention(dim, heads)
        self.ffn_norm = nn.LayerNorm(dim)
        self.feed_forward = _TpFeedForward(dim, hidden)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class TpTransformer(nn.Module):
    """torch's tensor-parallel tutorial's Llama, small: token embedding, 2 blocks, norm, output."""

    def __init__(self, vocab=512, dim=128, heads=4, hidden=256, depth=2, seq=32):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.Sequential(*[_TpBlock(dim, heads, hidden) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        self.truth_input = ("tokens", vocab)

    def forward(self, idx):
        return self.output(self.norm(self.layers(self.tok_embeddings(idx))))


def tp_transformer():
    return TpTransformer(), (32,)


class TpBlocks(nn.Module):
    """The transformer's blocks alone on (B, S, D) activations (no embedding / output head)."""

    def __init__(self, dim=128, heads=4, hidden=256, depth=2):
        super().__init__()
        self.layers = nn.Sequential(*[_TpBlock(dim, heads, hidden) for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)


def tp_blocks():
    return TpBlocks(), (32, 128)


MODELS.update({"tp_mlp": tp_mlp, "tp_resmlp": tp_resmlp, "tp_transformer": tp_transformer, "tp_blocks": tp_blocks})


class LlamaStack(nn.Module):
    """A Llama-style decoder as HF and torchtitan write it: the layers in an ``nn.ModuleList``
    (no forward of its own: the model loops over it), embedding, final norm, output head. FSDP2
    cannot wrap the list itself (``fully_shard`` raises for a container without forward), so
    each layer is its own unit: ``for layer in model.layers: fully_shard(layer)``."""

    def __init__(self, vocab=512, dim=128, heads=4, hidden=256, depth=4):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([_TpBlock(dim, heads, hidden) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        self.truth_input = ("tokens", vocab)

    def forward(self, idx):
        h = self.tok_embeddings(idx)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def llama_stack():
    return LlamaStack(), (32,)


class DecoderStack(nn.Module):
    """The decoder layers under a model body (HF's ``LlamaForCausalLM.model.layers``): the top-level
    child ``model`` holds the embedding, the ``nn.ModuleList`` of layers and the final norm, the
    output head sits beside it."""

    def __init__(self, vocab=512, dim=128, heads=4, hidden=256, depth=3):
        super().__init__()
        self.model = _DecoderBody(vocab, dim, heads, hidden, depth)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.truth_input = ("tokens", vocab)

    def forward(self, idx):
        return self.lm_head(self.model(idx))


class _DecoderBody(nn.Module):
    def __init__(self, vocab, dim, heads, hidden, depth):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([_TpBlock(dim, heads, hidden) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, idx):
        h = self.embed_tokens(idx)
        for layer in self.layers:
            h = layer(h)
        return self.norm(h)


def decoder_stack():
    return DecoderStack(), (32,)


MODELS.update({"llama_stack": llama_stack, "decoder_stack": decoder_stack})


# --------------------------------------------------------------------------
# a design drawn by hand in memdesigner (no importer, no module scopes): its top-level layers and
# a block instance repeated 3 times; the PyTorch it stands for is written out beside it
# --------------------------------------------------------------------------
HAND_VOCAB, HAND_SEQ, HAND_DIM, HAND_HIDDEN, HAND_DEPTH = 512, 32, 128, 512, 3


def hand_stack_design():
    """The memdesigner design as a person draws it: Input (tokens), Embedding, a block "layer"
    (LayerNorm, Linear, GELU, Linear, Add: a pre-norm residual MLP) placed once with repeat 3, a
    final LayerNorm and a Linear head. Top-level layers carry no scope; the block's nodes get theirs
    from the expansion (``layers.0`` ...). (No attention: nn.MultiheadAttention's own rule is off
    at this size in one process already, which would hide what FSDP adds.)"""
    from memdesigner.model import blocks
    from memdesigner.model.design import Design

    d = Design("hand_stack")
    d.add_node("Input", {"shape": (HAND_SEQ,), "dtype": "int64"}, id="tokens")
    d.add_node("Embedding", {"num_embeddings": HAND_VOCAB, "embedding_dim": HAND_DIM}, id="embed")
    d.add_edge("tokens", "embed")
    g = blocks.new_definition(d, "layer").graph
    g.add_node("BlockInput", {"shape": (HAND_SEQ, HAND_DIM)}, id="x")
    g.add_node("LayerNorm", {}, id="norm")
    g.add_node("Linear", {"out_features": HAND_HIDDEN}, id="fc1")
    g.add_node("GELU", {}, id="act")
    g.add_node("Linear", {"out_features": HAND_DIM}, id="fc2")
    g.add_node("Add", {}, id="add")
    g.add_node("BlockOutput", {}, id="y")
    for a, b, port in (("x", "norm", 0), ("norm", "fc1", 0), ("fc1", "act", 0), ("act", "fc2", 0),
                       ("x", "add", 0), ("fc2", "add", 1), ("add", "y", 0)):
        g.add_edge(a, b, dst_port=port)
    d.add_node("Block", {"definition": "layer", "repeat": HAND_DEPTH}, id="layers")
    d.add_edge("embed", "layers")
    d.add_node("LayerNorm", {}, id="norm")
    d.add_node("Linear", {"out_features": HAND_VOCAB}, id="head")
    d.add_edge("layers", "norm")
    d.add_edge("norm", "head")
    return d


class _HandLayer(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(self.norm(x))))


class HandStack(nn.Module):
    """``hand_stack_design`` in PyTorch: each top-level layer a child of the model, the block's
    repetitions an ``nn.ModuleList`` the forward loops over (so each is its own ``fully_shard``)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(HAND_VOCAB, HAND_DIM)
        self.layers = nn.ModuleList([_HandLayer(HAND_DIM, HAND_HIDDEN) for _ in range(HAND_DEPTH)])
        self.norm = nn.LayerNorm(HAND_DIM)
        self.head = nn.Linear(HAND_DIM, HAND_VOCAB)
        self.truth_input = ("tokens", HAND_VOCAB)

    def forward(self, idx):
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def hand_stack():
    return HandStack(), (HAND_SEQ,)


MODELS.update({"hand_stack": hand_stack})
HAND_DESIGNS = {"hand_stack": hand_stack_design}  # networks whose design is drawn, not imported


# LoRA (peft, r=8 on every fc1 / fc2) on the drawn stack: peft's LoraLayer holds lora_A / lora_B as
# submodules of the Linear it wraps, so fully_shard of a layer shards its adapters with it
HAND_LORA = {"lora_r": 8, "lora_targets": ("fc1", "fc2")}


def hand_stack_lora():
    from peft import LoraConfig, inject_adapter_in_model

    model = HandStack()
    inject_adapter_in_model(LoraConfig(r=HAND_LORA["lora_r"], target_modules=list(HAND_LORA["lora_targets"])), model)
    for name, p in model.named_parameters():  # get_peft_model's mark_only_lora_as_trainable
        p.requires_grad_("lora_" in name)
    return model, (HAND_SEQ,)


MODELS.update({"hand_stack_lora": hand_stack_lora})
HAND_DESIGNS["hand_stack_lora"] = hand_stack_design
HAND_SETTINGS = {"hand_stack_lora": HAND_LORA}  # estimate settings of a drawn design's measured variant

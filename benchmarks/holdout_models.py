"""Holdout architectures for memdesigner's accuracy check (none of them is in shared/truth/zoo.py).

Every factory returns ``(module, input_shape_without_batch)`` like ``zoo.py``.  Token models set
``module.truth_input = ("tokens", vocab)`` so that the harness feeds int64 ids.

The models are written the way people write PyTorch in practice: custom ``forward`` methods with
local variables, ``nn.Sequential``, ``nn.ModuleList`` loops, functional calls (``F.relu``,
``F.max_pool2d``, ``F.scaled_dot_product_attention``...), ``torch.cat`` skips, registered buffers,
``nn.Parameter`` position embeddings and weight tying.  Sizes are small so that a train step measures
in a few seconds on 2 CPU cores.

``CNN_MODELS`` lists the float-image/audio models that also get a bf16 inference configuration.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------
# 1. GroupNorm + SiLU ResNet-ish CNN, depthwise-separable convs, squeeze-excitation
# --------------------------------------------------------------------------
class SqueezeExcite(nn.Module):
    def __init__(self, ch, reduction=4):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(ch, ch // reduction, 1)
        self.fc2 = nn.Conv2d(ch // reduction, ch, 1)

    def forward(self, x):
        s = self.pool(x)
        s = F.silu(self.fc1(s))
        s = torch.sigmoid(self.fc2(s))
        return x * s


class DSResBlock(nn.Module):
    """Depthwise 3x3 -> GN -> SiLU -> pointwise 1x1 -> GN -> SE, plus a (projected) shortcut."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False)
        self.gn1 = nn.GroupNorm(8, cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.gn2 = nn.GroupNorm(8, cout)
        self.se = SqueezeExcite(cout)
        self.act = nn.SiLU()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.GroupNorm(8, cout))
        else:
            self.shortcut = nn.Identity()

    def forward(self, x):
        h = self.act(self.gn1(self.dw(x)))
        h = self.gn2(self.pw(h))
        h = self.se(h)
        return self.act(h + self.shortcut(x))


class SEResNetGN(nn.Module):
    def __init__(self, widths=(32, 64, 128, 256), num_classes=100):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, stride=2, padding=1, bias=False),
                                  nn.GroupNorm(8, widths[0]), nn.SiLU())
        blocks = []
        c = widths[0]
        for i, w in enumerate(widths):
            blocks.append(DSResBlock(c, w, stride=1 if i == 0 else 2))
            blocks.append(DSResBlock(w, w))
            c = w
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(c, num_classes)

    def forward(self, x):
        x = self.stem(x)
        for blk in self.blocks:
            x = blk(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


def se_resnet_gn():
    return SEResNetGN(), (3, 64, 64)


# --------------------------------------------------------------------------
# 2. Small U-Net with bilinear upsampling (no ConvTranspose)
# --------------------------------------------------------------------------
class DoubleConvBN(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.net(x)


class UNetBilinear(nn.Module):
    def __init__(self, cin=3, ncls=2, base=16):
        super().__init__()
        self.inc = DoubleConvBN(cin, base)
        self.down1 = DoubleConvBN(base, base * 2)
        self.down2 = DoubleConvBN(base * 2, base * 4)
        self.down3 = DoubleConvBN(base * 4, base * 4)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.up1 = DoubleConvBN(base * 8, base * 2)
        self.up2 = DoubleConvBN(base * 4, base)
        self.up3 = DoubleConvBN(base * 2, base)
        self.outc = nn.Conv2d(base, ncls, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(F.max_pool2d(x1, 2))
        x3 = self.down2(F.max_pool2d(x2, 2))
        x4 = self.down3(F.max_pool2d(x3, 2))
        y = self.up1(torch.cat([x3, self.up(x4)], dim=1))
        y = self.up2(torch.cat([x2, self.up(y)], dim=1))
        y = self.up3(torch.cat([x1, self.up(y)], dim=1))
        return self.outc(y)


def unet_bilinear():
    return UNetBilinear(), (3, 64, 64)


# --------------------------------------------------------------------------
# 3. Tiny GPT with nn.MultiheadAttention (batch_first), learned nn.Parameter positions
# --------------------------------------------------------------------------
class MHABlock(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.register_buffer("causal", torch.triu(torch.ones(ctx, ctx, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        t = x.size(1)
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=self.causal[:t, :t])
        x = x + a
        x = x + self.mlp(self.ln2(x))
        return x


class TinyGPTMHA(nn.Module):
    def __init__(self, vocab=2000, ctx=64, d=128, heads=4, layers=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, ctx, d))
        self.blocks = nn.ModuleList([MHABlock(d, heads, ctx) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.truth_input = ("tokens", vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, : idx.size(1)]
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


def gpt_mha():
    return TinyGPTMHA(), (64,)


# --------------------------------------------------------------------------
# 4. Tiny GPT with a manual qkv projection + F.scaled_dot_product_attention, tied lm_head
# --------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, split_from_shape=False):
        super().__init__()
        self.heads = heads
        self.n_embd = d
        self.split_from_shape = split_from_shape
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.size()
        # nanoGPT splits by the attribute; a common variant splits by the traced size ``c``
        q, k, v = self.qkv(x).split(c if self.split_from_shape else self.n_embd, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class SDPABlock(nn.Module):
    def __init__(self, d, heads, split_from_shape=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, split_from_shape)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))
        return x


class TinyGPTSDPA(nn.Module):
    def __init__(self, vocab=2000, ctx=64, d=128, heads=4, layers=4, tie=True, split_from_shape=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.h = nn.ModuleList([SDPABlock(d, heads, split_from_shape) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tie:
            self.lm_head.weight = self.wte.weight
        self.truth_input = ("tokens", vocab)

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return self.lm_head(x)


def gpt_sdpa():
    return TinyGPTSDPA(tie=False), (64,)


def gpt_sdpa_tied():
    return TinyGPTSDPA(tie=True), (64,)


def gpt_sdpa_shape_split():
    """gpt_sdpa, but ``qkv.split(c, dim=2)`` with ``c`` taken from ``x.size()`` (import probe)."""
    return TinyGPTSDPA(tie=False, split_from_shape=True), (64,)


# --------------------------------------------------------------------------
# 5. Bidirectional GRU text classifier, 6. 1-layer LSTM with max-over-time pooling
# --------------------------------------------------------------------------
class BiGRUClassifier(nn.Module):
    def __init__(self, vocab=5000, emb=128, hidden=128, num_classes=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb, padding_idx=0)
        self.gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(2 * hidden, num_classes)
        self.truth_input = ("tokens", vocab)

    def forward(self, tokens):
        x = self.emb(tokens)
        _, h_n = self.gru(x)  # (2, B, H)
        h = torch.cat([h_n[0], h_n[1]], dim=1)
        return self.fc(self.drop(h))


def bigru_classifier():
    return BiGRUClassifier(), (64,)


class LSTMMaxPool(nn.Module):
    def __init__(self, vocab=5000, emb=100, hidden=192, num_classes=5):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=1, batch_first=True)
        self.classifier = nn.Linear(hidden, num_classes)
        self.truth_input = ("tokens", vocab)

    def forward(self, x):
        out, (h, c) = self.lstm(self.embedding(x))
        pooled, _ = out.max(dim=1)
        return self.classifier(pooled)


def lstm_maxpool():
    return LSTMMaxPool(), (80,)


# --------------------------------------------------------------------------
# 7. Conv1d audio model
# --------------------------------------------------------------------------
class AudioConv1d(nn.Module):
    def __init__(self, n_classes=35, chans=(32, 64, 128, 128)):
        super().__init__()
        layers = []
        cin = 1
        for i, c in enumerate(chans):
            k, s = (80, 4) if i == 0 else (3, 1)
            layers += [nn.Conv1d(cin, c, k, stride=s, padding=k // 2 if i else 0),
                       nn.BatchNorm1d(c), nn.ReLU(), nn.MaxPool1d(4 if i == 0 else 2)]
            cin = c
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, n_classes)

    def forward(self, x):
        x = self.features(x)
        x = x.mean(dim=-1)  # global average over time
        return self.fc(x)


def audio_conv1d():
    return AudioConv1d(), (1, 8000)


# --------------------------------------------------------------------------
# 8. MLP with BatchNorm1d + LeakyReLU + Dropout
# --------------------------------------------------------------------------
def mlp_bn_leaky():
    dims = [784, 1024, 512, 256]
    layers = []
    for a, b in zip(dims[:-1], dims[1:]):
        layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.LeakyReLU(0.1), nn.Dropout(0.3)]
    layers.append(nn.Linear(dims[-1], 10))
    return nn.Sequential(*layers), (784,)


# --------------------------------------------------------------------------
# 9. VGG-style CNN with ReLU6 and AvgPool2d
# --------------------------------------------------------------------------
class VGGReLU6(nn.Module):
    def __init__(self, cfg=(32, 32, "A", 64, 64, "A", 128, 128, "A"), num_classes=10):
        super().__init__()
        layers, c = [], 3
        for v in cfg:
            if v == "A":
                layers.append(nn.AvgPool2d(2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU6(inplace=True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(c * 8 * 8, 256), nn.ReLU6(), nn.Linear(256, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def vgg_relu6():
    return VGGReLU6(), (3, 64, 64)


# --------------------------------------------------------------------------
# 10. Keras-style CNN: (Conv-ReLU-MaxPool) x3, Flatten, Dense, Softmax
# --------------------------------------------------------------------------
def keras_cnn():
    m = nn.Sequential(
        nn.Conv2d(3, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 6 * 6, 128), nn.ReLU(),
        nn.Linear(128, 10), nn.Softmax(dim=1),
    )
    return m, (3, 64, 64)


# --------------------------------------------------------------------------
# 11. DenseNet-ish block with torch.cat
# --------------------------------------------------------------------------
class DenseLayer(nn.Module):
    def __init__(self, cin, growth, bn_size=4):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, feats):
        x = torch.cat(feats, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class DenseBlock(nn.Module):
    def __init__(self, n, cin, growth):
        super().__init__()
        self.layers = nn.ModuleList([DenseLayer(cin + i * growth, growth) for i in range(n)])

    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(layer(feats))
        return torch.cat(feats, 1)


class MiniDenseNet(nn.Module):
    def __init__(self, growth=16, blocks=(4, 4, 4), num_classes=10):
        super().__init__()
        c = 2 * growth
        self.stem = nn.Conv2d(3, c, 3, padding=1, bias=False)
        stages = []
        for i, n in enumerate(blocks):
            stages.append(DenseBlock(n, c, growth))
            c += n * growth
            if i != len(blocks) - 1:
                stages.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                                            nn.AvgPool2d(2)))
                c //= 2
        self.stages = nn.Sequential(*stages)
        self.norm = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        x = F.relu(self.norm(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)
        return self.fc(x)


def densenet_mini():
    return MiniDenseNet(), (3, 32, 32)


# --------------------------------------------------------------------------
# 12. ViT with mean pooling (no class token) using nn.TransformerEncoder (pre-norm, GELU)
# --------------------------------------------------------------------------
class ViTMeanPool(nn.Module):
    def __init__(self, img=64, patch=8, d=192, depth=4, heads=3, num_classes=100):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, d, patch, stride=patch)
        n = (img // patch) ** 2
        self.pos_embed = nn.Parameter(torch.randn(1, n, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = x + self.pos_embed
        x = self.encoder(x)
        x = self.norm(x).mean(dim=1)
        return self.head(x)


def vit_meanpool():
    return ViTMeanPool(), (3, 64, 64)


# --------------------------------------------------------------------------
# 13. PyTorch-tutorial style MNIST net: functional relu/max_pool2d/dropout, view, log_softmax
# --------------------------------------------------------------------------
class TutorialNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = x.view(x.size(0), -1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def tutorial_mnist():
    return TutorialNet(), (1, 28, 28)


# --------------------------------------------------------------------------
# 14. MLP-Mixer (token-mixing MLP over transposed patches)
# --------------------------------------------------------------------------
class MixerBlock(nn.Module):
    def __init__(self, n_tokens, d, tok_hidden, ch_hidden):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.token_mlp = nn.Sequential(nn.Linear(n_tokens, tok_hidden), nn.GELU(), nn.Linear(tok_hidden, n_tokens))
        self.norm2 = nn.LayerNorm(d)
        self.channel_mlp = nn.Sequential(nn.Linear(d, ch_hidden), nn.GELU(), nn.Linear(ch_hidden, d))

    def forward(self, x):
        y = self.norm1(x).transpose(1, 2)
        x = x + self.token_mlp(y).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class MLPMixer(nn.Module):
    def __init__(self, img=64, patch=8, d=128, depth=4, num_classes=10):
        super().__init__()
        n = (img // patch) ** 2
        self.stem = nn.Conv2d(3, d, patch, stride=patch)
        self.blocks = nn.Sequential(*[MixerBlock(n, d, 2 * n, 4 * d) for _ in range(depth)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = x.flatten(2).permute(0, 2, 1)
        x = self.norm(self.blocks(x))
        return self.head(x.mean(1))


def mlp_mixer():
    return MLPMixer(), (3, 64, 64)


# --------------------------------------------------------------------------
# 15. Dilated residual TCN over Conv1d with in-place ReLU and a residual add
# --------------------------------------------------------------------------
class TCNBlock(nn.Module):
    def __init__(self, ch, dilation):
        super().__init__()
        self.conv1 = nn.Conv1d(ch, ch, 3, padding=dilation, dilation=dilation)
        self.bn1 = nn.BatchNorm1d(ch)
        self.conv2 = nn.Conv1d(ch, ch, 3, padding=dilation, dilation=dilation)
        self.bn2 = nn.BatchNorm1d(ch)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        residual = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += residual
        return self.relu(out)


class TCN(nn.Module):
    def __init__(self, cin=40, ch=64, n_blocks=4, num_classes=12):
        super().__init__()
        self.inp = nn.Conv1d(cin, ch, 1)
        self.blocks = nn.ModuleList([TCNBlock(ch, 2 ** i) for i in range(n_blocks)])
        self.out = nn.Linear(ch, num_classes)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x.mean(2))


def tcn():
    return TCN(), (40, 400)


MODELS = {
    "se_resnet_gn": se_resnet_gn,
    "unet_bilinear": unet_bilinear,
    "gpt_mha": gpt_mha,
    "gpt_sdpa": gpt_sdpa,
    "gpt_sdpa_tied": gpt_sdpa_tied,
    "bigru_classifier": bigru_classifier,
    "lstm_maxpool": lstm_maxpool,
    "audio_conv1d": audio_conv1d,
    "mlp_bn_leaky": mlp_bn_leaky,
    "vgg_relu6": vgg_relu6,
    "keras_cnn": keras_cnn,
    "densenet_mini": densenet_mini,
    "vit_meanpool": vit_meanpool,
    "tutorial_mnist": tutorial_mnist,
    "mlp_mixer": mlp_mixer,
    "tcn": tcn,
}

# variants that are only imported (not measured): they probe the importer on common idioms whose
# memory behaviour is already covered by a measured model
IMPORT_PROBES = {
    "gpt_sdpa_shape_split": gpt_sdpa_shape_split,
}

# float-input convolutional models that also get a bf16 inference configuration
CNN_MODELS = ("se_resnet_gn", "unet_bilinear", "audio_conv1d", "vgg_relu6", "keras_cnn", "densenet_mini",
              "tutorial_mnist", "tcn")

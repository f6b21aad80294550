"""Second holdout round for memdesigner's accuracy check.

None of these architectures is in shared/truth/zoo.py or benchmarks/holdout_models.py.  Every
factory returns ``(module, input_shape_without_batch)`` like ``zoo.py``; token models set
``module.truth_input = ("tokens", vocab)``.  Written the way people write PyTorch in practice
(in-place activations, channels-last permutes, explicit attention with a mask, Python loops over
time steps, shared submodules, slicing, ``torch.max`` tuples, ``nn.Upsample`` + ``torch.cat``).
Sizes are small so that a train step measures in a few seconds on 2 CPU cores.

``CNN_MODELS`` is empty: this round measures fp32 only.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------
# 1. EfficientNet-B0-like MBConv stack (BN, SiLU(inplace=True), depthwise, SE)
# --------------------------------------------------------------------------
class SE(nn.Module):
    def __init__(self, ch, sq):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(ch, sq, 1)
        self.fc2 = nn.Conv2d(sq, ch, 1)
        self.activation = nn.SiLU(inplace=True)
        self.scale_activation = nn.Sigmoid()

    def forward(self, x):
        s = self.avgpool(x)
        s = self.activation(self.fc1(s))
        s = self.scale_activation(self.fc2(s))
        return s * x


class MBConv(nn.Module):
    def __init__(self, cin, cout, expand, k, stride):
        super().__init__()
        mid = cin * expand
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU(inplace=True)]
        layers += [nn.Conv2d(mid, mid, k, stride, k // 2, groups=mid, bias=False), nn.BatchNorm2d(mid),
                   nn.SiLU(inplace=True), SE(mid, max(1, cin // 4)),
                   nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x):
        out = self.block(x)
        if self.use_res:
            out = out + x
        return out


class EfficientNetLite(nn.Module):
    # (expand, k, stride, cin, cout, repeats)
    CFG = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 2)]

    def __init__(self, num_classes=100):
        super().__init__()
        feats = [nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.SiLU(inplace=True))]
        for e, k, s, cin, cout, n in self.CFG:
            for i in range(n):
                feats.append(MBConv(cin if i == 0 else cout, cout, e, k, s if i == 0 else 1))
        feats.append(nn.Sequential(nn.Conv2d(80, 320, 1, bias=False), nn.BatchNorm2d(320), nn.SiLU(inplace=True)))
        self.features = nn.Sequential(*feats)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2, inplace=True), nn.Linear(320, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def efficientnet_lite():
    return EfficientNetLite(), (3, 64, 64)


# --------------------------------------------------------------------------
# 2. ConvNeXt-tiny-like stages (dw 7x7, channels-last LayerNorm via permute, layer scale)
# --------------------------------------------------------------------------
class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over channels of an NCHW tensor (permute to channels-last and back)."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim, layer_scale=1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale * torch.ones(dim))

    def forward(self, x):
        shortcut = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
        x = self.norm(x)
        x = self.pwconv1(x)
        x = self.act(x)
        x = self.pwconv2(x)
        x = self.gamma * x
        x = x.permute(0, 3, 1, 2)
        return shortcut + x


class ConvNeXtMini(nn.Module):
    def __init__(self, dims=(32, 64, 128), depths=(2, 2, 2), num_classes=100):
        super().__init__()
        self.downsample_layers = nn.ModuleList()
        self.downsample_layers.append(nn.Sequential(nn.Conv2d(3, dims[0], 4, stride=4),
                                                    LayerNorm2d(dims[0], eps=1e-6)))
        for i in range(len(dims) - 1):
            self.downsample_layers.append(nn.Sequential(LayerNorm2d(dims[i], eps=1e-6),
                                                        nn.Conv2d(dims[i], dims[i + 1], 2, stride=2)))
        self.stages = nn.ModuleList(nn.Sequential(*[ConvNeXtBlock(d) for _ in range(n)])
                                    for d, n in zip(dims, depths))
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x):
        for down, stage in zip(self.downsample_layers, self.stages):
            x = stage(down(x))
        x = self.norm(x.mean([-2, -1]))
        return self.head(x)


def convnext_mini():
    return ConvNeXtMini(), (3, 64, 64)


# --------------------------------------------------------------------------
# 3. BERT-style encoder: token + position + segment embeddings, explicit attention + mask, tanh pooler
# --------------------------------------------------------------------------
class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads, p=0.1):
        super().__init__()
        self.num_heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(p)

    def transpose_for_scores(self, x):
        new_shape = x.size()[:-1] + (self.num_heads, self.head_dim)
        return x.view(new_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        q = self.transpose_for_scores(self.query(hidden_states))
        k = self.transpose_for_scores(self.key(hidden_states))
        v = self.transpose_for_scores(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores / math.sqrt(self.head_dim)
        scores = scores + attention_mask
        probs = nn.functional.softmax(scores, dim=-1)
        probs = self.dropout(probs)
        ctx = torch.matmul(probs, v)
        ctx = ctx.permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (self.num_heads * self.head_dim,))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, inter, p=0.1):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads, p)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_drop = nn.Dropout(p)
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, inter)
        self.output = nn.Linear(inter, hidden)
        self.out_drop = nn.Dropout(p)
        self.out_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask):
        a = self.attention(x, mask)
        x = self.attn_norm(self.attn_drop(self.attn_out(a)) + x)
        h = F.gelu(self.intermediate(x))
        return self.out_norm(self.out_drop(self.output(h)) + x)


class MiniBert(nn.Module):
    def __init__(self, vocab=3000, hidden=128, layers=2, heads=4, inter=512, max_pos=128, types=2, num_labels=3):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.token_type_embeddings = nn.Embedding(types, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.emb_drop = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(max_pos).expand((1, -1)), persistent=False)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, inter) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.pooler_act = nn.Tanh()
        self.cls_drop = nn.Dropout(0.1)
        self.classifier = nn.Linear(hidden, num_labels)
        self.truth_input = ("tokens", vocab)

    def forward(self, input_ids):
        seq_len = input_ids.size(1)
        token_type_ids = torch.zeros_like(input_ids)
        attention_mask = (input_ids != 0).long()
        position_ids = self.position_ids[:, :seq_len]
        x = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
             + self.position_embeddings(position_ids))
        x = self.emb_drop(self.emb_norm(x))
        ext = attention_mask[:, None, None, :].to(dtype=x.dtype)
        ext = (1.0 - ext) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, ext)
        pooled = self.pooler_act(self.pooler(x[:, 0]))
        return self.classifier(self.cls_drop(pooled))


def mini_bert():
    return MiniBert(), (64,)


# --------------------------------------------------------------------------
# 4. Seq2seq GRU encoder-decoder with teacher forcing (nn.GRU encoder, nn.GRUCell decoder loop)
# --------------------------------------------------------------------------
class Seq2SeqGRU(nn.Module):
    def __init__(self, vocab=2000, emb=96, hidden=128, src_len=24, tgt_len=8):
        super().__init__()
        self.src_len, self.tgt_len = src_len, tgt_len
        self.src_emb = nn.Embedding(vocab, emb)
        self.tgt_emb = nn.Embedding(vocab, emb)
        self.encoder = nn.GRU(emb, hidden, batch_first=True)
        self.decoder = nn.GRUCell(emb, hidden)
        self.out = nn.Linear(hidden, vocab)
        self.truth_input = ("tokens", vocab)

    def forward(self, tokens):
        src = tokens[:, : self.src_len]
        tgt = tokens[:, self.src_len:]
        _, h = self.encoder(self.src_emb(src))
        h = h.squeeze(0)
        emb = self.tgt_emb(tgt)
        logits = []
        for t in range(self.tgt_len):
            h = self.decoder(emb[:, t], h)
            logits.append(self.out(h))
        return torch.stack(logits, dim=1)


def seq2seq_gru():
    m = Seq2SeqGRU()
    return m, (m.src_len + m.tgt_len,)


# --------------------------------------------------------------------------
# 5. Kim-style 1-D CNN text classifier, several kernel sizes, max over time
# --------------------------------------------------------------------------
class TextCNN(nn.Module):
    def __init__(self, vocab=5000, emb=128, n_filters=100, sizes=(3, 4, 5), num_classes=4):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(emb, n_filters, k) for k in sizes)
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(n_filters * len(sizes), num_classes)
        self.truth_input = ("tokens", vocab)

    def forward(self, text):
        x = self.embedding(text).permute(0, 2, 1)  # (B, E, L)
        pooled = []
        for i, conv in enumerate(self.convs):
            c = F.relu(conv(x))
            if i % 2 == 0:
                p = torch.max(c, dim=2)[0]
            else:
                p = F.max_pool1d(c, c.shape[2]).squeeze(2)
            pooled.append(p)
        cat = self.dropout(torch.cat(pooled, dim=1))
        return self.fc(cat)


def text_cnn():
    return TextCNN(), (100,)


# --------------------------------------------------------------------------
# 6. Convolutional autoencoder (ConvTranspose2d decoder, Sigmoid output)
# --------------------------------------------------------------------------
class ConvAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(True),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(True),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(128, 64, 3, stride=2, padding=1, output_padding=1), nn.BatchNorm2d(64), nn.ReLU(True),
            nn.ConvTranspose2d(64, 32, 3, stride=2, padding=1, output_padding=1), nn.ReLU(True),
            nn.ConvTranspose2d(32, 3, 4, stride=2, padding=1),
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.decoder(self.encoder(x))


def conv_autoencoder():
    return ConvAutoencoder(), (3, 64, 64)


# --------------------------------------------------------------------------
# 7. Siamese network: one shared tower called on two slices of the input
# --------------------------------------------------------------------------
class SiameseNet(nn.Module):
    def __init__(self, emb=64):
        super().__init__()
        self.tower = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(64, emb),
        )
        self.head = nn.Linear(emb, 1)

    def forward_once(self, x):
        return self.tower(x)

    def forward(self, pair):
        a = self.forward_once(pair[:, :3])
        b = self.forward_once(pair[:, 3:])
        return torch.sigmoid(self.head(torch.abs(a - b)))


def siamese():
    return SiameseNet(), (6, 48, 48)


# --------------------------------------------------------------------------
# 8. Perceiver-like: learned latent array, cross-attention to the input, latent self-attention
# --------------------------------------------------------------------------
class CrossAttention(nn.Module):
    def __init__(self, q_dim, kv_dim, heads, head_dim):
        super().__init__()
        inner = heads * head_dim
        self.heads, self.scale = heads, head_dim ** -0.5
        self.norm_q = nn.LayerNorm(q_dim)
        self.norm_kv = nn.LayerNorm(kv_dim)
        self.to_q = nn.Linear(q_dim, inner, bias=False)
        self.to_kv = nn.Linear(kv_dim, 2 * inner, bias=False)
        self.to_out = nn.Linear(inner, q_dim)

    def forward(self, x, context):
        b, n, _ = x.shape
        h = self.heads
        x_n = self.norm_q(x)
        c_n = self.norm_kv(context)
        q = self.to_q(x_n)
        k, v = self.to_kv(c_n).chunk(2, dim=-1)
        q, k, v = (t.reshape(b, t.shape[1], h, -1).transpose(1, 2) for t in (q, k, v))
        sim = torch.einsum("bhid,bhjd->bhij", q, k) * self.scale
        attn = sim.softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v)
        out = out.transpose(1, 2).reshape(b, n, -1)
        return self.to_out(out)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * mult), nn.GELU(), nn.Linear(dim * mult, dim))

    def forward(self, x):
        return self.net(x)


class PerceiverLite(nn.Module):
    def __init__(self, in_dim=32, n_latents=32, latent_dim=128, heads=4, self_blocks=2, num_classes=10):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(n_latents, latent_dim))
        self.cross = CrossAttention(latent_dim, in_dim, 1, 64)
        self.cross_ff = FeedForward(latent_dim)
        self.self_attn = nn.ModuleList(CrossAttention(latent_dim, latent_dim, heads, 32) for _ in range(self_blocks))
        self.self_ff = nn.ModuleList(FeedForward(latent_dim) for _ in range(self_blocks))
        self.to_logits = nn.Sequential(nn.LayerNorm(latent_dim), nn.Linear(latent_dim, num_classes))

    def forward(self, data):
        b = data.shape[0]
        x = self.latents.unsqueeze(0).expand(b, -1, -1)
        x = self.cross(x, data) + x
        x = self.cross_ff(x) + x
        for attn, ff in zip(self.self_attn, self.self_ff):
            x = attn(x, x) + x
            x = ff(x) + x
        return self.to_logits(x.mean(dim=1))


def perceiver_lite():
    return PerceiverLite(), (256, 32)


# --------------------------------------------------------------------------
# 9. PointNet-like classifier: shared MLP via Conv1d 1x1 + BatchNorm1d, max over points
# --------------------------------------------------------------------------
class PointNetCls(nn.Module):
    def __init__(self, k=10, n_points=512):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 64, 1)
        self.conv2 = nn.Conv1d(64, 128, 1)
        self.conv3 = nn.Conv1d(128, 512, 1)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(512)
        self.fc1 = nn.Linear(512, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, k)
        self.bn4 = nn.BatchNorm1d(256)
        self.bn5 = nn.BatchNorm1d(128)
        self.dropout = nn.Dropout(p=0.3)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 512)
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.dropout(self.fc2(x))))
        return F.log_softmax(self.fc3(x), dim=1)


def pointnet():
    return PointNetCls(), (3, 512)


# --------------------------------------------------------------------------
# 10. ResNeXt bottleneck blocks with grouped 3x3 convolutions (groups=32)
# --------------------------------------------------------------------------
class ResNeXtBottleneck(nn.Module):
    def __init__(self, cin, width, cout, stride=1, groups=32):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class MiniResNeXt(nn.Module):
    def __init__(self, num_classes=100):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(ResNeXtBottleneck(64, 128, 128), ResNeXtBottleneck(128, 128, 128))
        self.layer2 = nn.Sequential(ResNeXtBottleneck(128, 256, 256, stride=2), ResNeXtBottleneck(256, 256, 256))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(256, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnext_mini():
    return MiniResNeXt(), (3, 32, 32)


# --------------------------------------------------------------------------
# 11. FPN-like segmenter: nn.Upsample(nearest) + torch.cat skips, lateral 1x1 convs
# --------------------------------------------------------------------------
def conv_bn_relu(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class FPNSeg(nn.Module):
    def __init__(self, ncls=5):
        super().__init__()
        self.c1 = conv_bn_relu(3, 16, 2)   # 1/2
        self.c2 = conv_bn_relu(16, 32, 2)  # 1/4
        self.c3 = conv_bn_relu(32, 64, 2)  # 1/8
        self.c4 = conv_bn_relu(64, 128, 2)  # 1/16
        self.lat4 = nn.Conv2d(128, 64, 1)
        self.lat3 = nn.Conv2d(64, 64, 1)
        self.lat2 = nn.Conv2d(32, 64, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.smooth3 = conv_bn_relu(128, 64)
        self.smooth2 = conv_bn_relu(128, 64)
        self.head = nn.Conv2d(64, ncls, 1)
        self.final_up = nn.Upsample(scale_factor=4, mode="nearest")

    def forward(self, x):
        f1 = self.c1(x)
        f2 = self.c2(f1)
        f3 = self.c3(f2)
        f4 = self.c4(f3)
        p4 = self.lat4(f4)
        p3 = self.smooth3(torch.cat([self.lat3(f3), self.up(p4)], dim=1))
        p2 = self.smooth2(torch.cat([self.lat2(f2), self.up(p3)], dim=1))
        return self.final_up(self.head(p2))


def fpn_seg():
    return FPNSeg(), (3, 64, 64)


# --------------------------------------------------------------------------
# 12. nn.TransformerEncoder (stock PyTorch layers, norm_first, GELU) for sequence classification
# --------------------------------------------------------------------------
class StockTransformerCls(nn.Module):
    def __init__(self, vocab=4000, d=128, heads=4, layers=2, ctx=64, num_classes=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, ctx, d))
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, num_classes)
        self.truth_input = ("tokens", vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        x = self.encoder(x)
        return self.fc(self.norm(x[:, 0]))


def stock_transformer():
    return StockTransformerCls(), (64,)


MODELS = {
    "efficientnet_lite": efficientnet_lite,
    "convnext_mini": convnext_mini,
    "mini_bert": mini_bert,
    "seq2seq_gru": seq2seq_gru,
    "text_cnn": text_cnn,
    "conv_autoencoder": conv_autoencoder,
    "siamese": siamese,
    "perceiver_lite": perceiver_lite,
    "pointnet": pointnet,
    "resnext_mini": resnext_mini,
    "fpn_seg": fpn_seg,
    "stock_transformer": stock_transformer,
}

IMPORT_PROBES: dict = {}

CNN_MODELS: tuple = ()

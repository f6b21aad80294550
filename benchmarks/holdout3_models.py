"""Third holdout round: networks nobody here wrote, each with ONE configuration of its own.

Unlike the earlier rounds (a fixed grid per model), every case here is one (model, mode, optimizer,
dtype, autocast, batch) that no other benchmark measures: torchvision models and configs not in
benchmarks/realmodels_models.py (other variants, input sizes, odd batches, SGD with momentum,
AdamW, bf16 autocast, bf16 weights, channels_last), Hugging Face task heads built from small
configs with random weights (no hub download) called the way people call them (attention_mask,
labels, decoder inputs), and PyTorch snippets as people copy them (torch.cat / view / in-place
ReLU, dropout, label smoothing, tied weights, padding masks).

Every factory returns ``(module, input_shape_without_batch)`` like shared/truth/zoo.py; token
models set ``truth_input = ("tokens", vocab)``. Sizes are small so that one case measures in
seconds on 2 shared CPU cores. Needs torchvision and transformers (the benchmark venv).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 512
SEQ = 32


@dataclass(frozen=True)
class Case:
    factory: Callable
    mode: str = "train"  # inference | train
    optimizer: str | None = "sgd"  # the truth harness's names: sgd, sgd_momentum, adam, adamw
    batch: int = 2
    dtype: str = "fp32"  # model and input dtype
    amp: bool = False  # bf16 autocast around forward + loss (CPU)
    checkpoint_layers: bool = False  # the factory called gradient_checkpointing_enable()


def _tokens(m, vocab=VOCAB, seq=SEQ):
    m.truth_input = ("tokens", vocab)
    return m, (seq,)


# --------------------------------------------------------------------------
# torchvision
# --------------------------------------------------------------------------
def _tv(name, size=64, **kw):
    def make():
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None, **kw), (3, size, size)

    make.__name__ = name
    return make


def _tvseg(name, size=64, **kw):
    def make():
        import torchvision.models.segmentation as seg

        return getattr(seg, name)(weights=None, weights_backbone=None, **kw), (3, size, size)

    make.__name__ = name
    return make


def r3d_18():
    import torchvision.models.video as tvv

    return tvv.r3d_18(weights=None, num_classes=10), (3, 4, 32, 32)


def tv_vit_small():
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(image_size=64, patch_size=16, num_layers=4, num_heads=4, hidden_dim=128,
                             mlp_dim=256, num_classes=10), (3, 64, 64)


class ChannelsLast(nn.Module):
    """``model.to(memory_format=torch.channels_last)`` and the input converted the same way, as the
    PyTorch performance guide tells people to."""

    def __init__(self, net):
        super().__init__()
        self.net = net.to(memory_format=torch.channels_last)

    def forward(self, x):
        return self.net(x.contiguous(memory_format=torch.channels_last))


def resnet18_channels_last():
    import torchvision.models as tvm

    return ChannelsLast(tvm.resnet18(weights=None)), (3, 64, 64)


# --------------------------------------------------------------------------
# Hugging Face task heads from small configs
# --------------------------------------------------------------------------
def _hf_config(cfg_name, **cfg):
    import transformers

    c = getattr(transformers, cfg_name)(**cfg)
    if hasattr(c, "use_cache"):
        c.use_cache = False
    return c


class WithMaskAndLabels(nn.Module):
    """``model(input_ids=ids, attention_mask=mask, labels=...)`` as a fine-tuning loop calls it: the
    mask marks the last ``pad`` positions as padding; labels are a class per sequence
    (``"class"``), the ids themselves (``"ids"``, causal / masked LM) or none."""

    def __init__(self, model, labels="ids", pad=0, num_labels=2):
        super().__init__()
        self.model = model
        self.labels = labels
        self.pad = pad
        self.num_labels = num_labels

    def forward(self, ids):
        kw = {}
        if self.pad:
            mask = torch.ones_like(ids)
            mask[:, -self.pad:] = 0
            kw["attention_mask"] = mask
        if self.labels == "class":
            kw["labels"] = ids[:, 0] % self.num_labels
        elif self.labels == "ids":
            kw["labels"] = ids
        return self.model(input_ids=ids, **kw)


def _hf_text(cls_name, cfg_name, labels="ids", pad=0, vocab=VOCAB, seq=SEQ, **cfg):
    def make():
        import transformers

        c = _hf_config(cfg_name, vocab_size=vocab, **cfg)
        m = getattr(transformers, cls_name)(c)
        return _tokens(WithMaskAndLabels(m, labels, pad, getattr(c, "num_labels", 2)), vocab, seq)

    make.__name__ = cls_name
    return make


_BERT = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
             max_position_embeddings=128)
_LLM = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128)


class Seq2SeqWithLabels(nn.Module):
    """``model(input_ids=src, labels=tgt)``: the encoder-decoder builds its decoder inputs by
    shifting the labels right (T5, BART); the target is the source reversed."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, labels=ids.flip(1))


def t5_small_labels():
    import transformers

    c = _hf_config("T5Config", vocab_size=VOCAB, d_model=128, d_kv=32, d_ff=256, num_layers=2,
                   num_decoder_layers=2, num_heads=4, decoder_start_token_id=0)
    return _tokens(Seq2SeqWithLabels(transformers.T5ForConditionalGeneration(c)))


def bart_labels():
    import transformers

    c = _hf_config("BartConfig", vocab_size=VOCAB, d_model=128, encoder_layers=2, decoder_layers=2,
                   encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256,
                   decoder_ffn_dim=256, max_position_embeddings=128)
    return _tokens(Seq2SeqWithLabels(transformers.BartForConditionalGeneration(c)))


class ImageWithLabels(nn.Module):
    def __init__(self, model, num_labels):
        super().__init__()
        self.model = model
        self.num_labels = num_labels

    def forward(self, pixel_values):
        labels = torch.arange(pixel_values.shape[0]) % self.num_labels
        return self.model(pixel_values=pixel_values, labels=labels)


def vit_cls_labels():
    import transformers

    c = _hf_config("ViTConfig", image_size=32, patch_size=8, hidden_size=128, num_hidden_layers=2,
                   num_attention_heads=4, intermediate_size=256, num_labels=10)
    return ImageWithLabels(transformers.ViTForImageClassification(c), 10), (3, 32, 32)


class WhisperStep(nn.Module):
    """``model(input_features=feats, decoder_input_ids=ids)``: a fixed 8-token decoder prompt."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, feats):
        dec = torch.zeros(feats.shape[0], 8, dtype=torch.long)
        return self.model(input_features=feats, decoder_input_ids=dec)


def whisper_tiny_like():
    import transformers

    c = _hf_config("WhisperConfig", vocab_size=VOCAB, num_mel_bins=80, d_model=64, encoder_layers=2,
                   decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                   encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=64,
                   max_target_positions=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                   decoder_start_token_id=1)
    return WhisperStep(transformers.WhisperForConditionalGeneration(c)), (80, 128)


def wav2vec2_tiny():
    import transformers

    c = _hf_config("Wav2Vec2Config", vocab_size=32, hidden_size=64, num_hidden_layers=2,
                   num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32, 32),
                   conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                   num_conv_pos_embedding_groups=4)
    return transformers.Wav2Vec2Model(c), (1600,)


# --------------------------------------------------------------------------
# snippets as people copy them
# --------------------------------------------------------------------------
class CatViewNet(nn.Module):
    """Two conv branches joined with torch.cat, in-place ReLU, x.view(x.size(0), -1) into a head."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 16, 3, padding=1)
        self.b = nn.Conv2d(3, 16, 5, padding=2)
        self.bn = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 32, 3, stride=2, padding=1)
        self.fc = nn.Linear(32 * 16 * 16, 10)

    def forward(self, x):
        x = torch.cat([self.a(x), self.b(x)], dim=1)
        x = F.relu(self.bn(x), inplace=True)
        x = F.max_pool2d(F.relu(self.conv2(x), inplace=True), 1)
        x = x.view(x.size(0), -1)
        return self.fc(x)


def cat_view_net():
    return CatViewNet(), (3, 32, 32)


class DropoutMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2),
                                 nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))

    def forward(self, x):
        return self.net(x)


def dropout_mlp():
    return DropoutMLP(), (1, 28, 28)


class SmoothedCE(nn.Module):
    """A classifier that returns its own loss: F.cross_entropy(label_smoothing=0.1) on labels made
    from the batch index."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                                  nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))

    def forward(self, x):
        logits = self.body(x)
        target = torch.arange(x.shape[0]) % 10
        return F.cross_entropy(logits, target, label_smoothing=0.1)


def smoothed_ce_cnn():
    return SmoothedCE(), (1, 28, 28)


class LstmLM(nn.Module):
    """The word-language-model example: embedding -> dropout -> 2-layer LSTM -> dropout -> decoder
    tied to the embedding."""

    def __init__(self, ntoken=VOCAB, nhid=128):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(ntoken, nhid)
        self.rnn = nn.LSTM(nhid, nhid, 2, dropout=0.2, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight

    def forward(self, ids):
        emb = self.drop(self.encoder(ids))
        out, _ = self.rnn(emb)
        return self.decoder(self.drop(out))


def lstm_lm_tied():
    return _tokens(LstmLM())


class PreNormEncoder(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        layer = nn.TransformerEncoderLayer(d, 4, 256, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, 3)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)).mean(dim=1))


def prenorm_encoder():
    return _tokens(PreNormEncoder())


class Audio1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv1d(1, 32, 9, stride=2, padding=4), nn.BatchNorm1d(32), nn.GELU(),
                               nn.MaxPool1d(2), nn.Conv1d(32, 64, 5, padding=2), nn.BatchNorm1d(64), nn.GELU(),
                               nn.AdaptiveAvgPool1d(8), nn.Flatten(), nn.Linear(512, 12))

    def forward(self, x):
        return self.f(x)


def audio_conv1d_gelu():
    return Audio1d(), (1, 2000)


class UNetGN(nn.Module):
    def __init__(self, c=16):
        super().__init__()

        def blk(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(4, o), nn.SiLU())

        self.d1, self.d2, self.mid = blk(3, c), blk(c, 2 * c), blk(2 * c, 2 * c)
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.u1 = blk(2 * c, c)
        self.out = nn.Conv2d(c, 1, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.mid(self.d2(F.max_pool2d(a, 2)))
        return self.out(self.u1(torch.cat([self.up(b), a], dim=1)))


def unet_groupnorm():
    return UNetGN(), (3, 64, 64)


class MhaPadded(nn.Module):
    """nn.MultiheadAttention with a key_padding_mask (last 4 tokens padding), mean-pooled."""

    def __init__(self, d=64):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 2)

    def forward(self, ids):
        x = self.emb(ids)
        pad = torch.zeros(ids.shape, dtype=torch.bool)
        pad[:, -4:] = True
        a, _ = self.attn(x, x, x, key_padding_mask=pad)
        return self.fc(self.norm(x + a).mean(1))


def mha_padded():
    return _tokens(MhaPadded())


class EinsumAttn(nn.Module):
    """Hand-written attention with einsum and a causal mask via masked_fill."""

    def __init__(self, d=128, h=4):
        super().__init__()
        self.h = h
        self.emb = nn.Embedding(VOCAB, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, VOCAB)

    def forward(self, ids):
        x = self.emb(ids)
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        q = q.view(b, t, self.h, d // self.h)
        k = k.view(b, t, self.h, d // self.h)
        v = v.view(b, t, self.h, d // self.h)
        att = torch.einsum("bqhd,bkhd->bhqk", q, k) / (d // self.h) ** 0.5
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, d)
        return self.out(x + self.proj(y))


def einsum_attn():
    return _tokens(EinsumAttn())


class BagClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, 64, mode="mean")
        self.fc = nn.Linear(64, 4)

    def forward(self, ids):
        return self.fc(self.bag(ids))


def embedding_bag():
    return _tokens(BagClassifier())


# --------------------------------------------------------------------------
# the cases: one configuration each
# --------------------------------------------------------------------------
CASES: dict[str, Case] = {
    # torchvision: variants, sizes, optimizers, precisions
    "resnet34-momentum-b2": Case(_tv("resnet34"), optimizer="sgd_momentum"),
    "resnet18-96px-adamw-b3": Case(_tv("resnet18", 96), optimizer="adamw", batch=3),
    "resnet18-bf16-infer-b5": Case(_tv("resnet18"), mode="inference", optimizer=None, batch=5, dtype="bf16"),
    "resnet18-channels_last-sgd-b2": Case(resnet18_channels_last),
    "resnet50-infer-b13": Case(_tv("resnet50"), mode="inference", optimizer=None, batch=13),
    "wide_resnet50_2-infer-b1": Case(_tv("wide_resnet50_2"), mode="inference", optimizer=None, batch=1),
    "alexnet-infer-b3": Case(_tv("alexnet"), mode="inference", optimizer=None, batch=3),
    "efficientnet_b1-sgd-b2": Case(_tv("efficientnet_b1")),
    "efficientnet_v2_s-adam-b1": Case(_tv("efficientnet_v2_s"), optimizer="adam", batch=1),
    "mnasnet1_0-momentum-b2": Case(_tv("mnasnet1_0"), optimizer="sgd_momentum"),
    "regnet_y_800mf-infer-b7": Case(_tv("regnet_y_800mf"), mode="inference", optimizer=None, batch=7),
    "regnet_x_800mf-momentum-b2": Case(_tv("regnet_x_800mf"), optimizer="sgd_momentum"),
    "shufflenet_v2_x1_5-adamw-b2": Case(_tv("shufflenet_v2_x1_5"), optimizer="adamw"),
    "densenet169-sgd-b1": Case(_tv("densenet169"), batch=1),
    "swin_v2_t-sgd-b1": Case(_tv("swin_v2_t"), batch=1),
    "mobilenet_v2_w075-96px-adamw-b4": Case(_tv("mobilenet_v2", 96, width_mult=0.75), optimizer="adamw", batch=4),
    "mobilenet_v3_large-amp-b3": Case(_tv("mobilenet_v3_large"), optimizer="adam", batch=3, amp=True),
    "convnext_tiny-momentum-b1": Case(_tv("convnext_tiny"), optimizer="sgd_momentum", batch=1),
    "tv_vit_small-adam-b4": Case(tv_vit_small, optimizer="adam", batch=4),
    "inception_v3-infer-b2": Case(_tv("inception_v3", 128, aux_logits=False, init_weights=False),
                                  mode="inference", optimizer=None),
    "googlenet_aux-sgd-b2": Case(_tv("googlenet", 64, aux_logits=True, init_weights=False)),
    "squeezenet1_1-96px-adamw-b6": Case(_tv("squeezenet1_1", 96), optimizer="adamw", batch=6),
    "lraspp_mobilenet_v3-infer-b2": Case(_tvseg("lraspp_mobilenet_v3_large", num_classes=5),
                                         mode="inference", optimizer=None),
    "fcn_resnet50-sgd-b1": Case(_tvseg("fcn_resnet50", num_classes=3, aux_loss=False), batch=1),
    "deeplabv3_mbv3-adam-b2": Case(_tvseg("deeplabv3_mobilenet_v3_large", num_classes=4), optimizer="adam"),
    "r3d_18-sgd-b1": Case(r3d_18, batch=1),
    "resnet18-amp-infer-b4": Case(_tv("resnet18"), mode="inference", optimizer=None, batch=4, amp=True),
    # Hugging Face task heads, called with masks and labels
    "bert_seqcls-mask-labels-adamw-b4": Case(_hf_text("BertForSequenceClassification", "BertConfig", "class", 5,
                                                      **_BERT), optimizer="adamw", batch=4),
    "distilbert_seqcls-labels-adam-b2": Case(_hf_text("DistilBertForSequenceClassification", "DistilBertConfig",
                                                      "class", dim=128, n_layers=2, n_heads=4, hidden_dim=256,
                                                      max_position_embeddings=128), optimizer="adam"),
    "roberta_mlm-labels-sgd-b2": Case(_hf_text("RobertaForMaskedLM", "RobertaConfig", "ids", pad_token_id=1,
                                               **_BERT)),
    "albert_mlm-labels-adam-b2": Case(_hf_text("AlbertForMaskedLM", "AlbertConfig", "ids", embedding_size=64,
                                               **_BERT), optimizer="adam"),
    "electra_seqcls-infer-b4": Case(_hf_text("ElectraForSequenceClassification", "ElectraConfig", None, 3,
                                             embedding_size=64, **_BERT), mode="inference", optimizer=None, batch=4),
    "t5_labels-adam-b2": Case(t5_small_labels, optimizer="adam"),
    "bart_labels-adamw-b1": Case(bart_labels, optimizer="adamw", batch=1),
    "vit_cls-labels-momentum-b4": Case(vit_cls_labels, optimizer="sgd_momentum", batch=4),
    "whisper_tiny_like-infer-b2": Case(whisper_tiny_like, mode="inference", optimizer=None),
    "whisper_tiny_like-adamw-b1": Case(whisper_tiny_like, optimizer="adamw", batch=1),
    "wav2vec2_tiny-sgd-b1": Case(wav2vec2_tiny, batch=1),
    "mistral_clm-mask-labels-adamw-b2": Case(_hf_text("MistralForCausalLM", "MistralConfig", "ids", 4, **_LLM),
                                             optimizer="adamw"),
    "qwen2_clm-mask-infer-b3": Case(_hf_text("Qwen2ForCausalLM", "Qwen2Config", None, 6, **_LLM),
                                    mode="inference", optimizer=None, batch=3),
    "llama_clm-bf16-infer-b2": Case(_hf_text("LlamaForCausalLM", "LlamaConfig", None, **_LLM),
                                    mode="inference", optimizer=None, dtype="bf16"),
    "phi_clm-labels-adam-b2": Case(_hf_text("PhiForCausalLM", "PhiConfig", "ids", hidden_size=128,
                                            intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                            max_position_embeddings=128, partial_rotary_factor=0.5),
                                   optimizer="adam"),
    "gpt2_clm-labels-adamw-b1": Case(_hf_text("GPT2LMHeadModel", "GPT2Config", "ids", n_positions=128, n_embd=128,
                                              n_layer=2, n_head=4), optimizer="adamw", batch=1),
    "opt_clm-infer-b2": Case(_hf_text("OPTForCausalLM", "OPTConfig", None, hidden_size=128, ffn_dim=256,
                                      num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=128,
                                      word_embed_proj_dim=128), mode="inference", optimizer=None),
    "gpt_neox_clm-sgd-b2": Case(_hf_text("GPTNeoXForCausalLM", "GPTNeoXConfig", None, hidden_size=128,
                                         intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                         max_position_embeddings=128)),
    "bloom_clm-labels-sgd-b2": Case(_hf_text("BloomForCausalLM", "BloomConfig", "ids", hidden_size=128, n_layer=2,
                                             n_head=4)),
    "llama_clm-amp-adam-b2": Case(_hf_text("LlamaForCausalLM", "LlamaConfig", "ids", 3, **_LLM), optimizer="adam",
                                  amp=True),
    # snippets as people copy them
    "cat_view_inplace-momentum-b4": Case(cat_view_net, optimizer="sgd_momentum", batch=4),
    "dropout_mlp-adam-b16": Case(dropout_mlp, optimizer="adam", batch=16),
    "dropout_mlp-infer-b7": Case(dropout_mlp, mode="inference", optimizer=None, batch=7),
    "smoothed_ce_cnn-adamw-b8": Case(smoothed_ce_cnn, optimizer="adamw", batch=8),
    "lstm_lm_tied-sgd-b4": Case(lstm_lm_tied, batch=4),
    "prenorm_encoder-adamw-b4": Case(prenorm_encoder, optimizer="adamw", batch=4),
    "audio_conv1d_gelu-adamw-b8": Case(audio_conv1d_gelu, optimizer="adamw", batch=8),
    "unet_groupnorm-amp-b2": Case(unet_groupnorm, optimizer="adam", amp=True),
    "mha_padded-infer-b5": Case(mha_padded, mode="inference", optimizer=None, batch=5),
    "mha_padded-adam-b4": Case(mha_padded, optimizer="adam", batch=4),
    "einsum_attn-sgd-b4": Case(einsum_attn, batch=4),
    "embedding_bag-adam-b8": Case(embedding_bag, optimizer="adam", batch=8),
}

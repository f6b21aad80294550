"""Fourth holdout round: networks and configurations nobody here wrote, one configuration each,
none of them measured by an earlier round (realmodels, holdout 1-3, hf_llm, finetune).

torchvision models not yet in a set (VGG, ResNet-101, RegNet 1.6GF, EfficientNet-B3, MaxViT,
ViT-B/32, Inception-v3 with its aux head in training, R(2+1)D, MC3, FCN with aux loss, DeepLabV3,
Faster R-CNN in eval; transfer learning: a frozen backbone, a linear probe under torch.no_grad()
or .detach()), Hugging Face models built from small configs with random weights (Qwen3,
Gemma2, Phi-3, Falcon, OLMo2, StableLM, GPT-J, DeBERTa-v2, XLM-R, MPNet, Flan-T5, Marian, Pegasus,
HF Swin / ConvNeXt / SegFormer / DeiT / DINOv2 / BEiT / CLIP), each called the way people call
it (labels=..., attention masks), and PyTorch idioms not probed before (weight_norm
parametrizations, PixelShuffle super-resolution, InstanceNorm + ReflectionPad style transfer,
a DCGAN generator, checkpoint_sequential, nn.Transformer with a causal mask, PReLU / SELU /
AlphaDropout, F.unfold patches). Configurations: AdamW / SGD momentum, bf16 autocast, bf16
weights, eval under no_grad, channels_last, HF gradient_checkpointing_enable() (the case says
``checkpoint_layers``, the setting a user ticks for it).

Every factory returns ``(module, input_shape_without_batch)`` like shared/truth/zoo.py; token
models set ``truth_input = ("tokens", vocab)``. Needs torchvision and transformers (the
benchmark venv).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from holdout3_models import SEQ, VOCAB, Case, WithMaskAndLabels, _hf_config, _tokens  # as in round 3


def _named(make, name):
    make.__name__ = name
    return make


# --------------------------------------------------------------------------
# torchvision
# --------------------------------------------------------------------------
class ChannelsLast(nn.Module):
    """``model.to(memory_format=torch.channels_last)`` with the input converted the same way."""

    def __init__(self, net):
        super().__init__()
        self.net = net.to(memory_format=torch.channels_last)

    def forward(self, x):
        return self.net(x.contiguous(memory_format=torch.channels_last))


def _tv(name, size=64, channels_last=False, **kw):
    def make():
        import torchvision.models as tvm

        m = getattr(tvm, name)(weights=None, **kw)
        return (ChannelsLast(m) if channels_last else m), (3, size, size)

    return _named(make, name)


def _tvseg(name, size=64, **kw):
    def make():
        import torchvision.models.segmentation as seg

        return getattr(seg, name)(weights=None, weights_backbone=None, **kw), (3, size, size)

    return _named(make, name)


def _tvvideo(name, clip=(3, 4, 32, 32), **kw):
    def make():
        import torchvision.models.video as tvv

        return getattr(tvv, name)(weights=None, **kw), clip

    return _named(make, name)


def resnet18_feature_extractor():
    """The transfer-learning tutorial's "ConvNet as fixed feature extractor": every parameter
    frozen (requires_grad = False), then a new trainable fc."""
    import torchvision.models as tvm

    m = tvm.resnet18(weights=None)
    for p in m.parameters():
        p.requires_grad = False
    m.fc = nn.Linear(m.fc.in_features, 2)
    return m, (3, 64, 64)


def vit_b_16_frozen_encoder():
    """vit_b_16 at 32 px with its patch embedding and first 10 encoder blocks frozen: only the
    last two blocks, the final norm and the head train."""
    import torchvision.models as tvm

    m = tvm.vit_b_16(weights=None, image_size=32, num_classes=10)
    train = ("encoder.layers.encoder_layer_10.", "encoder.layers.encoder_layer_11.", "encoder.ln.", "heads.")
    for name, p in m.named_parameters():
        p.requires_grad = name.startswith(train)
    return m, (3, 32, 32)


class LinearProbe(nn.Module):
    """Linear probing: a resnet18 trunk run without autograd (``with torch.no_grad():`` or
    ``.detach()`` on its features), a trainable linear head."""

    def __init__(self, how):
        super().__init__()
        import torchvision.models as tvm

        trunk = tvm.resnet18(weights=None)
        trunk.fc = nn.Identity()
        self.trunk = trunk
        self.head = nn.Linear(512, 10)
        self.how = how

    def forward(self, x):
        if self.how == "no_grad":
            with torch.no_grad():
                feats = self.trunk(x)
        else:
            feats = self.trunk(x).detach()
        return self.head(feats)


def linear_probe_no_grad():
    return LinearProbe("no_grad"), (3, 64, 64)


def linear_probe_detach():
    return LinearProbe("detach"), (3, 64, 64)


def maxvit_small():
    """torchvision's MaxVit class at 64 px with two small stages (maxvit_t needs 224 px)."""
    from torchvision.models.maxvit import MaxVit

    return MaxVit(input_size=(64, 64), stem_channels=32, partition_size=4, block_channels=[32, 64],
                  block_layers=[1, 1], head_dim=16, stochastic_depth_prob=0.1, num_classes=10), (3, 64, 64)


def fasterrcnn_mbv3_eval():
    """Detection in eval: a batch tensor of images in, a list of {boxes, labels, scores} out."""
    import torchvision.models.detection as det

    return det.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=5,
                                                     min_size=128, max_size=128), (3, 128, 128)


# --------------------------------------------------------------------------
# Hugging Face models from small configs
# --------------------------------------------------------------------------
def _hf_text(cls_name, cfg_name, labels="ids", pad=0, gc=False, vocab=VOCAB, seq=SEQ, **cfg):
    def make():
        import transformers

        c = _hf_config(cfg_name, vocab_size=vocab, **cfg)
        m = getattr(transformers, cls_name)(c)
        if gc:
            m.gradient_checkpointing_enable()
        return _tokens(WithMaskAndLabels(m, labels, pad, getattr(c, "num_labels", 2)), vocab, seq)

    return _named(make, cls_name)


_BERT = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
             max_position_embeddings=128)
_LLM = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128)


class Seq2SeqWithLabels(nn.Module):
    """``model(input_ids=src, labels=tgt)``: decoder inputs are the labels shifted right."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, labels=ids.flip(1))


class FrozenBase(nn.Module):
    """``for p in model.base_model.parameters(): p.requires_grad = False``: only the task head trains."""

    def __init__(self, wrapped):
        super().__init__()
        self.wrapped = wrapped
        for p in wrapped.model.base_model.parameters():
            p.requires_grad = False

    def forward(self, ids):
        return self.wrapped(ids)


def distilbert_frozen_base():
    m, shape = _hf_text("DistilBertForSequenceClassification", "DistilBertConfig", "class", dim=128, n_layers=2,
                        n_heads=4, hidden_dim=256, max_position_embeddings=128)()
    out = FrozenBase(m)
    out.truth_input = m.truth_input
    return out, shape


def _hf_seq2seq(cls_name, cfg_name, gc=False, **cfg):
    def make():
        import transformers

        m = getattr(transformers, cls_name)(_hf_config(cfg_name, vocab_size=VOCAB, **cfg))
        if gc:
            m.gradient_checkpointing_enable()
        return _tokens(Seq2SeqWithLabels(m))

    return _named(make, cls_name)


_T5 = dict(d_model=128, d_kv=32, d_ff=256, num_layers=2, num_decoder_layers=2, num_heads=4, decoder_start_token_id=0)
_MARIAN = dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, max_position_embeddings=128,
               pad_token_id=0, decoder_start_token_id=0)


class ImageWithLabels(nn.Module):
    """``model(pixel_values=x, labels=y)`` (a class per image) or without labels."""

    def __init__(self, model, num_labels=0):
        super().__init__()
        self.model = model
        self.num_labels = num_labels

    def forward(self, pixel_values):
        if not self.num_labels:
            return self.model(pixel_values=pixel_values)
        labels = torch.arange(pixel_values.shape[0]) % self.num_labels
        return self.model(pixel_values=pixel_values, labels=labels)


def _hf_image(cls_name, cfg_name, size=32, num_labels=0, gc=False, **cfg):
    def make():
        import transformers

        c = _hf_config(cfg_name, **({"num_labels": num_labels} if num_labels else {}), **cfg)
        m = getattr(transformers, cls_name)(c)
        if gc:
            m.gradient_checkpointing_enable()
        return ImageWithLabels(m, num_labels), (3, size, size)

    return _named(make, cls_name)


_VIT = dict(image_size=32, patch_size=8, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=256)


class SegformerWithLabels(nn.Module):
    """SegformerForSemanticSegmentation(pixel_values, labels=mask): the logits are upsampled to the
    label size inside the model's loss."""

    def __init__(self, model, num_labels):
        super().__init__()
        self.model = model
        self.num_labels = num_labels

    def forward(self, pixel_values):
        b, _, h, w = pixel_values.shape
        labels = (torch.arange(h * w).view(1, h, w) % self.num_labels).expand(b, h, w)
        return self.model(pixel_values=pixel_values, labels=labels)


def segformer_labels():
    import transformers

    c = _hf_config("SegformerConfig", num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                   hidden_sizes=[32, 64], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
                   mlp_ratios=[4, 4], decoder_hidden_size=64, num_labels=4)
    return SegformerWithLabels(transformers.SegformerForSemanticSegmentation(c), 4), (3, 64, 64)


class ClipStep(nn.Module):
    """CLIPModel(input_ids, pixel_values, return_loss=True): fixed captions, one per image."""

    def __init__(self, model, seq=16):
        super().__init__()
        self.model = model
        self.seq = seq

    def forward(self, pixel_values):
        b = pixel_values.shape[0]
        ids = (torch.arange(b * self.seq).view(b, self.seq) * 7) % VOCAB
        return self.model(input_ids=ids, pixel_values=pixel_values, return_loss=True)


def clip_contrastive():
    import transformers

    c = transformers.CLIPConfig(
        text_config=dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=32),
        vision_config=dict(image_size=32, patch_size=8, hidden_size=64, intermediate_size=128,
                           num_hidden_layers=2, num_attention_heads=4),
        projection_dim=32)
    return ClipStep(transformers.CLIPModel(c)), (3, 32, 32)


# --------------------------------------------------------------------------
# PyTorch idioms as people copy them
# --------------------------------------------------------------------------
class WeightNormCNN(nn.Module):
    """Convolutions and a head wrapped in torch.nn.utils.parametrizations.weight_norm: the weight
    is recomputed from (g, v) at every call."""

    def __init__(self):
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.c1 = wn(nn.Conv2d(3, 32, 3, padding=1))
        self.c2 = wn(nn.Conv2d(32, 64, 3, stride=2, padding=1))
        self.fc = wn(nn.Linear(64 * 16 * 16, 10))

    def forward(self, x):
        x = F.leaky_relu(self.c1(x), 0.2)
        x = F.leaky_relu(self.c2(x), 0.2)
        return self.fc(x.flatten(1))


def weight_norm_cnn():
    return WeightNormCNN(), (3, 32, 32)


class ESPCN(nn.Module):
    """Sub-pixel super-resolution: conv tanh stack, then PixelShuffle by 3."""

    def __init__(self, r=3):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 64, 5, padding=2), nn.Tanh(), nn.Conv2d(64, 32, 3, padding=1),
                                  nn.Tanh(), nn.Conv2d(32, r * r, 3, padding=1), nn.PixelShuffle(r))

    def forward(self, x):
        return torch.sigmoid(self.body(x))


def espcn():
    return ESPCN(), (1, 48, 48)


class StyleNet(nn.Module):
    """fast-neural-style's TransformerNet, shrunk: ReflectionPad2d convs, InstanceNorm2d(affine),
    residual blocks, nearest upsampling."""

    def __init__(self, c=16):
        super().__init__()

        def conv(i, o, k, s=1):
            return nn.Sequential(nn.ReflectionPad2d(k // 2), nn.Conv2d(i, o, k, s))

        self.down = nn.Sequential(conv(3, c, 9), nn.InstanceNorm2d(c, affine=True), nn.ReLU(),
                                  conv(c, 2 * c, 3, 2), nn.InstanceNorm2d(2 * c, affine=True), nn.ReLU())
        self.res = nn.ModuleList([nn.Sequential(conv(2 * c, 2 * c, 3), nn.InstanceNorm2d(2 * c, affine=True),
                                                nn.ReLU(), conv(2 * c, 2 * c, 3),
                                                nn.InstanceNorm2d(2 * c, affine=True)) for _ in range(2)])
        self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), conv(2 * c, c, 3),
                                nn.InstanceNorm2d(c, affine=True), nn.ReLU(), conv(c, 3, 9))

    def forward(self, x):
        y = self.down(x)
        for r in self.res:
            y = y + r(y)
        return self.up(y)


def style_net():
    return StyleNet(), (3, 64, 64)


class DCGANGenerator(nn.Module):
    """The DCGAN tutorial's generator (ngf 16) from a 100-dim latent to 32 x 32 RGB."""

    def __init__(self, nz=100, ngf=16):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)


def dcgan_generator():
    return DCGANGenerator(), (100, 1, 1)


class CheckpointedMLP(nn.Module):
    """torch.utils.checkpoint.checkpoint_sequential over a deep MLP in 2 segments (non-reentrant)."""

    def __init__(self, d=256, depth=6):
        super().__init__()
        layers = [nn.Flatten(), nn.Linear(784, d)]
        for _ in range(depth):
            layers += [nn.GELU(), nn.Linear(d, d)]
        self.net = nn.Sequential(*layers)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint_sequential

        return self.head(checkpoint_sequential(self.net, 2, x, use_reentrant=False))


def checkpoint_sequential_mlp():
    return CheckpointedMLP(), (1, 28, 28)


class TinyTranslator(nn.Module):
    """nn.Transformer (2+2 layers) with a square causal mask on the target; source and target are
    the same ids (a copy task), output projected to the vocabulary."""

    def __init__(self, d=128):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.tf = nn.Transformer(d, 4, 2, 2, 256, dropout=0.1, batch_first=True)
        self.out = nn.Linear(d, VOCAB)

    def forward(self, ids):
        x = self.emb(ids)
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        return self.out(self.tf(x, x, tgt_mask=mask))


def nn_transformer_causal():
    return _tokens(TinyTranslator())


class SelfNormMLP(nn.Module):
    """SELU + AlphaDropout (self-normalizing) and a PReLU tail."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 512), nn.SELU(), nn.AlphaDropout(0.1),
                                 nn.Linear(512, 256), nn.SELU(), nn.AlphaDropout(0.1), nn.Linear(256, 128),
                                 nn.PReLU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.net(x)


def selu_prelu_mlp():
    return SelfNormMLP(), (3, 32, 32)


class UnfoldPatches(nn.Module):
    """Patches with F.unfold (kernel = stride = 4) into a Linear embedding, a GELU MLP, mean pool."""

    def __init__(self, d=96):
        super().__init__()
        self.embed = nn.Linear(3 * 16, d)
        self.mlp = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        p = F.unfold(x, kernel_size=4, stride=4).transpose(1, 2)
        h = self.embed(p)
        h = h + self.mlp(h)
        return self.head(h.mean(1))


def unfold_patches():
    return UnfoldPatches(), (3, 32, 32)


# --------------------------------------------------------------------------
# the cases: one configuration each
# --------------------------------------------------------------------------
CASES: dict[str, Case] = {
    # torchvision
    "vgg11_bn-infer-b2": Case(_tv("vgg11_bn"), mode="inference", optimizer=None),
    "vgg11-sgd-b1": Case(_tv("vgg11", 32), batch=1),
    "resnet101-infer-b2": Case(_tv("resnet101"), mode="inference", optimizer=None),
    "regnet_y_1_6gf-adamw-b2": Case(_tv("regnet_y_1_6gf"), optimizer="adamw"),
    "efficientnet_b3-amp-momentum-b2": Case(_tv("efficientnet_b3"), optimizer="sgd_momentum", amp=True),
    "mobilenet_v3_small-channels_last-momentum-b4": Case(_tv("mobilenet_v3_small", channels_last=True),
                                                         optimizer="sgd_momentum", batch=4),
    "mnasnet1_3-bf16-infer-b3": Case(_tv("mnasnet1_3"), mode="inference", optimizer=None, batch=3, dtype="bf16"),
    "shufflenet_v2_x2_0-sgd-b4": Case(_tv("shufflenet_v2_x2_0"), batch=4),
    "densenet201-infer-b2": Case(_tv("densenet201"), mode="inference", optimizer=None),
    "convnext_tiny-amp-adamw-b2": Case(_tv("convnext_tiny"), optimizer="adamw", amp=True),
    "swin_t-infer-b3": Case(_tv("swin_t"), mode="inference", optimizer=None, batch=3),
    "maxvit_small-adamw-b2": Case(maxvit_small, optimizer="adamw"),
    "vit_b_32-64px-adamw-b2": Case(_tv("vit_b_32", 64, image_size=64), optimizer="adamw"),
    "inception_v3_aux-sgd-b2": Case(_tv("inception_v3", 299, aux_logits=True, init_weights=False)),
    "r2plus1d_18-sgd-b1": Case(_tvvideo("r2plus1d_18", num_classes=10), batch=1),
    "mc3_18-infer-b2": Case(_tvvideo("mc3_18", num_classes=10), mode="inference", optimizer=None),
    "fcn_resnet50_aux-sgd-b1": Case(_tvseg("fcn_resnet50", num_classes=3, aux_loss=True), batch=1),
    "deeplabv3_resnet50-infer-b1": Case(_tvseg("deeplabv3_resnet50", num_classes=3), mode="inference",
                                        optimizer=None, batch=1),
    "fasterrcnn_mbv3-infer-b1": Case(fasterrcnn_mbv3_eval, mode="inference", optimizer=None, batch=1),
    "resnet18_feature_extractor-momentum-b8": Case(resnet18_feature_extractor, optimizer="sgd_momentum", batch=8),
    "vit_b_16_frozen_encoder-adamw-b2": Case(vit_b_16_frozen_encoder, optimizer="adamw"),
    "linear_probe_no_grad-adamw-b8": Case(linear_probe_no_grad, optimizer="adamw", batch=8),
    "linear_probe_detach-adamw-b8": Case(linear_probe_detach, optimizer="adamw", batch=8),
    # Hugging Face
    "qwen3_clm-labels-adamw-b2": Case(_hf_text("Qwen3ForCausalLM", "Qwen3Config", "ids", head_dim=32, **_LLM),
                                      optimizer="adamw"),
    "gemma2_clm-labels-adam-b1": Case(_hf_text("Gemma2ForCausalLM", "Gemma2Config", "ids", head_dim=32,
                                               sliding_window=16, **_LLM), optimizer="adam", batch=1),
    "phi3_clm-mask-labels-momentum-b2": Case(_hf_text("Phi3ForCausalLM", "Phi3Config", "ids", 4, pad_token_id=0,
                                                      **_LLM), optimizer="sgd_momentum"),
    "falcon_clm-infer-b3": Case(_hf_text("FalconForCausalLM", "FalconConfig", None, hidden_size=128,
                                         num_hidden_layers=2, num_attention_heads=4),
                                mode="inference", optimizer=None, batch=3),
    "olmo2_clm-labels-sgd-b2": Case(_hf_text("Olmo2ForCausalLM", "Olmo2Config", "ids", **_LLM)),
    "stablelm_clm-amp-adamw-b2": Case(_hf_text("StableLmForCausalLM", "StableLmConfig", "ids", **_LLM),
                                      optimizer="adamw", amp=True),
    "gptj_clm-labels-adam-b1": Case(_hf_text("GPTJForCausalLM", "GPTJConfig", "ids", n_embd=128, n_layer=2,
                                             n_head=4, rotary_dim=16, n_positions=128), optimizer="adam", batch=1),
    "llama_clm-bf16-adamw-b2": Case(_hf_text("LlamaForCausalLM", "LlamaConfig", "ids", **_LLM), optimizer="adamw",
                                    dtype="bf16"),
    "qwen3_clm-gc-adamw-b2": Case(_hf_text("Qwen3ForCausalLM", "Qwen3Config", "ids", gc=True, head_dim=32, **_LLM),
                                  optimizer="adamw", checkpoint_layers=True),
    "bert_mlm-gc-sgd-b4": Case(_hf_text("BertForMaskedLM", "BertConfig", "ids", gc=True, **_BERT), batch=4,
                               checkpoint_layers=True),
    "distilbert_frozen_base-adamw-b4": Case(distilbert_frozen_base, optimizer="adamw", batch=4),
    "deberta_v2_seqcls-labels-adamw-b2": Case(_hf_text("DebertaV2ForSequenceClassification", "DebertaV2Config",
                                                       "class", 3, **_BERT), optimizer="adamw"),
    "xlm_roberta_tokcls-infer-b4": Case(_hf_text("XLMRobertaForTokenClassification", "XLMRobertaConfig", None, 6,
                                                 pad_token_id=1, **_BERT), mode="inference", optimizer=None, batch=4),
    "mpnet_mlm-labels-momentum-b2": Case(_hf_text("MPNetForMaskedLM", "MPNetConfig", "ids", pad_token_id=1,
                                                  **_BERT), optimizer="sgd_momentum"),
    "flan_t5_gated-amp-adam-b2": Case(_hf_seq2seq("T5ForConditionalGeneration", "T5Config",
                                                  feed_forward_proj="gated-gelu", **_T5), optimizer="adam", amp=True),
    "t5_gc-adamw-b2": Case(_hf_seq2seq("T5ForConditionalGeneration", "T5Config", gc=True, **_T5), optimizer="adamw",
                           checkpoint_layers=True),
    "marian_mt-labels-sgd-b2": Case(_hf_seq2seq("MarianMTModel", "MarianConfig", **_MARIAN)),
    "pegasus-labels-adamw-b1": Case(_hf_seq2seq("PegasusForConditionalGeneration", "PegasusConfig", **_MARIAN),
                                    optimizer="adamw", batch=1),
    "hf_swin_cls-labels-adamw-b2": Case(_hf_image("SwinForImageClassification", "SwinConfig", 32, 10,
                                                  patch_size=2, embed_dim=32, depths=[1, 1], num_heads=[2, 4],
                                                  window_size=4), optimizer="adamw"),
    "hf_convnext_cls-infer-b4": Case(_hf_image("ConvNextForImageClassification", "ConvNextConfig", 64, 10,
                                               hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 2, 1]),
                                     mode="inference", optimizer=None, batch=4),
    "segformer_seg-labels-sgd-b2": Case(segformer_labels),
    "deit_teacher-infer-b3": Case(_hf_image("DeiTForImageClassificationWithTeacher", "DeiTConfig", 32, 10, **_VIT),
                                  mode="inference", optimizer=None, batch=3),
    "dinov2-momentum-b2": Case(_hf_image("Dinov2Model", "Dinov2Config", 32, **_VIT), optimizer="sgd_momentum"),
    "hf_vit_gc-labels-adam-b4": Case(_hf_image("ViTForImageClassification", "ViTConfig", 32, 10, gc=True, **_VIT),
                                     optimizer="adam", batch=4, checkpoint_layers=True),
    "beit_cls-labels-sgd-b2": Case(_hf_image("BeitForImageClassification", "BeitConfig", 32, 10,
                                             use_relative_position_bias=True, **_VIT)),
    "clip_contrastive-adamw-b4": Case(clip_contrastive, optimizer="adamw", batch=4),
    # PyTorch idioms
    "weight_norm_cnn-adam-b4": Case(weight_norm_cnn, optimizer="adam", batch=4),
    "espcn_pixelshuffle-sgd-b4": Case(espcn, batch=4),
    "style_instancenorm-adam-b2": Case(style_net, optimizer="adam"),
    "dcgan_generator-adam-b16": Case(dcgan_generator, optimizer="adam", batch=16),
    "checkpoint_sequential_mlp-sgd-b16": Case(checkpoint_sequential_mlp, batch=16),
    "nn_transformer_causal-adamw-b2": Case(nn_transformer_causal, optimizer="adamw"),
    "selu_prelu_mlp-momentum-b8": Case(selu_prelu_mlp, optimizer="sgd_momentum", batch=8),
    "unfold_patches-infer-b8": Case(unfold_patches, mode="inference", optimizer=None, batch=8),
}

#!/usr/bin/env python3
"""Writes resources/examples/*.json: the example designs shipped with memdesigner.

Run from the repository root:  python3 tools/make_examples.py [--check]

Each design is built with the Design API, laid out left to right in layers ~220 px apart
(nodes at the same depth stack 150 px apart, side branches below the main line), checked
(analysis without issues, parameter count as published) and saved with save_design.
--check only verifies that the files on disk equal what this script would write.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memdesigner.engine.estimate import estimate  # noqa: E402
from memdesigner.io.design_file import design_to_dict  # noqa: E402
from memdesigner.model.analysis import analyze  # noqa: E402
from memdesigner.model.design import Design  # noqa: E402

OUT = ROOT / "resources" / "examples"
DX, DY = 220.0, 150.0

# Published parameter counts (the same as shared/truth/zoo.py PUBLISHED_PARAMS where it has one).
EXPECTED_PARAMS = {
    "seed_geron_cnn": 903_400,
    "seed_keras_audio": 770_482_865,
    "seed_fc": 131_410,
    "seed_quantized": 3_136 + 73_728,
    "lenet5": 61_706,
    "vgg16": 138_357_544,
    "resnet18": 11_689_512,
    "mobilenet_v2": 3_504_872,
    "transformer_encoder": 5_753_348,
    "lstm_classifier": 8_803_338,
}


class Builder:
    """Adds nodes with readable ids; ``lane`` places side branches below the main line."""

    def __init__(self, name: str, description: str, settings: dict | None = None):
        self.d = Design(name)
        self.d.description = description
        if settings:
            self.d.settings = dict(settings)
        self.lane: dict[str, int] = {}
        self.count: dict[str, int] = {}

    def add(self, type_name: str, inputs=(), props: dict | None = None, *, id: str | None = None,
            name: str | None = None, bits: int | None = None, lane: int = 0) -> str:
        if id is None:
            base = type_name.lower()
            self.count[base] = self.count.get(base, 0) + 1
            id = f"{base}{self.count[base]}"
        self.d.add_node(type_name, props or {}, id=id, name=name or id, bits=bits)
        if isinstance(inputs, str):
            inputs = [inputs]
        for port, src in enumerate(inputs):
            self.d.add_edge(src, id, 0, port)
        self.lane[id] = lane
        return id

    def layout(self) -> Design:
        depth: dict[str, int] = {}
        for nid in self.d.topo_order():
            preds = [e.src for e in self.d.inputs_of(nid)]
            depth[nid] = 1 + max((depth[p] for p in preds), default=-1)
        used: dict[int, set] = {}
        place = {}
        for nid in self.d.topo_order():
            col = depth[nid]
            row = self.lane[nid]
            taken = used.setdefault(col, set())
            while row in taken:
                row += 1
            taken.add(row)
            place[nid] = (col, row)
        # a deep network wraps into bands (rows of columns) so it opens readable in the window
        n_cols = 1 + max(c for c, _ in place.values())
        height = 1 + max(r for _, r in place.values())
        bands = 1
        if n_cols > 8:
            bands = max(1, round(math.sqrt(n_cols * DX / (1.8 * (height + 0.6) * DY))))
        per = math.ceil(n_cols / bands)
        band_h = (height + 0.8) * DY
        for nid, (col, row) in place.items():
            b, cc = divmod(col, per)
            self.d.nodes[nid].pos = (cc * DX, b * band_h + row * DY)
        return self.d


# ---------------------------------------------------------------------------------------------
def seed_geron_cnn() -> Design:
    b = Builder("seed_geron_cnn",
                "Géron's textbook CNN (Hands-On ML, ch. 14): a 200x300 RGB image through three 3x3 "
                "convolutions, stride 2, SAME padding, with 100, 200 and 400 feature maps and a ReLU "
                "after each (not in place). 903,400 parameters; outputs 100x150, 50x75 and 25x38 maps.")
    x = b.add("Input", props={"shape": [3, 200, 300]}, id="input")
    for i, c in enumerate((100, 200, 400), 1):
        x = b.add("Conv2d", x, {"out_channels": c, "kernel": 3, "stride": 2, "padding": "SAME"}, id=f"conv{i}")
        x = b.add("ReLU", x, id=f"relu{i}")
    return b.layout()


def seed_keras_audio() -> Design:
    b = Builder("seed_keras_audio",
                "A Keras-style audio classifier on a 1491x257 spectrogram (channels first here): two "
                "3x3 VALID convolutions with 16 filters and ReLU, Flatten, Dense 128 + ReLU, Dense 1 + "
                "sigmoid. 770,482,865 parameters, almost all in the first Dense layer (6,019,376 x 128): "
                "2.9 GiB of fp32 weights before any activation or optimizer state.")
    x = b.add("Input", props={"shape": [1, 1491, 257]}, id="input")
    x = b.add("Conv2d", x, {"out_channels": 16, "kernel": 3, "padding": "VALID"}, id="conv1")
    x = b.add("ReLU", x, id="relu1")
    x = b.add("Conv2d", x, {"out_channels": 16, "kernel": 3, "padding": "VALID"}, id="conv2")
    x = b.add("ReLU", x, id="relu2")
    x = b.add("Flatten", x, id="flatten")
    x = b.add("Linear", x, {"out_features": 128}, id="dense1")
    x = b.add("ReLU", x, id="relu3")
    x = b.add("Linear", x, {"out_features": 1}, id="dense2")
    b.add("Sigmoid", x, id="sigmoid")
    return b.layout()


def seed_fc() -> Design:
    b = Builder("seed_fc",
                "A fully connected network: 1000 inputs, four hidden layers of 100 units with ReLU, "
                "10 outputs. 131,410 parameters; set up for training with batch 256.",
                settings={"mode": "train", "batch": 256, "optimizer": "sgd"})
    x = b.add("Input", props={"shape": [1000]}, id="input")
    for i in range(1, 5):
        x = b.add("Linear", x, {"out_features": 100}, id=f"fc{i}")
        x = b.add("ReLU", x, id=f"relu{i}")
    b.add("Linear", x, {"out_features": 10}, id="fc5")
    return b.layout()


def seed_quantized() -> Design:
    b = Builder("seed_quantized",
                "Per-layer weight bit widths: a 7x7 convolution from 1 to 64 channels (the 'depthwise "
                "convolution (7,7,1,64)' of a binary network: with one input channel every filter "
                "sees only its own channel) with 1-bit weights, 7*7*1*64/8 = 392 bytes, then a 3x3 "
                "convolution 64 -> 128 with 8-bit weights, 73,728 bytes. No biases, so the weight "
                "bytes are the layers' whole parameter memory.")
    x = b.add("Input", props={"shape": [1, 32, 32]}, id="input")
    x = b.add("Conv2d", x, {"out_channels": 64, "kernel": 7, "padding": "SAME", "groups": 1, "bias": False},
              id="dwconv", name="depthwise 7x7 (1-bit)", bits=1)
    x = b.add("ReLU", x, id="relu1")
    x = b.add("Conv2d", x, {"out_channels": 128, "kernel": 3, "padding": "SAME", "bias": False},
              id="conv", name="conv 3x3 (8-bit)", bits=8)
    b.add("ReLU", x, id="relu2")
    return b.layout()


def lenet5() -> Design:
    b = Builder("lenet5",
                "LeNet-5 (LeCun et al. 1998) on a 1x32x32 image: two 5x5 convolutions with tanh and "
                "2x2 average pooling, then fully connected 120-84-10. 61,706 parameters.")
    x = b.add("Input", props={"shape": [1, 32, 32]}, id="input")
    x = b.add("Conv2d", x, {"out_channels": 6, "kernel": 5, "padding": 0}, id="c1")
    x = b.add("Tanh", x, id="tanh1")
    x = b.add("AvgPool2d", x, {"kernel": 2}, id="s2")
    x = b.add("Conv2d", x, {"out_channels": 16, "kernel": 5, "padding": 0}, id="c3")
    x = b.add("Tanh", x, id="tanh2")
    x = b.add("AvgPool2d", x, {"kernel": 2}, id="s4")
    x = b.add("Flatten", x, id="flatten")
    x = b.add("Linear", x, {"out_features": 120}, id="f5")
    x = b.add("Tanh", x, id="tanh3")
    x = b.add("Linear", x, {"out_features": 84}, id="f6")
    x = b.add("Tanh", x, id="tanh4")
    b.add("Linear", x, {"out_features": 10}, id="output")
    return b.layout()


VGG16_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def vgg16() -> Design:
    b = Builder("vgg16",
                "VGG-16 as torchvision builds it (configuration D): thirteen 3x3 convolutions with "
                "in-place ReLU and five 2x2 max pools, AdaptiveAvgPool2d to 7x7, then 4096-4096-1000 "
                "fully connected layers with in-place ReLU and Dropout 0.5. 138,357,544 parameters.")
    x = b.add("Input", props={"shape": [3, 224, 224]}, id="input")
    block, k = 1, 1
    for v in VGG16_CFG:
        if v == "M":
            x = b.add("MaxPool2d", x, {"kernel": 2, "stride": 2}, id=f"pool{block}")
            block, k = block + 1, 1
        else:
            x = b.add("Conv2d", x, {"out_channels": v, "kernel": 3, "padding": 1}, id=f"conv{block}_{k}")
            x = b.add("ReLU", x, {"inplace": True}, id=f"relu{block}_{k}")
            k += 1
    x = b.add("AdaptiveAvgPool2d", x, {"output_size": 7}, id="avgpool")
    x = b.add("Flatten", x, id="flatten")
    x = b.add("Linear", x, {"out_features": 4096}, id="fc1")
    x = b.add("ReLU", x, {"inplace": True}, id="relu_fc1")
    x = b.add("Dropout", x, {"p": 0.5}, id="drop1")
    x = b.add("Linear", x, {"out_features": 4096}, id="fc2")
    x = b.add("ReLU", x, {"inplace": True}, id="relu_fc2")
    x = b.add("Dropout", x, {"p": 0.5}, id="drop2")
    b.add("Linear", x, {"out_features": 1000}, id="fc3")
    return b.layout()


def resnet18() -> Design:
    b = Builder("resnet18",
                "ResNet-18 as torchvision builds it: 7x7 stem, max pool, four stages of two basic "
                "blocks (3x3 conv, BN, ReLU, 3x3 conv, BN, out += identity, ReLU; ReLU and the add in "
                "place), 1x1 conv + BN downsample branches where the shape changes, global average "
                "pooling and a 1000-way Linear. 11,689,512 parameters.")
    x = b.add("Input", props={"shape": [3, 224, 224]}, id="input")
    x = b.add("Conv2d", x, {"out_channels": 64, "kernel": 7, "stride": 2, "padding": 3, "bias": False},
              id="conv1")
    x = b.add("BatchNorm2d", x, id="bn1")
    x = b.add("ReLU", x, {"inplace": True}, id="relu")
    x = b.add("MaxPool2d", x, {"kernel": 3, "stride": 2, "padding": 1}, id="maxpool")
    cin = 64
    for stage, planes in enumerate((64, 128, 256, 512), 1):
        for blk in range(2):
            stride = 2 if (stage > 1 and blk == 0) else 1
            p = f"layer{stage}_{blk}_"
            identity = x
            y = b.add("Conv2d", x, {"out_channels": planes, "kernel": 3, "stride": stride, "padding": 1,
                                    "bias": False}, id=p + "conv1")
            y = b.add("BatchNorm2d", y, id=p + "bn1")
            y = b.add("ReLU", y, {"inplace": True}, id=p + "relu1")
            y = b.add("Conv2d", y, {"out_channels": planes, "kernel": 3, "padding": 1, "bias": False},
                      id=p + "conv2")
            y = b.add("BatchNorm2d", y, id=p + "bn2")
            if stride != 1 or cin != planes:
                identity = b.add("Conv2d", x, {"out_channels": planes, "kernel": 1, "stride": stride,
                                               "padding": 0, "bias": False}, id=p + "downsample_conv", lane=1)
                identity = b.add("BatchNorm2d", identity, id=p + "downsample_bn", lane=1)
            y = b.add("Add", [y, identity], {"inplace": True}, id=p + "add")
            x = b.add("ReLU", y, {"inplace": True}, id=p + "relu2")
            cin = planes
    x = b.add("AdaptiveAvgPool2d", x, {"output_size": 1}, id="avgpool")
    x = b.add("Flatten", x, id="flatten")
    b.add("Linear", x, {"out_features": 1000}, id="fc")
    return b.layout()


def _make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def mobilenet_v2() -> Design:
    b = Builder("mobilenet_v2",
                "MobileNetV2 as torchvision builds it: inverted residual blocks (1x1 expand, 3x3 "
                "depthwise via groups, 1x1 project; BatchNorm; ReLU6 in place), residual x + conv(x) "
                "(not in place) where stride is 1 and the channels match, a 1x1 conv to 1280, global "
                "average pooling, Dropout 0.2 and a 1000-way Linear. 3,504,872 parameters.")

    def cna(x, cout, k, stride, groups, prefix, act=True):
        x = b.add("Conv2d", x, {"out_channels": cout, "kernel": k, "stride": stride, "padding": (k - 1) // 2,
                                "groups": groups, "bias": False}, id=prefix + "conv")
        x = b.add("BatchNorm2d", x, id=prefix + "bn")
        if act:
            x = b.add("ReLU6", x, {"inplace": True}, id=prefix + "relu6")
        return x

    x = b.add("Input", props={"shape": [3, 224, 224]}, id="input")
    x = cna(x, 32, 3, 2, 1, "stem_")
    cin = 32
    setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
               [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
    n_block = 1
    for t, c, n, s in setting:
        cout = _make_divisible(c)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = round(cin * t)
            p = f"block{n_block}_"
            y = x
            if t != 1:
                y = cna(y, hidden, 1, 1, 1, p + "expand_")
            y = cna(y, hidden, 3, stride, hidden, p + "dw_")
            y = cna(y, cout, 1, 1, 1, p + "project_", act=False)
            if stride == 1 and cin == cout:
                y = b.add("Add", [x, y], id=p + "add")
            x = y
            cin = cout
            n_block += 1
    x = cna(x, 1280, 1, 1, 1, "last_")
    x = b.add("AdaptiveAvgPool2d", x, {"output_size": 1}, id="avgpool")
    x = b.add("Flatten", x, id="flatten")
    x = b.add("Dropout", x, {"p": 0.2}, id="dropout")
    b.add("Linear", x, {"out_features": 1000}, id="classifier")
    return b.layout()


TE = {"vocab": 10000, "tokens": 128, "dim": 256, "heads": 8, "mlp": 1024, "depth": 4, "classes": 4}


def transformer_encoder() -> Design:
    c = TE
    b = Builder("transformer_encoder",
                f"A small pre-norm Transformer encoder classifier: {c['tokens']} int64 token ids "
                f"(vocabulary {c['vocab']}), Embedding to {c['dim']}, learned position embedding, "
                f"{c['depth']} blocks of [LayerNorm, {c['heads']}-head self-attention, residual Add, "
                f"LayerNorm, Linear {c['mlp']}, GELU, Linear {c['dim']}, residual Add], a final "
                f"LayerNorm, the mean over tokens and a {c['classes']}-way Linear. 5,753,348 parameters.")
    x = b.add("Input", props={"shape": [c["tokens"]], "dtype": "int64", "vocab": c["vocab"]}, id="tokens")
    x = b.add("Embedding", x, {"num_embeddings": c["vocab"], "embedding_dim": c["dim"]}, id="embedding")
    x = b.add("PositionEmbedding", x, id="pos_embed")
    for i in range(1, c["depth"] + 1):
        p = f"block{i}_"
        h = b.add("LayerNorm", x, id=p + "ln1")
        h = b.add("MultiHeadAttention", h, {"num_heads": c["heads"]}, id=p + "attn")
        x = b.add("Add", [x, h], id=p + "add1")
        h = b.add("LayerNorm", x, id=p + "ln2")
        h = b.add("Linear", h, {"out_features": c["mlp"]}, id=p + "fc1")
        h = b.add("GELU", h, id=p + "gelu")
        h = b.add("Linear", h, {"out_features": c["dim"]}, id=p + "fc2")
        x = b.add("Add", [x, h], id=p + "add2")
    x = b.add("LayerNorm", x, id="norm")
    x = b.add("Mean", x, {"dim": 1}, id="mean_tokens")
    b.add("Linear", x, {"out_features": c["classes"]}, id="head")
    return b.layout()


def lstm_classifier() -> Design:
    b = Builder("lstm_classifier",
                "A text classifier: 128 int64 token ids, Embedding 20000 x 256, a 2-layer LSTM with 512 "
                "hidden units (batch first) whose last time step feeds a 10-way Linear. 8,803,338 "
                "parameters.")
    x = b.add("Input", props={"shape": [128], "dtype": "int64", "vocab": 20000}, id="tokens")
    x = b.add("Embedding", x, {"num_embeddings": 20000, "embedding_dim": 256}, id="embedding")
    x = b.add("LSTM", x, {"hidden_size": 512, "num_layers": 2, "return_sequences": False}, id="lstm")
    b.add("Linear", x, {"out_features": 10}, id="fc")
    return b.layout()


BUILDERS = {f.__name__: f for f in (seed_geron_cnn, seed_keras_audio, seed_fc, seed_quantized, lenet5, vgg16,
                                    resnet18, mobilenet_v2, transformer_encoder, lstm_classifier)}


def build_all() -> dict:
    out = {}
    for name, fn in BUILDERS.items():
        d = fn()
        an = analyze(d)
        if not an.ok:
            raise SystemExit(f"{name}: " + "; ".join(map(str, an.issues)))
        params = estimate(d, analysis=an).params
        if params != EXPECTED_PARAMS[name]:
            raise SystemExit(f"{name}: {params:,} parameters, expected {EXPECTED_PARAMS[name]:,}")
        out[name] = json.dumps(design_to_dict(d), indent=2) + "\n"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare with the files on disk")
    args = ap.parse_args(argv)
    texts = build_all()
    stale = []
    for name, text in texts.items():
        path = OUT / f"{name}.json"
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Starting points for a new design (the window's start view): small networks a newcomer can
change instead of building from an empty canvas. Each builder returns a fresh Design with the run
settings it is usually met with; positions are left to the window's auto layout."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memdesigner.model.design import Design


@dataclass(frozen=True)
class Template:
    key: str
    title: str
    doc: str
    build: Callable[[], Design] | None  # None: made by an importer (hf_config names the file)
    hf_config: str = ""  # resources/examples/hf/<file>: imported with import hf
    seq_len: int = 0
    transformers_major: int | None = None  # hf_config: the transformers major it follows (None: the newest)


def _chain(d: Design, start: str, steps) -> str:
    prev = start
    for i, (type_name, props) in enumerate(steps):
        nid = d.add_node(type_name, props, id=f"{type_name.lower()}{i}").id
        d.add_edge(prev, nid)
        prev = nid
    return prev


def mlp() -> Design:
    """MNIST-sized: 784 -> 512 -> 512 -> 10, trained with Adam."""
    d = Design("mlp")
    d.add_node("Input", {"shape": (784,)}, id="x")
    _chain(d, "x", [("Linear", {"out_features": 512}), ("ReLU", None), ("Linear", {"out_features": 512}),
                    ("ReLU", None), ("Linear", {"out_features": 10})])
    d.settings = {"mode": "train", "batch": 64, "optimizer": "adam"}
    return d


def cnn() -> Design:
    """A CIFAR-sized CNN: two conv-BN-ReLU-pool stages, global pooling, a 10-way Linear."""
    d = Design("cnn")
    d.add_node("Input", {"shape": (3, 32, 32)}, id="x")
    stage = [("Conv2d", {"out_channels": 32, "padding": 1}), ("BatchNorm2d", None), ("ReLU", None),
             ("MaxPool2d", None), ("Conv2d", {"out_channels": 64, "padding": 1}), ("BatchNorm2d", None),
             ("ReLU", None), ("AdaptiveAvgPool2d", None), ("Flatten", None), ("Linear", {"out_features": 10})]
    _chain(d, "x", stage)
    d.settings = {"mode": "train", "batch": 128, "optimizer": "sgd"}
    return d


def transformer_block() -> Design:
    """One pre-norm encoder block on 128 tokens of width 256: attention and a 4x MLP, each with
    its residual add."""
    d = Design("transformer-block")
    d.add_node("Input", {"shape": (128, 256)}, id="x")
    d.add_node("LayerNorm", None, id="ln1")
    d.add_node("MultiHeadAttention", {"num_heads": 8}, id="attn")
    d.add_node("Add", None, id="res1")
    d.add_node("LayerNorm", None, id="ln2")
    d.add_node("Linear", {"out_features": 1024}, id="up")
    d.add_node("GELU", None, id="act")
    d.add_node("Linear", {"out_features": 256}, id="down")
    d.add_node("Add", None, id="res2")
    for a, b, port in (("x", "ln1", 0), ("ln1", "attn", 0), ("x", "res1", 0), ("attn", "res1", 1), ("res1", "ln2", 0),
                       ("ln2", "up", 0), ("up", "act", 0), ("act", "down", 0), ("res1", "res2", 0),
                       ("down", "res2", 1)):
        d.add_edge(a, b, dst_port=port)
    d.settings = {"mode": "train", "batch": 32, "optimizer": "adamw"}
    return d


TEMPLATES = (
    Template("mlp", "MLP", "784 → 512 → 512 → 10 fully connected, Adam", mlp),
    Template("cnn", "CNN", "two conv stages on 32×32 RGB, global pooling, 10 classes", cnn),
    Template("transformer", "Transformer block", "pre-norm attention + MLP block, 128 tokens × 256",
             transformer_block),
    Template("llama", "Llama-style LLM", "Llama-3-8B from its Hugging Face config, 2,048 tokens", None,
             hf_config="llama-3-8b.json", seq_len=2048),
)

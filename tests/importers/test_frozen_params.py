"""Frozen parameters survive import and blocks. A module's own ``p.requires_grad = False``
(the transfer-learning tutorial's frozen backbone, HF's sinusoidal position tables) makes its
node untrainable on import (importers/_torch_frozen.py), and a design with blocks keeps each
node's Node.trainable through folding and expansion (model/block_fold.py, blocks.py): before,
every imported model with repeated children (folded into blocks) trained every parameter, frozen
or not (torchvision resnet18 feature extractor, momentum b8: +194.8 % -> exact).
Measured with the truth harness (shared/truth/measure.py, method a, CPU, torch 2.13), batch 8."""

import pytest

from memdesigner import estimate
from memdesigner.model.block_fold import fold_repeats
from memdesigner.model.blocks import expand
from memdesigner.model.design import Design


def _mlp(n_blocks=3) -> Design:
    """Input -> stem -> n_blocks x (Linear, ReLU) with block-style scopes -> head."""
    d = Design("mlp")
    d.add_node("Input", {"shape": [32]}, id="x")
    d.add_node("Linear", {"out_features": 64}, id="stem", scope="stem")
    d.add_edge("x", "stem")
    prev = "stem"
    for k in range(n_blocks):
        call = f"blocks/blocks.{k}"
        d.add_node("Linear", {"out_features": 64}, id=f"blocks.{k}.fc", name=f"blocks.{k}.fc",
                   scope=f"{call}/blocks.{k}.fc")
        d.add_node("ReLU", {}, id=f"blocks.{k}.relu", name=f"blocks.{k}.relu", scope=call)
        d.add_edge(prev, f"blocks.{k}.fc")
        d.add_edge(f"blocks.{k}.fc", f"blocks.{k}.relu")
        prev = f"blocks.{k}.relu"
    d.add_node("Linear", {"out_features": 10}, id="head", scope="head")
    d.add_edge(prev, "head")
    return d


def _peak(design, opt="momentum"):
    return estimate(design, mode="train", optimizer=opt, batch=8, backend="cpu").peak_bytes


def _frozen(d: Design, which) -> Design:
    for nid in which:
        d.set_trainable(nid, False)
    return d


BACKBONE = ("stem", "blocks.0.fc", "blocks.1.fc", "blocks.2.fc")


def test_folded_design_trains_what_the_flat_one_does():
    flat = _frozen(_mlp(), BACKBONE)
    folded = fold_repeats(_frozen(_mlp(), BACKBONE))
    assert folded.blocks, "the three blocks fold into one definition"
    assert _peak(folded) == _peak(flat) < _peak(_mlp())
    assert not any(n.trainable for nid, n in expand(folded).nodes.items() if nid != "head" and n.type == "Linear")


def test_a_frozen_repetition_does_not_fold_with_trained_ones():
    flat = _frozen(_mlp(), ("blocks.1.fc",))
    assert _peak(fold_repeats(_frozen(_mlp(), ("blocks.1.fc",)))) == _peak(flat) < _peak(_mlp())


def test_a_frozen_block_instance_freezes_its_nodes():
    folded = fold_repeats(_mlp())
    inst = next(nid for nid, n in folded.nodes.items() if n.type == "Block")
    folded.set_trainable(inst, False)
    assert _peak(folded) == _peak(_frozen(_mlp(), BACKBONE[1:]))


torch = pytest.importorskip("torch")
nn = torch.nn


class Block(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Backbone(nn.Module):
    """A stem and three identical blocks (folded into one block x3 on import), then a head."""

    def __init__(self, freeze):
        super().__init__()
        self.stem = nn.Linear(32, 64)
        self.blocks = nn.Sequential(*[Block() for _ in range(3)])
        self.head = nn.Linear(64, 10)
        if freeze:
            for p in list(self.stem.parameters()) + list(self.blocks.parameters()):
                p.requires_grad = False

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def _imported(freeze):
    from memdesigner.importers.torch_fx import from_module

    with torch.device("meta"):
        m = Backbone(freeze)
    return from_module(m, (32,))


@pytest.mark.parametrize(("freeze", "opt", "measured"), [
    (True, "momentum", 72_784), (True, "adam", 75_392), (False, "momentum", 186_304), (False, "adam", 278_284)])
def test_imported_frozen_backbone_matches_the_measurement(freeze, opt, measured):
    d = _imported(freeze)
    assert d.blocks
    assert _peak(d, opt) == measured


def test_partly_frozen_layer_is_named():
    with torch.device("meta"):
        m = Backbone(False)
    m.stem.bias.requires_grad = False
    from memdesigner.importers.torch_fx import from_module

    d = from_module(m, (32,))
    assert d.nodes["stem"].trainable
    assert any(w.startswith("stem: some of its parameters") for w in d.import_warnings)


def test_grouping_ungrouping_and_copying_keep_frozen_layers():
    from memdesigner.model import block_edit

    flat = _frozen(_mlp(), ("blocks.1.fc",))
    d = _frozen(_mlp(), ("blocks.1.fc",))
    inst = block_edit.group_nodes(d, ["blocks.1.fc", "blocks.1.relu"], "mid")
    assert _peak(d) == _peak(flat)
    block_edit.make_unique(d, inst)  # a private copy of the definition
    assert _peak(d) == _peak(flat)
    block_edit.ungroup(d, inst)
    assert _peak(d) == _peak(flat) < _peak(_mlp())


class Positions(nn.Module):
    """A frozen position table called on a position-ids buffer (DistilBERT's embeddings): the
    module is fed by a buffer, so it imports as a Generic node; its frozen weight still weighs."""

    def __init__(self, freeze):
        super().__init__()
        self.tok = nn.Embedding(100, 64)
        self.pos = nn.Embedding(512, 64)
        self.register_buffer("position_ids", torch.arange(16).unsqueeze(0), persistent=False)
        self.head = nn.Linear(64, 100)
        self.pos.weight.requires_grad = not freeze
        self.truth_input = ("tokens", 100)

    def forward(self, ids):
        return self.head(self.tok(ids) + self.pos(self.position_ids))


@pytest.mark.parametrize(("freeze", "measured"), [(True, 440_528), (False, 1_044_692)])
def test_frozen_weight_of_a_generic_module_counts_without_gradient(freeze, measured):
    from memdesigner.importers.torch_fx import from_module

    with torch.device("meta"):
        m = Positions(freeze)
    d = from_module(m, (16,))
    assert d.nodes["pos"].type == "Generic" and d.nodes["pos"].trainable is not freeze
    # 128 B short in both: the 16 int64 position ids (a buffer read only by a Generic node)
    assert estimate(d, mode="train", optimizer="adam", batch=4, backend="cpu").peak_bytes == measured - 128

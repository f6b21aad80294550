"""PyTorch import without a factory named: the file's model is the nn.Module class no other class of
the file uses (its blocks and helpers are named inside it), built with no arguments; the design is
named after the model's class, not after the factory ("make")."""

import textwrap

import pytest

pytest.importorskip("torch")

from memdesigner.importers._torch_factory import load_factory, load_factory_module  # noqa: E402

FILE = '''
import torch.nn as nn

class RMSNorm(nn.Module):          # a helper first, needing arguments: the old default built it and failed
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.w = nn.Parameter(__import__("torch").ones(dim))
    def forward(self, x):
        return x * self.w

class Block(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.fc = nn.Linear(dim, dim)
    def forward(self, x):
        return self.fc(self.norm(x))

class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(16, 4)
    def forward(self, x):
        return self.head(self.blocks(x))

class Unrelated(nn.Module):        # needs arguments and nobody uses it: not a candidate to build
    def __init__(self, n):
        super().__init__()

def make():
    return TinyNet()
'''


def test_the_model_is_the_class_nobody_uses(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(FILE))
    assert load_factory(str(path)).__name__ == "TinyNet"
    module, _, name = load_factory_module(str(path))
    assert name == "TinyNet" and sum(p.numel() for p in module.parameters()) == 2 * (16 + 16 * 16 + 16) + 16 * 4 + 4


def test_a_factory_names_the_design_after_its_model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(FILE))
    assert load_factory_module(f"{path}:make")[2] == "TinyNet"

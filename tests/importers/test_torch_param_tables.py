"""Parameters that are tensors of the module itself (nn.Parameter class token, a positional
table, layer-scale gammas) are imported as parameters on every torch import path: torch.fx,
torch.export and the dispatch-level fallback. torch.fx dropped a positional table cut to the
sequence (``pos[:, :x.shape[1]]``) with only a warning: 21,770 of 25,866 parameters."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from memdesigner.engine.estimate import estimate  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class LayerScaleBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(d), nn.Linear(d, d)
        self.gamma = nn.Parameter(1e-5 * torch.ones(d))  # layer scale (CaiT, ConvNeXt, DINOv2)

    def forward(self, x):
        return x + self.gamma * self.fc(self.norm(x))


class ViTish(nn.Module):
    def __init__(self, d=64, table=17, sliced=False):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 8, 8)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, table, d))
        self.sliced = sliced
        self.blocks = nn.Sequential(LayerScaleBlock(d), LayerScaleBlock(d))
        self.head = nn.Linear(d, 10)

    def body(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)
        x = x + (self.pos[:, : x.shape[1]] if self.sliced else self.pos)
        return self.head(self.blocks(x)[:, 0])

    def forward(self, x):
        return self.body(x)


class ShapeBranch(ViTish):  # torch.fx cannot branch on a shape; torch.export can
    def forward(self, x):
        if x.shape[-1] == 32:
            x = x + 0
        return self.body(x)


class ValueBranch(ViTish):  # neither can branch on a value: the dispatch-level trace
    def forward(self, x):
        if x.sum() > 0:
            x = x * 1
        return self.body(x)


@pytest.mark.parametrize("cls", [ViTish, ShapeBranch, ValueBranch])
@pytest.mark.parametrize("sliced", [False, True])
def test_every_parameter_is_imported(cls, sliced):
    m = cls(table=64 if sliced else 17, sliced=sliced)
    d = from_module(m, (3, 32, 32))
    dispatched = any("dispatch-level" in w for w in d.import_warnings)
    assert dispatched == (cls is ValueBranch)
    want = sum(p.numel() for p in m.parameters())  # 25,866 sliced (a 64-row table), 22,858 not
    assert want == (25866 if sliced else 22858)
    assert estimate(d, None).params == want
    assert not any("parameter count" in w for w in d.import_warnings)

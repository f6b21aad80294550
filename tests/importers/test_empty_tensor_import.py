"""An empty tensor in an imported model (Phi-3's partial-rotary split ``q[..., rotary_dim:]`` when
the whole head dimension rotates) is a Generic node of no bytes, instead of a shape with a 0
dimension that the Generic layer refuses (which failed the whole import: "dimension 0 must be
positive"). Measured with the truth harness (shared/truth/measure.py, method a, CPU, torch 2.13),
batch 4."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class EmptyPass(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)
        self.out = nn.Linear(64, 8)

    def forward(self, x):
        h = self.fc(x)
        rot, keep = h[..., :64], h[..., 64:]
        return self.out(torch.cat([torch.tanh(rot), keep], dim=-1))


@pytest.mark.parametrize(("mode", "opt", "measured"), [("train", "adam", 127_896), ("inference", "none", 84_256)])
def test_empty_slice_imports_and_weighs_nothing(mode, opt, measured):
    with torch.device("meta"):
        m = EmptyPass()
    d = from_module(m, (16, 64))
    assert memdesigner.estimate(d, mode=mode, optimizer=opt, batch=4, backend="cpu").peak_bytes == measured

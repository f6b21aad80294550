"""Code a model runs under ``torch.no_grad()`` (a frozen feature extractor, a distillation teacher)
imports as frozen nodes: torch.fx does not record grad mode, so the importer reads the source
lines the ops ran at (importers/_torch_no_grad.py). Before, the block trained like the rest
(SGD b16: 1,227,480 B estimated, 640,680 measured, +91.6 %; a resnet18 linear probe AdamW b8
+234 %). Measured with the truth harness (shared/truth/measure.py, method a, CPU, torch 2.13),
batch 16."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))

    def forward(self, x):
        return self.body(x)


class Probe(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.backbone = Backbone()
        self.head = nn.Linear(256, 10)
        self.how = how

    @torch.no_grad()
    def features(self, x):
        return self.backbone(x)

    def forward(self, x):
        if self.how == "with":
            with torch.no_grad():
                f = self.backbone(x)
        elif self.how == "decorated":
            f = self.features(x)
        else:
            f = self.backbone(x)
        return self.head(torch.relu(f))


@pytest.mark.parametrize(("how", "opt", "measured"), [
    ("with", "sgd", 640_680), ("with", "adam", 661_248), ("plain", "sgd", 1_227_480), ("plain", "adam", 2_942_788),
    ("decorated", "sgd", 640_040), ("decorated", "adam", 660_608)])
def test_no_grad_block_matches_the_measurement(how, opt, measured):
    with torch.device("meta"):
        m = Probe(how)
    d = from_module(m, (64,))
    assert d.nodes["head"].trainable and d.nodes["backbone.body.0"].trainable is (how == "plain")
    est = memdesigner.estimate(d, mode="train", optimizer=opt, batch=16, backend="cpu").peak_bytes
    # decorated: 640 B over (one (16, 10) fp32 tensor, a Python reference the import reads longer)
    assert est == measured + (640 if how == "decorated" else 0)


def test_detach_is_said_not_modelled():
    """A ``.detach()`` stops gradients, which the design does not model (it imports as a view):
    the import must say so, because the layers before it are then estimated as training."""

    class Detached(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = Backbone()
            self.head = nn.Linear(256, 10)

        def forward(self, x):
            return self.head(self.backbone(x).detach())

    d = from_module(Detached(), (64,))
    said = [w for w in d.import_warnings if ".detach()" in w]
    assert len(said) == 1 and "not modelled" in said[0]

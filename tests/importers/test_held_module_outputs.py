"""``a, _ = self.attn(x, x, x)`` (PyTorch's docs write it so): the name ``_`` holds
nn.MultiheadAttention's head-averaged weights (B, L, S) until ``forward`` returns, though nothing
reads them. The importer makes that element a node whose lifetime the binding sets
(importers/_torch_held.py), and a Python local nothing reads is no model output (the engine frees
it with its name, engine/sim_structure.py). Without it the weights died with the layer: eval
-4,096 B (-8.4 %; holdout3's mha_padded -5.3 %); kept as a model output instead, training held
them through backward (+4,096 B). Measured with the truth harness (CPU, torch 2.13, method a),
batch 4, L = 16, E = 32, 4 heads: weights 4 * 16 * 16 * 4 B = 4,096 B."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class HeldWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.fc = nn.Linear(32, 8)

    def forward(self, x):
        a, _ = self.attn(x, x, x)
        return self.fc(torch.relu(a))


class DroppedWeights(HeldWeights):
    def forward(self, x):
        a = self.attn(x, x, x)[0]
        return self.fc(torch.relu(a))


def _peak(cls, mode):
    with torch.device("meta"):
        module = cls()
    design = from_module(module, (16, 32))
    return memdesigner.estimate(design, mode=mode, optimizer="sgd" if mode == "train" else "none", batch=4,
                                backend="cpu").peak_bytes


@pytest.mark.parametrize(("cls", "mode", "measured"), [
    (HeldWeights, "inference", 48_672), (HeldWeights, "train", 131_784),
    (DroppedWeights, "inference", 44_576), (DroppedWeights, "train", 131_784)])
def test_weights_held_by_a_name_match_the_measurement(cls, mode, measured):
    assert _peak(cls, mode) == measured


def test_the_held_weights_are_a_node_the_name_keeps_to_the_end():
    with torch.device("meta"):
        module = HeldWeights()
    d = from_module(module, (16, 32))
    held = [n for n in d.nodes.values() if n.type == "Generic"]
    assert [(n.props["out_shape"], n.keep_until, n.output) for n in held] == [((16, 16), "fc", False)]
    assert d.nodes["attn"].keep_until == "fc"  # ``a`` too


@pytest.mark.parametrize(("cls", "held"), [(HeldWeights, True), (DroppedWeights, False)])
def test_export_binds_the_held_weights_and_imports_them_again(tmp_path, cls, held):
    """The exporter writes ``a, w = self.attn(...)`` only where a name held them (a bare ``a, _ =``
    would keep weights the design lets die: ``self.attn(...)[0]`` otherwise), so the file imports
    to the same held node."""
    import re

    from memdesigner.exporters.torch_code import to_python
    from memdesigner.importers.torch_fx import import_file

    with torch.device("meta"):
        module = cls()
    code = to_python(from_module(module, (16, 32)))
    assert bool(re.search(r"\w+, attn_output1 = self\.attn\(", code)) is held
    assert ("need_weights=True)[0]" in code) is not held
    f = tmp_path / "exported.py"
    f.write_text(code)
    d2 = import_file(f"{f}:make")
    found = [(n.props["out_shape"], n.keep_until) for n in d2.nodes.values() if n.type == "Generic"]
    assert found == ([((16, 16), "fc")] if held else [])

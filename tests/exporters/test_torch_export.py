"""Design -> PyTorch code: runnable, and import -> export -> import keeps params and the estimate."""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner
from memdesigner.cli import main as cli_main
from memdesigner.exporters.torch_code import to_python
from memdesigner.importers.torch_fx import from_module, import_file
from memdesigner.io.design_file import copy_design

TRUTH = Path(__file__).resolve().parents[3] / "shared" / "truth"
SETTINGS = [{"mode": "inference", "batch": 3}, {"mode": "train", "batch": 3, "optimizer": "adam"},
            {"mode": "train", "batch": 2, "optimizer": "sgd", "amp": True}]


def _make(code):
    ns = {}
    exec(compile(code, "<export>", "exec"), ns)  # noqa: S102 - our own generated code
    return ns["make"]


def _flat(design):
    """The design's graph without the source module's Python-frame annotations (expanded first:
    a folded block's layers keep theirs inside the definition)."""
    from memdesigner.model.blocks import expand
    from memdesigner.model.design import is_held

    d = copy_design(expand(design))
    for n in d.nodes.values():
        n.scope = n.keep_until = ""
    for nid in [nid for nid, n in d.nodes.items() if is_held(n)]:  # a tensor only a Python name held
        d.remove_node(nid)
    return d


def _round_trip(design):
    code = to_python(design)
    m, shape = _make(code)()
    d2 = from_module(m, shape, name=design.name)
    # The graph round-trips exactly. Where the original module's own Python frames kept
    # tensors alive (module calls, local variables: Node.scope / keep_until, an output only a name
    # holds), the flat exported code has frames of its own, so compare the graphs without those.
    flat1, flat2 = _flat(design), _flat(d2)
    for kw in SETTINGS:
        a = memdesigner.estimate(flat1, backend="cpu", **kw)
        b = memdesigner.estimate(flat2, backend="cpu", **kw)
        assert a.params == b.params == sum(p.numel() for p in m.parameters())
        assert a.peak_bytes == b.peak_bytes, kw
    return m, shape, d2


def test_export_runs_and_round_trips():
    from tests.importers.test_torch_import import Attn, Net, Tokens

    for cls, shape in ((Net, (3, 16, 16)), (Attn, (8, 32)), (Tokens, (10,))):
        d = from_module(cls(), shape)
        m, s, _ = _round_trip(d)
        spec = getattr(m, "truth_input", None)
        x = torch.randint(0, spec[1], (2, *s)) if spec else torch.randn(2, *s)
        y = m(x)
        for t in (y if isinstance(y, tuple) else (y,)):
            assert t.shape[0] == 2


def test_export_of_a_hand_built_design():
    d = memdesigner.Design("hand made")
    d.add_node("Input", {"shape": (3, 8, 8)}, id="in")
    d.add_node("Conv2d", {"out_channels": 4, "padding": "SAME"}, id="c")
    d.add_node("ReLU", {"inplace": True}, id="r")
    d.add_node("Flatten", {}, id="f")
    d.add_node("Linear", {"out_features": 5}, id="fc")
    for a, b in (("in", "c"), ("c", "r"), ("r", "f"), ("f", "fc")):
        d.add_edge(a, b)
    code = to_python(d)
    assert "class HandMade(nn.Module)" in code and "def make():" in code
    m, shape = _make(code)()
    assert m(torch.randn(2, *shape)).shape == (2, 5)
    _round_trip(d)


def test_cli_export(tmp_path):
    from memdesigner.io.design_file import save_design
    from tests.importers.test_torch_import import Net

    d = from_module(Net(), (3, 16, 16))
    p = tmp_path / "d.json"
    save_design(d, p)
    out = tmp_path / "model.py"
    assert cli_main(["export", "torch", str(p), "-o", str(out)]) == 0
    d2 = import_file(f"{out}:make")
    assert memdesigner.estimate(d2).params == memdesigner.estimate(d).params


@pytest.mark.skipif(not (TRUTH / "zoo.py").exists(), reason="shared/truth not found")
@pytest.mark.parametrize("name", ["seed_fc", "lenet5", "resnet18", "mobilenet_v2", "unet_small", "vit_tiny",
                                  "lstm_classifier", "vgg11_bn", "maxpool_cnn", "with_dropout_mlp"])
def test_zoo_round_trip(name):
    d = import_file(f"{TRUTH / 'zoo.py'}:{name}")
    code = to_python(d)
    with torch.device("meta"):
        m, shape = _make(code)()
    d2 = from_module(m, shape)
    for kw in SETTINGS[:2]:
        assert memdesigner.estimate(_flat(d), backend="cpu", **kw).peak_bytes == \
            memdesigner.estimate(_flat(d2), backend="cpu", **kw).peak_bytes


@pytest.mark.parametrize("rnn", ["GRU", "LSTM"])
def test_rnn_with_h_n_used_exports_and_imports_back(rnn):
    """h_n (the second output) used downstream: PyTorch returns it (layers x directions, batch,
    hidden); the export transposes it to the design's batch-first layout. It raised KeyError."""
    pytest.importorskip("torch")
    from memdesigner.engine.settings import Settings
    from memdesigner.model.design import Design

    d = Design("h_n_used")
    d.add_node("Input", {"shape": (8, 4)}, id="x")
    d.add_node(rnn, {"hidden_size": 6, "bidirectional": True, "return_sequences": False}, id="rnn")
    d.add_node("Flatten", {}, id="flat")
    d.add_node("Linear", {"out_features": 3}, id="fc")
    d.add_edge("x", "rnn")
    d.add_edge("rnn", "flat", 1, 0)
    d.add_edge("flat", "fc")
    ns: dict = {}
    exec(compile(to_python(d), "<rnn>", "exec"), ns)  # noqa: S102 - memdesigner's own output
    module, shape = ns["make"]()
    back = from_module(module, shape)
    assert not [n for n in back.nodes.values() if n.type == "Generic"]
    s = Settings(backend="cpu", batch=2, mode="train", optimizer="adam")
    a, b = memdesigner.estimate(d, s), memdesigner.estimate(back, s)
    # per direction: gates x hidden x (input + hidden) weights and two biases; h_n is (2, 6) per sample
    assert b.params == a.params == (3 if rnn == "GRU" else 4) * 2 * (6 * 4 + 6 * 6 + 2 * 6) + 12 * 3 + 3
    # (the peaks differ: PyTorch's h_n read batch first is a transposed view, which Flatten copies;
    # the design's h_n is batch-first memory already)

"""Blocks: a design with linked instances estimates exactly as the flat network it stands for."""

import json

import pytest

import memdesigner as md
from memdesigner.io.design_file import copy_design, design_from_dict, design_to_dict, load_design, save_design
from memdesigner.model import block_edit, blocks
from memdesigner.model.design import Design

MODES = [dict(mode="inference", backend="cpu"), dict(mode="train", optimizer="adam", backend="cpu")]


def _layer(d: Design, prefix: str, x: str, width: int = 32) -> str:
    """A pre-norm MLP residual layer: LayerNorm -> Linear -> GELU -> Linear -> Add."""
    d.add_node("LayerNorm", {}, id=f"{prefix}ln")
    d.add_node("Linear", {"out_features": 4 * width}, id=f"{prefix}fc1")
    d.add_node("GELU", {}, id=f"{prefix}act")
    d.add_node("Linear", {"out_features": width}, id=f"{prefix}fc2")
    d.add_node("Add", {}, id=f"{prefix}add")
    d.add_edge(x, f"{prefix}ln")
    d.add_edge(f"{prefix}ln", f"{prefix}fc1")
    d.add_edge(f"{prefix}fc1", f"{prefix}act")
    d.add_edge(f"{prefix}act", f"{prefix}fc2")
    d.add_edge(x, f"{prefix}add", 0, 0)
    d.add_edge(f"{prefix}fc2", f"{prefix}add", 0, 1)
    return f"{prefix}add"


def flat_transformer(n: int = 3) -> Design:
    d = Design("flat")
    d.add_node("Input", {"shape": (16,), "dtype": "int64"}, id="tokens")
    d.add_node("Embedding", {"num_embeddings": 100, "embedding_dim": 32}, id="emb")
    d.add_edge("tokens", "emb")
    x = "emb"
    for k in range(n):
        x = _layer(d, f"l{k}_", x)
    d.add_node("Linear", {"out_features": 100}, id="head")
    d.add_edge(x, "head")
    return d


def block_transformer(n: int = 3) -> Design:
    d = Design("blocks")
    d.add_node("Input", {"shape": (16,), "dtype": "int64"}, id="tokens")
    d.add_node("Embedding", {"num_embeddings": 100, "embedding_dim": 32}, id="emb")
    d.add_edge("tokens", "emb")
    bd = blocks.new_definition(d, "layer")
    bd.graph.add_node("BlockInput", {"shape": (16, 32)}, id="x")
    out = _layer(bd.graph, "", "x")
    bd.graph.add_node("BlockOutput", {}, id="y")
    bd.graph.add_edge(out, "y")
    d.add_node("Block", {"definition": "layer", "repeat": n}, id="layers")
    d.add_edge("emb", "layers")
    d.add_node("Linear", {"out_features": 100}, id="head")
    d.add_edge("layers", "head")
    return d


def numbers(r) -> dict:
    """What an estimate says, without node ids or names."""
    return {"peak": r.peak_bytes, "phases": dict(r.phase_peaks), "at_peak": dict(r.at_peak), "params": r.params,
            "param_bytes": r.param_bytes, "flops": r.flops, "lower": r.lower_bound_bytes,
            "timeline": [(e.phase, e.bytes, e.by_category) for e in r.timeline],
            "rows": [(x.type, x.output_shape, x.params, x.param_bytes, x.activation_bytes, x.kept_bytes, x.flops)
                     for x in r.layers]}


def report_text(r) -> str:
    return json.dumps(r.to_dict(), sort_keys=True)


@pytest.mark.parametrize("kw", MODES)
def test_stack_estimates_as_the_flat_transformer(kw):
    d, flat = block_transformer(), flat_transformer()
    r = md.estimate(d, batch=4, **kw)
    assert r.ok and r.issues == []
    assert numbers(r) == numbers(md.estimate(flat, batch=4, **kw))
    # and byte for byte as its own expansion (names, ids, timeline labels, per-instance totals)
    assert report_text(r) == report_text(md.estimate(blocks.expand(d), batch=4, **kw))
    # 3 layers of 2 Linears: 32*128+128 + 128*32+32, plus LayerNorm 64
    assert r.blocks["layers"]["total"]["params"] == 3 * (32 * 128 + 128 + 128 * 32 + 32 + 64)
    assert r.blocks["layers"]["per_instance"]["params"] == 32 * 128 + 128 + 128 * 32 + 32 + 64


def test_expanded_names_scopes_and_shared_props():
    d = block_transformer(2)
    inst = d.nodes["layers"]
    inst.name, inst.scope = "model.layers", "model"
    bd = d.blocks["layer"]
    bd.graph.nodes["fc1"].name = "mlp.up_proj"
    bd.graph.nodes["fc1"].scope = "mlp"
    flat = blocks.expand(d)
    n = flat.nodes["layers.1.fc1"]
    assert n.name == "model.layers.1.mlp.up_proj"
    assert n.scope == "model/model.layers.1/model.layers.1.mlp"
    assert flat.nodes["layers.0.fc2"].scope == "model/model.layers.0"
    # one prop dict per definition node: the per-node caches hit for every repetition
    assert flat.nodes["layers.0.fc1"].props is flat.nodes["layers.1.fc1"].props is bd.graph.nodes["fc1"].props
    # repeat 1 of a plain definition: no index
    d.set_prop("layers", "repeat", 1)
    assert "model.layers.mlp.up_proj" in {x.name for x in blocks.expand(d).nodes.values()}
    # a design without blocks is itself
    plain = flat_transformer()
    assert blocks.expand(plain) is plain


@pytest.mark.parametrize("kw", MODES)
def test_grouped_cnn_and_linked_instances(kw):
    def cnn(scopes=("", "", "")):
        d = Design("cnn")
        d.add_node("Input", {"shape": (8, 16, 16)}, id="in")
        prev = "in"
        for k in range(3):
            for t, p in (("Conv2d", {"out_channels": 8, "kernel": 3, "padding": 1}), ("BatchNorm2d", {}),
                         ("ReLU", {})):
                nid = f"{t.lower()}{k}"
                d.add_node(t, p, id=nid, scope=scopes[k])
                d.add_edge(prev, nid)
                prev = nid
        d.add_node("Flatten", {}, id="flat")
        d.add_edge(prev, "flat")
        return d

    flat = cnn()
    ref = md.estimate(flat, batch=2, **kw)
    assert ref.ok and ref.params == 3 * (8 * 8 * 9 + 8 + 16)
    want = numbers(ref)
    d = cnn()
    inst = block_edit.group_nodes(d, ["conv2d0", "batchnorm2d0", "relu0"], "cbr")
    assert d.nodes[inst].type == "Block" and len(d.blocks["cbr"].graph.nodes) == 5  # 3 + in + out
    assert numbers(md.estimate(d, batch=2, **kw)) == want
    # the other two triples as instances of the same definition (linked)
    for k in (1, 2):
        ids = [f"conv2d{k}", f"batchnorm2d{k}", f"relu{k}"]
        nid = block_edit.group_nodes(d, ids, f"tmp{k}")
        d.set_prop(nid, "definition", "cbr")
        del d.blocks[f"tmp{k}"]
    assert [n.type for n in d.nodes.values()] == ["Input", "Block", "Block", "Block", "Flatten"]
    # an instance is a module call: its input stays alive until its last op ran, as the flat
    # network with those module scopes does (and not as one without them)
    scoped = numbers(md.estimate(cnn(("cbr", "tmp1", "tmp2")), batch=2, **kw))
    assert numbers(md.estimate(d, batch=2, **kw)) == scoped
    if kw["mode"] == "inference":
        assert scoped["peak"] == want["peak"] + 2 * 8 * 16 * 16 * 4
    # editing the definition changes every instance
    g = d.blocks["cbr"].graph
    g.set_prop("conv2d0", "out_channels", 8)  # unchanged value: same numbers
    g.set_prop("conv2d0", "kernel", 1)
    g.set_prop("conv2d0", "padding", 0)
    r = md.estimate(d, batch=2, **kw)
    assert r.issues == []
    assert r.params == 3 * (8 * 8 + 8 + 16)
    # ungroup gives back the flat network
    for nid in [n for n in d.nodes if d.nodes[n].type == "Block"]:
        block_edit.ungroup(d, nid)
    assert not d.blocks and len(d.nodes) == 11
    assert md.estimate(d, batch=2, **kw).params == 3 * (8 * 8 + 8 + 16)


def test_repeat_that_does_not_chain_is_refused():
    d = block_transformer(2)
    g = d.blocks["layer"].graph
    g.set_prop("fc2", "out_features", 48)  # the residual Add now broadcasts 32 vs 48: refused inside
    an = blocks.analyze_collapsed(d)
    assert an.nodes["layers"].issue is not None
    # a definition whose output shape differs from its input cannot be repeated
    d = Design("t")
    d.add_node("Input", {"shape": (16,)}, id="in")
    bd = blocks.new_definition(d, "up")
    bd.graph.add_node("BlockInput", {"shape": (16,)}, id="x")
    bd.graph.add_node("Linear", {"out_features": 24}, id="fc")
    bd.graph.add_node("BlockOutput", {}, id="y")
    bd.graph.add_edge("x", "fc")
    bd.graph.add_edge("fc", "y")
    d.add_node("Block", {"definition": "up", "repeat": 2}, id="b")
    d.add_edge("in", "b")
    an = blocks.analyze_collapsed(d)
    iss = an.nodes["b"].issue
    assert iss.field == "repeat" and "24" in iss.message and "16" in iss.message
    r = md.estimate(d)
    assert [i.field for i in r.issues] == ["repeat"] and not r.layers[1:]
    d.set_prop("b", "repeat", 1)
    assert blocks.analyze_collapsed(d).nodes["b"].outputs[0].shape == (24,)
    assert md.estimate(d).ok
    # two inputs, one output: no chain at all
    bd.graph.add_node("BlockInput", {"shape": (16,)}, id="x2")
    d.set_prop("b", "repeat", 3)
    iss = blocks.analyze_collapsed(d).nodes["b"].issue
    assert iss.field == "repeat" and "1 output(s) and 2 input(s)" in iss.message


def test_recursion_and_unknown_definitions_are_refused():
    d = block_transformer(1)
    g = d.blocks["layer"].graph
    g.add_node("Block", {"definition": "layer"}, id="me")
    g.add_edge("add", "me")
    an = blocks.analyze_collapsed(d)
    iss = an.nodes["layers"].issue
    assert iss.field == "definition" and "contains itself" in iss.message
    assert an.nodes["head"].blocked_by == "layers"
    assert not md.estimate(d).ok
    d2 = block_transformer(1)
    d2.set_prop("layers", "definition", "nope")
    assert "no block definition named 'nope'" in blocks.analyze_collapsed(d2).nodes["layers"].issue.message


def test_a_cycle_around_an_instance_is_named():
    d = block_transformer(1)
    d._edges.append(blocks.Edge("head", "emb", 0, 0))  # drawn by a broken file, not through add_edge
    an = blocks.analyze_collapsed(d)
    assert [i.message for i in an.issues] == ["the graph has a cycle through this node"]


def test_nested_blocks():
    d = Design("nested")
    d.add_node("Input", {"shape": (32,)}, id="in")
    inner = blocks.new_definition(d, "inner")
    inner.graph.add_node("BlockInput", {"shape": (32,)}, id="x")
    inner.graph.add_node("Linear", {"out_features": 32}, id="fc")
    inner.graph.add_node("ReLU", {}, id="act")
    inner.graph.add_node("BlockOutput", {}, id="y")
    for a, b in (("x", "fc"), ("fc", "act"), ("act", "y")):
        inner.graph.add_edge(a, b)
    outer = blocks.new_definition(d, "outer")
    outer.graph.add_node("BlockInput", {"shape": (32,)}, id="x")
    outer.graph.add_node("Block", {"definition": "inner", "repeat": 2}, id="mlp")
    outer.graph.add_node("BlockOutput", {}, id="y")
    outer.graph.add_edge("x", "mlp")
    outer.graph.add_edge("mlp", "y")
    d.add_node("Block", {"definition": "outer", "repeat": 2}, id="stack")
    d.add_edge("in", "stack")
    flat = blocks.expand(d)
    assert [n.name for n in flat.nodes.values()][:3] == ["in", "stack.0.mlp.0.fc", "stack.0.mlp.0.act"]
    assert len(flat.nodes) == 9
    assert flat.nodes["stack.1.mlp.1.act"].scope == "stack.1/stack.1.mlp.1"
    ref = Design("ref")
    ref.add_node("Input", {"shape": (32,)}, id="in")
    prev = "in"
    for k in range(4):  # each instance is a module call: stack.0 calls stack.0.mlp.0, ...
        scope = f"stack.{k // 2}/stack.{k // 2}.mlp.{k % 2}"
        ref.add_node("Linear", {"out_features": 32}, id=f"fc{k}", scope=scope)
        ref.add_node("ReLU", {}, id=f"act{k}", scope=scope)
        ref.add_edge(prev, f"fc{k}")
        ref.add_edge(f"fc{k}", f"act{k}")
        prev = f"act{k}"
    for kw in MODES:
        assert numbers(md.estimate(d, batch=3, **kw)) == numbers(md.estimate(ref, batch=3, **kw))


def test_design_file_version_2_round_trip(tmp_path):
    d = block_transformer(3)
    path = tmp_path / "b.json"
    save_design(d, path)
    data = json.loads(path.read_text())
    assert data["version"] == 2
    assert [b["name"] for b in data["blocks"]] == ["layer"]  # saved once for all repetitions
    assert len(data["nodes"]) == 4
    back = load_design(path)
    assert set(back.blocks) == {"layer"} and back.blocks["layer"].graph.blocks is back.blocks
    for kw in MODES:
        assert report_text(md.estimate(back, **kw)) == report_text(md.estimate(d, **kw))
    assert design_to_dict(back) == data
    assert design_to_dict(copy_design(d)) == data
    # a definition's problems are named with their path
    bad = dict(data, blocks=[dict(data["blocks"][0], nodes=[{"id": "x", "type": "Nope"}])])
    with pytest.raises(ValueError, match=r"blocks\[0\]: nodes\[0\].type: unknown layer type 'Nope'"):
        design_from_dict(bad, "f.json")


def test_version_1_examples_load_unchanged():
    from helpers import EXAMPLES

    for path in sorted(EXAMPLES.glob("*.json"))[:6]:
        data = json.loads(path.read_text())
        assert data["version"] == 1
        d = load_design(path)
        out = design_to_dict(d)
        assert out == data  # and a design without blocks is still written as version 1


def test_make_unique_and_rename():
    d = block_transformer(1)
    d.add_node("Block", {"definition": "layer"}, id="second")
    d.remove_edge(next(e for e in d.edges if e.dst == "head"))
    d.add_edge("layers", "second")
    d.add_edge("second", "head")
    assert block_edit.users(d, "layer") == 2
    name = block_edit.make_unique(d, "second")
    assert name == "layer_2" and d.nodes["second"].props["definition"] == "layer_2"
    d.blocks["layer_2"].graph.set_prop("fc1", "out_features", 64)
    r = md.estimate(d)
    assert r.blocks["layers"]["total"]["params"] == 32 * 128 + 128 + 128 * 32 + 32 + 64
    assert r.blocks["second"]["total"]["params"] == 32 * 64 + 64 + 64 * 32 + 32 + 64
    block_edit.rename_definition(d, "layer", "mlp_layer")
    assert d.nodes["layers"].props["definition"] == "mlp_layer" and md.estimate(d).ok


def test_torch_import_folds_repeated_layers(monkeypatch):
    torch = pytest.importorskip("torch")
    import torch.nn as nn

    from memdesigner.importers import torch_fx

    class Layer(nn.Module):
        def __init__(self, d=32):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Linear(16, 32)
            self.layers = nn.ModuleList(Layer() for _ in range(4))
            self.head = nn.Linear(32, 10)

        def forward(self, x):
            x = self.emb(x)
            for layer in self.layers:
                x = layer(x)
            return self.head(x)

    torch.manual_seed(0)
    m = Model()
    folded = torch_fx.from_module(m, (8, 16))
    monkeypatch.setattr(torch_fx, "fold_repeats", lambda d: d)
    flat = torch_fx.from_module(m, (8, 16))
    assert [n.type for n in folded.nodes.values()] == ["Input", "Linear", "Block", "Linear"]
    assert folded.nodes["layers"].props["repeat"] == 4 and len(flat.nodes) == 35
    ex = blocks.expand(folded)
    assert [(n.name, n.scope) for n in ex.nodes.values()] == [(n.name, n.scope) for n in flat.nodes.values()]
    for kw in MODES:
        assert numbers(md.estimate(folded, batch=2, **kw)) == numbers(md.estimate(flat, batch=2, **kw))


def test_torch_import_folds_a_stage_after_its_first_block(monkeypatch):
    torch = pytest.importorskip("torch")
    import torch.nn as nn

    from memdesigner.importers import torch_fx

    class Bottleneck(nn.Module):
        def __init__(self, cin, c, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.down = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c)) \
                if stride != 1 or cin != c else None

        def forward(self, x):
            idt = x if self.down is None else self.down(x)
            return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + idt)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.layer1 = nn.Sequential(Bottleneck(8, 16, 2), Bottleneck(16, 16), Bottleneck(16, 16))
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            return self.fc(self.layer1(self.stem(x)).mean((2, 3)))

    m = Net()
    folded = torch_fx.from_module(m, (3, 16, 16))
    monkeypatch.setattr(torch_fx, "fold_repeats", lambda d: d)
    flat = torch_fx.from_module(m, (3, 16, 16))
    inst = [n for n in folded.nodes.values() if n.type == "Block"]
    assert len(inst) == 1 and inst[0].props["repeat"] == 2 and inst[0].props["start"] == 1
    ex = blocks.expand(folded)
    assert [(n.name, n.scope) for n in ex.nodes.values()] == [(n.name, n.scope) for n in flat.nodes.values()]
    for kw in MODES:
        assert numbers(md.estimate(folded, batch=2, **kw)) == numbers(md.estimate(flat, batch=2, **kw))


def test_children_alike_in_structure_but_not_in_shapes_stay_flat():
    """SqueezeNet's features.3 and features.4 are Fire modules with the same layers and props but
    other input channels (64 vs 128): one definition cannot be both, so they are not folded (they
    were, and the imported design lost 1,233,704 of its 1,235,496 parameters)."""
    torch = pytest.importorskip("torch")
    from torch import nn

    import memdesigner
    from memdesigner.importers.torch_fx import from_module

    class Fire(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.squeeze = nn.Conv2d(cin, 8, 1)
            self.expand = nn.Conv2d(8, 16, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.expand(torch.relu(self.squeeze(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 4, 3), Fire(4), Fire(16), Fire(16))
            self.head = nn.Conv2d(16, 2, 1)

        def forward(self, x):
            return self.head(self.features(x))

    m = Net()
    d = from_module(m, (3, 16, 16))
    rep = memdesigner.estimate(d, backend="cpu")
    assert not rep.issues
    assert rep.params == sum(p.numel() for p in m.parameters())
    # the two Fire(16) children are alike in shapes too: they still fold into one definition x 2
    assert [n.props["repeat"] for n in d.nodes.values() if n.type == "Block"] == [2]

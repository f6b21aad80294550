"""The shipped example designs (resources/examples/*.json, written by tools/make_examples.py)."""

import importlib.util
import itertools
import json
import sys

import pytest
from helpers import EXAMPLES, ROOT, TRUTH

import memdesigner
from memdesigner.io.design_file import design_to_dict
from memdesigner.model.analysis import analyze

PUBLISHED = {
    "seed_geron_cnn": 903_400,  # Géron, Hands-On ML, ch. 14
    "seed_keras_audio": 770_482_865,  # Keras model.summary()
    "seed_fc": 131_410,
    "seed_quantized": 7 * 7 * 1 * 64 + 3 * 3 * 64 * 128,
    "lenet5": 61_706,  # LeCun et al. 1998
    "vgg16": 138_357_544,  # torchvision
    "resnet18": 11_689_512,  # torchvision
    "mobilenet_v2": 3_504_872,  # torchvision
    "transformer_encoder": 5_753_348,
    "lstm_classifier": 8_803_338,  # shared truth zoo
}
FILES = sorted(EXAMPLES.glob("*.json"))


def test_all_examples_present():
    assert {p.stem for p in FILES} == set(PUBLISHED)


@pytest.fixture(scope="module", params=FILES, ids=lambda p: p.stem)
def example(request):
    return request.param, memdesigner.load_design(request.param)


def test_loads_and_analyses_cleanly(example):
    _, d = example
    an = analyze(d)
    assert an.ok, an.issues
    assert all(info.ok for info in an.nodes.values())
    assert d.description, "every example explains itself"
    assert len(d.nodes) >= 3


def test_params_as_published(example):
    path, d = example
    assert memdesigner.estimate(d).params == PUBLISHED[path.stem]


def test_estimates_run_on_devices(example):
    _, d = example
    for mode in ("inference", "train"):
        rep = memdesigner.estimate(d, mode=mode, batch=2, optimizer="adam", device="a100-40gb")
        assert rep.issues == [] and rep.warnings == []
        assert rep.peak_bytes > rep.param_bytes > 0
        assert rep.device["fits"] is True


def test_round_trip_keeps_everything(example, tmp_path):
    path, d = example
    out = tmp_path / path.name
    memdesigner.save_design(d, out)
    d2 = memdesigner.load_design(out)
    assert design_to_dict(d2) == design_to_dict(d)
    assert json.loads(out.read_text()) == json.loads(path.read_text())
    r1 = memdesigner.estimate(d, mode="train", batch=3)
    r2 = memdesigner.estimate(d2, mode="train", batch=3)
    assert (r1.params, r1.peak_bytes, r1.flops) == (r2.params, r2.peak_bytes, r2.flops)


def test_layout_is_readable(example):
    """Positions on a grid ~220 px apart, no two nodes on the same spot; edges go left to right,
    or on to a later band when a deep network wraps into bands."""
    _, d = example
    spots = [tuple(n.pos) for n in d.nodes.values()]
    assert len(set(spots)) == len(spots)
    for e in d.edges:
        a, b = d.nodes[e.src].pos, d.nodes[e.dst].pos
        assert a[0] < b[0] or b[1] > a[1] + 150, (e.src, e.dst)
    xs = sorted({n.pos[0] for n in d.nodes.values()})
    assert all(200 <= b - a <= 240 for a, b in itertools.pairwise(xs))


def test_geron_shapes():
    d = memdesigner.load_design(EXAMPLES / "seed_geron_cnn.json")
    rep = memdesigner.estimate(d)
    convs = [r.output_shape[1:] for r in rep.layers if r.type == "Conv2d"]
    assert convs == [[100, 100, 150], [200, 50, 75], [400, 25, 38]]
    assert all(n.props.get("inplace", False) is False for n in d.nodes.values() if n.type == "ReLU")


def test_quantized_weight_bytes():
    rep = memdesigner.estimate(memdesigner.load_design(EXAMPLES / "seed_quantized.json"))
    assert [r.param_bytes for r in rep.layers if r.type == "Conv2d"] == [392, 73_728]


def test_seed_fc_settings():
    d = memdesigner.load_design(EXAMPLES / "seed_fc.json")
    assert d.settings["batch"] == 256


def test_inplace_flags_follow_torchvision():
    resnet = memdesigner.load_design(EXAMPLES / "resnet18.json")
    adds = [n for n in resnet.nodes.values() if n.type == "Add"]
    assert len(adds) == 8 and all(n.props["inplace"] for n in adds)
    assert sum(1 for n in resnet.nodes.values() if n.id.endswith("downsample_conv")) == 3
    assert all(n.props["inplace"] for n in resnet.nodes.values() if n.type == "ReLU")
    mnet = memdesigner.load_design(EXAMPLES / "mobilenet_v2.json")
    madds = [n for n in mnet.nodes.values() if n.type == "Add"]
    assert len(madds) == 10 and not any(n.props.get("inplace") for n in madds)
    assert all(n.props["inplace"] for n in mnet.nodes.values() if n.type == "ReLU6")
    vgg = memdesigner.load_design(EXAMPLES / "vgg16.json")
    assert sum(1 for n in vgg.nodes.values() if n.type == "Conv2d") == 13
    assert all(n.props["inplace"] for n in vgg.nodes.values() if n.type == "ReLU")


def test_generator_is_in_sync():
    spec = importlib.util.spec_from_file_location("make_examples", ROOT / "tools" / "make_examples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check"]) == 0, "run: python3 tools/make_examples.py"


# -- the same architectures in PyTorch (meta tensors: no memory, no time) ---------------------------
torch = pytest.importorskip("torch")
nn = torch.nn


def _count(m):
    return sum(p.numel() for p in m.parameters())


def _zoo():
    if not (TRUTH / "zoo.py").exists():
        pytest.skip(f"no shared truth zoo at {TRUTH}")
    sys.path.insert(0, str(TRUTH))
    try:
        import zoo
    finally:
        sys.path.remove(str(TRUTH))
    return zoo


@pytest.mark.parametrize("name", ["seed_geron_cnn", "seed_keras_audio", "seed_fc", "lenet5", "resnet18",
                                  "mobilenet_v2", "lstm_classifier"])
def test_params_equal_torch_zoo(name):
    zoo = _zoo()
    with torch.device("meta"):
        model, shape = zoo.MODELS[name]()
    d = memdesigner.load_design(EXAMPLES / f"{name}.json")
    assert memdesigner.estimate(d).params == _count(model)
    inp = next(n for n in d.nodes.values() if n.type == "Input")
    assert tuple(inp.props["shape"]) == tuple(shape)


def test_vgg16_params_equal_torch():
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    layers, c = [], 3
    with torch.device("meta"):
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
                c = v
        model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(7), nn.Flatten(),
                              nn.Linear(512 * 49, 4096), nn.ReLU(True), nn.Dropout(),
                              nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(), nn.Linear(4096, 1000))
    assert _count(model) == 138_357_544
    assert memdesigner.estimate(memdesigner.load_design(EXAMPLES / "vgg16.json")).params == _count(model)


def test_transformer_params_equal_torch():
    dim, heads, mlp, depth, vocab, tokens, classes = 256, 8, 1024, 4, 10000, 128, 4

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.fc1, self.fc2 = nn.Linear(dim, mlp), nn.Linear(mlp, dim)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.pos = nn.Parameter(torch.zeros(1, tokens, dim))
            self.blocks = nn.ModuleList(Block() for _ in range(depth))
            self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, classes)

    with torch.device("meta"):
        model = Encoder()
    d = memdesigner.load_design(EXAMPLES / "transformer_encoder.json")
    assert memdesigner.estimate(d).params == _count(model)

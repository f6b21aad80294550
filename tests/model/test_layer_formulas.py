"""Every property of every layer type: output shape and parameter count against PyTorch's own
modules (or the Keras formula where PyTorch has no equivalent, e.g. SAME padding with stride 2)."""

import math

import pytest
from helpers import sequential, torch_module_for

from memdesigner.model import registry
from memdesigner.model.analysis import analyze

torch = pytest.importorskip("torch")
nn = torch.nn


def ours(shape, layer, props, dtype="float"):
    d = sequential(shape, [(layer, props)], dtype=dtype)
    an = analyze(d)
    assert an.ok, an.issues
    info = an.nodes["n0"]
    return info.outputs[0].shape, info.n_params


def theirs(module, shape, dtype=torch.float32):
    x = torch.zeros((2, *shape), dtype=dtype) if dtype != torch.int64 else torch.zeros((2, *shape), dtype=dtype)
    with torch.no_grad():
        y = module.eval()(x)
    if isinstance(y, tuple):
        y = y[0]
    return tuple(y.shape[1:]), sum(p.numel() for p in module.parameters())


CONV2D = [
    dict(out_channels=8, kernel=3),
    dict(out_channels=8, kernel=(3, 5), stride=(2, 1)),
    dict(out_channels=8, kernel=3, padding=2, dilation=2),
    dict(out_channels=8, kernel=3, padding=(1, 0)),
    dict(out_channels=6, kernel=3, groups=3, bias=False),
    dict(out_channels=6, kernel=5, groups=6, padding=2),
    dict(out_channels=4, kernel=1, stride=3),
]


@pytest.mark.parametrize("p", CONV2D)
def test_conv2d(p):
    shape = (6, 17, 23) if p.get("groups", 1) == 6 else (3, 17, 23) if p.get("groups", 1) == 3 else (3, 17, 23)
    pt = dict(p)
    m = nn.Conv2d(shape[0], pt.pop("out_channels"), pt.pop("kernel"), stride=pt.pop("stride", 1),
                  padding=pt.pop("padding", 0), dilation=pt.pop("dilation", 1), groups=pt.pop("groups", 1),
                  bias=pt.pop("bias", True))
    props = dict(p)
    props.setdefault("padding", 0)
    assert ours(shape, "Conv2d", props) == theirs(m, shape)


@pytest.mark.parametrize("p", [dict(out_channels=4, kernel=3), dict(out_channels=6, kernel=[1, 3, 2], stride=2, padding=1),
                               dict(out_channels=3, kernel=3, groups=3, bias=False, dilation=2)])
def test_conv3d(p):
    shape = (3, 9, 11, 10)
    pt = dict(p)
    m = nn.Conv3d(shape[0], pt.pop("out_channels"), pt.pop("kernel"), stride=pt.pop("stride", 1),
                  padding=pt.pop("padding", 0), dilation=pt.pop("dilation", 1), groups=pt.pop("groups", 1),
                  bias=pt.pop("bias", True))
    props = dict(p)
    props.setdefault("padding", 0)
    assert ours(shape, "Conv3d", props) == theirs(m, shape)


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("size", [(200, 300), (25, 38), (7, 9)])
def test_conv2d_same_and_valid_keras_formula(stride, size):
    shape, _ = ours((3, *size), "Conv2d", dict(out_channels=4, kernel=3, stride=stride, padding="SAME"))
    assert shape[1:] == tuple(math.ceil(s / stride) for s in size)
    shape, _ = ours((3, *size), "Conv2d", dict(out_channels=4, kernel=3, stride=stride, padding="VALID"))
    assert shape[1:] == tuple(math.ceil((s - 3 + 1) / stride) for s in size)
    if stride == 1:  # PyTorch's padding="same" agrees
        m = nn.Conv2d(3, 4, 3, padding="same")
        assert ours((3, *size), "Conv2d", dict(out_channels=4, kernel=3, padding="SAME")) == theirs(m, (3, *size))


@pytest.mark.parametrize("p", [dict(out_channels=5, kernel=3), dict(out_channels=4, kernel=5, stride=2, padding=1),
                               dict(out_channels=6, kernel=3, groups=2, dilation=2, bias=False)])
def test_conv1d(p):
    pt = dict(p)
    m = nn.Conv1d(4, pt.pop("out_channels"), pt.pop("kernel"), stride=pt.pop("stride", 1), padding=pt.pop("padding", 0),
                  dilation=pt.pop("dilation", 1), groups=pt.pop("groups", 1), bias=pt.pop("bias", True))
    props = dict(p)
    props.setdefault("padding", 0)
    assert ours((4, 40), "Conv1d", props) == theirs(m, (4, 40))


@pytest.mark.parametrize("p", [dict(out_channels=8, kernel=2, stride=2), dict(out_channels=4, kernel=3, stride=2,
                                                                              padding=1, output_padding=1),
                               dict(out_channels=6, kernel=3, dilation=2, groups=2, bias=False)])
def test_conv_transpose2d(p):
    pt = dict(p)
    m = nn.ConvTranspose2d(4, pt.pop("out_channels"), pt.pop("kernel"), stride=pt.pop("stride", 1),
                           padding=pt.pop("padding", 0), output_padding=pt.pop("output_padding", 0),
                           groups=pt.pop("groups", 1), bias=pt.pop("bias", True), dilation=pt.pop("dilation", 1))
    assert ours((4, 9, 11), "ConvTranspose2d", p) == theirs(m, (4, 9, 11))


@pytest.mark.parametrize("shape", [(20,), (7, 20), (3, 5, 20)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(shape, bias):
    assert ours(shape, "Linear", dict(out_features=9, bias=bias)) == theirs(nn.Linear(20, 9, bias=bias), shape)


@pytest.mark.parametrize("layer,mod,shape", [
    ("MaxPool2d", nn.MaxPool2d, (3, 17, 23)), ("AvgPool2d", nn.AvgPool2d, (3, 17, 23)), ("MaxPool1d", nn.MaxPool1d, (3, 29)),
    ("MaxPool3d", nn.MaxPool3d, (3, 9, 17, 12)), ("AvgPool3d", nn.AvgPool3d, (3, 9, 17, 12)),
])
@pytest.mark.parametrize("p", [dict(kernel=2), dict(kernel=3, stride=2), dict(kernel=3, stride=2, padding=1),
                               dict(kernel=3, stride=2, ceil_mode=True)])
def test_pooling(layer, mod, shape, p):
    m = mod(p["kernel"], stride=p.get("stride"), padding=p.get("padding", 0), ceil_mode=p.get("ceil_mode", False))
    assert ours(shape, layer, p) == theirs(m, shape)


@pytest.mark.parametrize("out", [1, 7, (3, 5)])
def test_adaptive_avg_pool(out):
    assert ours((4, 14, 20), "AdaptiveAvgPool2d", dict(output_size=out)) == theirs(nn.AdaptiveAvgPool2d(out), (4, 14, 20))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_upsample(mode):
    m = nn.Upsample(scale_factor=2, mode=mode)
    assert ours((3, 5, 7), "Upsample", dict(scale_factor=2.0, mode=mode)) == theirs(m, (3, 5, 7))


@pytest.mark.parametrize("affine,track", [(True, True), (False, True), (True, False)])
def test_batchnorm(affine, track):
    m = nn.BatchNorm2d(6, affine=affine, track_running_stats=track)
    assert ours((6, 5, 5), "BatchNorm2d", dict(affine=affine, track_running_stats=track)) == theirs(m, (6, 5, 5))
    m1 = nn.BatchNorm1d(6, affine=affine, track_running_stats=track)
    assert ours((6, 9), "BatchNorm1d", dict(affine=affine, track_running_stats=track)) == theirs(m1, (6, 9))
    m3 = nn.BatchNorm3d(6, affine=affine, track_running_stats=track)
    assert ours((6, 3, 5, 4), "BatchNorm3d", dict(affine=affine, track_running_stats=track)) == theirs(m3, (6, 3, 5, 4))


def test_batchnorm_buffers_are_not_parameters():
    d = sequential((6, 5, 5), [("BatchNorm2d", {})])
    params = analyze(d).nodes["n0"].params
    assert sum(p.numel for p in params if not p.trainable) == 6 + 6 + 1  # running mean, var, counter


@pytest.mark.parametrize("ns,affine", [((), True), ((5, 8), True), ((), False)])
def test_layernorm(ns, affine):
    m = nn.LayerNorm(ns or 8, elementwise_affine=affine)
    assert ours((4, 5, 8), "LayerNorm", dict(normalized_shape=ns, elementwise_affine=affine)) == theirs(m, (4, 5, 8))


@pytest.mark.parametrize("groups,affine", [(2, True), (4, False)])
def test_groupnorm(groups, affine):
    m = nn.GroupNorm(groups, 8, affine=affine)
    assert ours((8, 5, 5), "GroupNorm", dict(num_groups=groups, affine=affine)) == theirs(m, (8, 5, 5))


# element-wise and last-dim types that import from an nn module of their name (from the registry)
def _built_alone(name) -> bool:
    try:
        torch_module_for(name)(torch.zeros(2, 3, 4, 5))
        return True
    except (AttributeError, TypeError, RuntimeError):  # no nn class of its name, or it needs the input's size
        return False


ELEMENTWISE = sorted(lt.name for lt in registry.all_types() if lt.keeps_layout and lt.from_torch_module
                     and _built_alone(lt.name))


@pytest.mark.parametrize("layer", ELEMENTWISE)
def test_elementwise(layer):
    assert ours((3, 4, 5), layer, {}) == theirs(torch_module_for(layer), (3, 4, 5))


@pytest.mark.parametrize("start", [1, 2])
def test_flatten(start):
    assert ours((3, 4, 5), "Flatten", dict(start_dim=start)) == theirs(nn.Flatten(start), (3, 4, 5))


def test_reshape():
    assert ours((3, 4, 5), "Reshape", dict(shape=(5, -1))) == ((5, 12), 0)


def test_embedding():
    assert ours((12,), "Embedding", dict(num_embeddings=50, embedding_dim=7), dtype="int64") == \
        theirs(nn.Embedding(50, 7), (12,), torch.int64)


@pytest.mark.parametrize("layers,bidir,bias", [(1, False, True), (2, True, True), (3, False, False)])
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_rnn(kind, layers, bidir, bias):
    mod = getattr(nn, kind)(10, 16, num_layers=layers, bidirectional=bidir, bias=bias, batch_first=True)
    props = dict(hidden_size=16, num_layers=layers, bidirectional=bidir, bias=bias)
    assert ours((7, 10), kind, props) == theirs(mod, (7, 10))
    shape, n = ours((7, 10), kind, dict(props, return_sequences=False))
    assert shape == ((2 if bidir else 1) * 16,)


@pytest.mark.parametrize("heads,bias", [(1, True), (4, False)])
def test_multihead_attention(heads, bias):
    m = nn.MultiheadAttention(16, heads, bias=bias, batch_first=True)
    x = torch.zeros(2, 5, 16)
    y, _ = m(x, x, x)
    assert ours((5, 16), "MultiHeadAttention", dict(num_heads=heads, bias=bias)) == \
        (tuple(y.shape[1:]), sum(p.numel() for p in m.parameters()))


def test_tensor_ops_shapes():
    assert ours((3, 4, 5), "Transpose", dict(dim0=1, dim1=2))[0] == tuple(torch.zeros(2, 3, 4, 5).transpose(1, 2).shape[1:])
    assert ours((3, 4, 5), "Permute", dict(dims=(0, 3, 1, 2)))[0] == (5, 3, 4)
    assert ours((3, 4, 6), "Split", dict(chunks=3, dim=-1))[0] == (3, 4, 2)
    assert ours((3, 4, 6), "Select", dict(dim=1, index=0))[0] == (4, 6)
    assert ours((3, 4, 6), "Mean", dict(dim=1))[0] == (4, 6)
    assert ours((4, 6), "ClassToken", {}) == ((5, 6), 6)
    assert ours((4, 6), "PositionEmbedding", {}) == ((4, 6), 24)


def test_merge_shapes():
    from memdesigner.model.design import Design

    d = Design()
    d.add_node("Input", {"shape": (3, 8, 8)}, id="a")
    d.add_node("Input", {"shape": (5, 8, 8)}, id="b")
    d.add_node("Concat", {"dim": 1}, id="cat")
    d.add_edge("a", "cat", dst_port=0)
    d.add_edge("b", "cat", dst_port=1)
    d.add_node("Add", {}, id="bad")
    d.add_edge("a", "bad", dst_port=0)
    d.add_edge("b", "bad", dst_port=1)
    an = analyze(d)
    assert an.nodes["cat"].outputs[0].shape == tuple(torch.cat([torch.zeros(2, 3, 8, 8), torch.zeros(2, 5, 8, 8)], 1).shape[1:])
    assert an.nodes["bad"].issue.field == "inputs" and "do not broadcast" in an.nodes["bad"].issue.message


def test_every_registered_type_is_covered():
    covered = {"Conv2d", "Conv1d", "Conv3d", "ConvTranspose2d", "Linear", "MaxPool2d", "AvgPool2d", "MaxPool1d",
               "MaxPool3d", "AvgPool3d", "BatchNorm3d",
               "AdaptiveAvgPool2d", "Upsample", "BatchNorm2d", "BatchNorm1d", "LayerNorm", "GroupNorm", "ReLU", "ReLU6",
               "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax", "Dropout", "Flatten", "Reshape", "Embedding",
               "LSTM", "GRU", "MultiHeadAttention", "Transpose", "Permute", "Split", "Select", "Mean", "ClassToken",
               "PositionEmbedding", "Concat", "Add", "Input"}
    others = {"Multiply", "MatMul", "Scale", "ScaledDotProductAttention", "Loss", "Generic",
              "KVCache", "NewGELU", "AbsolutePositions",  # test_generation_layers, test_generate
              "Contiguous", "Max", "Slice", "GRUCell",  # test_layer_rules_misc
              "RMSNorm", "RotaryEmbedding", "ApplyRotary", "RepeatKV", "CausalMask",  # test_llm_layers_measured
              "SparseMoE", "BertEmbeddings",  # test_moe, test_hf_bert (against transformers)
              "ToDtype", "QuantLinear",  # test_finetune
              "AllGather", "ReduceScatter"}  # test_tensor_parallel (measured with DTensor)
    others |= {"Block", "BlockInput", "BlockOutput"}  # test_blocks: expanded away before the engine
    covered |= set(ELEMENTWISE)
    assert {t.name for t in registry.all_types()} <= covered | others

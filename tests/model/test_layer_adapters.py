"""Issue 23 §1: a layer type's importer and exporter mappings live in its own file, and every one
of them works. Generated from the registry (a new type is covered the moment it registers):

- each ``torch_ops`` name of a type with ``from_torch_module`` that is an ``nn`` class imports as
  that type when the class is called as a module, and each other name of a type with
  ``from_torch_call`` when it is called as a function (``F.x``, ``torch.x`` or a tensor method),
  through torch.fx, torch.export and the dispatch recorder;
- each ``keras_activations`` name imports as that type (``Dense(activation=...)`` and
  ``Activation(...)``);
- no name is claimed by two types.

Deleting a name from a type's ``torch_ops`` / ``keras_activations`` turns its case red (it imports
as Generic). The export round trip of every type is tests/model/test_registry_complete.py's."""

import re

import pytest
from helpers import torch_module_for
from test_registry_complete import default_design

from memdesigner.model import registry

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from memdesigner.exporters.torch_code import to_python  # noqa: E402
from memdesigner.importers import _torch_export, _torch_trace  # noqa: E402
from memdesigner.importers.keras_json import load_keras_json  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

SHAPE = (4, 6)  # per sample: every element-wise and last-dim type takes it
# arguments (after the input) a call needs to be its type: aten-level names without defaults, and
# hardtanh, which is ReLU6 only between 0 and 6
CALL_ARGS = {"softmax": ((), {"dim": -1}), "log_softmax": ((), {"dim": -1}), "_softmax": ((-1, False), {}),
             "_log_softmax": ((-1, False), {}), "hardtanh": ((0.0, 6.0), {}), "hardtanh_": ((0.0, 6.0), {}),
             "feature_dropout": ((0.5, True), {}),
             "dropout_": ((0.5, True), {}), "max_pool1d": ((2,), {}), "max_pool2d": ((2,), {}),
             "max_pool3d": ((2,), {}), "avg_pool2d": ((2,), {}), "avg_pool3d": ((2,), {}),
             "adaptive_avg_pool2d": ((1,), {})}
# per-sample inputs of calls that need more dims than SHAPE (pools: channels first)
CALL_SHAPE = {"max_pool2d": (4, 6, 6), "avg_pool2d": (4, 6, 6), "adaptive_avg_pool2d": (4, 6, 6),
              "max_pool3d": (2, 4, 6, 6), "avg_pool3d": (2, 4, 6, 6)}


def _nn_class(name):
    cls = getattr(nn, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, nn.Module) else None


def _function(name):
    """The callable a call name stands for: torch.nn.functional's, torch's or a tensor method."""
    for owner in (F, torch):
        fn = getattr(owner, name, None)
        if callable(fn) and not isinstance(fn, type):
            return fn
    if callable(getattr(torch.Tensor, name, None)):
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    if hasattr(torch.ops.aten, name):  # an aten-only name (silu_): what torch.export writes
        return getattr(torch.ops.aten, name).default
    return None


def _decomposed(op) -> bool:
    """No aten op of that name, or one PyTorch implements by other ops (CompositeImplicitAutograd)."""
    if not hasattr(torch.ops.aten, op):
        return True
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "CompositeImplicitAutograd")


def _python_only(type_name) -> bool:
    """A type whose torch functions are all Python over other ops (F.softsign is x / (x.abs() + 1))."""
    calls = [op for op in registry.get(type_name).torch_ops if not _nn_class(op)]
    return bool(calls) and not any(hasattr(torch.ops.aten, op) for op in calls)


MODULE_CASES = [(lt.name, op) for lt in registry.all_types() if lt.from_torch_module
                for op in lt.torch_ops if _nn_class(op)]
CALL_CASES = [(lt.name, op) for lt in registry.all_types() if lt.from_torch_call
              for op in lt.torch_ops if not _nn_class(op)]
KERAS_CASES = [(lt.name, a) for lt in registry.all_types() for a in lt.keras_activations]


def module_case(type_name: str, op: str):
    """(a model running nn.<op> once, its per-sample input shape): the class built from the type's
    default props, or, where its constructor needs the input's size (in_channels, num_features),
    the model the type's own export writes for its default design."""
    lt = registry.get(type_name)
    if lt.to_torch is not None:
        ns: dict = {}
        exec(compile(to_python(default_design(type_name)), f"<{type_name}>", "exec"), ns)  # noqa: S102 - our code
        model, shape = ns["make"]()
        if any(type(m).__name__ == op for m in model.modules()):
            return model, shape
    return _Call(torch_module_for(type_name, op), (), {}), SHAPE


class _Call(nn.Module):
    def __init__(self, fn, args, kwargs):
        super().__init__()
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def forward(self, x):
        return self.fn(x.clone(), *self.args, **self.kwargs)  # clone: an in-place op never hits the input


def _paths(monkeypatch, path):
    """Force the importer onto one path: torch.fx (its first), torch.export or the dispatch recorder."""
    def refuse(*a, **k):
        raise RuntimeError(f"refused by the test: {path} path")
    if path in ("export", "dispatch"):
        monkeypatch.setattr(_torch_trace, "_fx_trace", refuse)
    if path == "dispatch":
        monkeypatch.setattr(_torch_export, "export_graph_module", refuse)


def _types(d):
    return [n.type for n in d.nodes.values() if n.type not in ("Input", "Contiguous")]


def test_there_are_cases():
    names = {t for t, _ in MODULE_CASES + CALL_CASES}
    assert {"ReLU", "GELU", "Softmax", "Dropout"} <= names


@pytest.mark.parametrize("name", sorted({lt.name for lt in registry.all_types()
                                         if lt.from_torch_module or lt.from_torch_call}))
def test_every_torch_name_is_a_module_or_a_function(name):
    """A name torch has neither as an nn class nor as a function maps nothing (a typo such as
    'leakyrelu')."""
    lt = registry.get(name)
    for op in lt.torch_ops:
        assert _nn_class(op) or _function(op), f"{name}: torch has no {op!r}"
        if _nn_class(op):
            assert lt.from_torch_module, f"{name}: {op} is a module but the type has no from_torch_module"


def test_no_name_maps_onto_two_types():
    seen: dict = {}
    for lt in registry.all_types():
        for op in lt.torch_ops if (lt.from_torch_module or lt.from_torch_call) else ():
            assert seen.setdefault(("torch", op), lt.name) == lt.name, (op, seen[("torch", op)], lt.name)
        for a in lt.keras_activations:
            assert seen.setdefault(("keras", a.lower()), lt.name) == lt.name, (a, seen[("keras", a.lower())], lt.name)


def _snake(cls_name: str) -> str:
    """nn.LeakyReLU -> leaky_relu, nn.SiLU -> silu, nn.LogSoftmax -> log_softmax: torch's function name."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])", "_", cls_name).lower()


def _user_function(name) -> bool:
    return any(callable(getattr(owner, name, None)) for owner in (F, torch, torch.Tensor))


# functions torch has for a mapped module that import as Generic today (strict: mapping one turns it red)
NOT_MAPPED_YET = {"group_norm", "conv_transpose2d"}


@pytest.mark.parametrize("type_name,op", MODULE_CASES)
def test_the_functions_torch_has_for_a_mapped_module_are_mapped(type_name, op):
    """What torch itself has, not what the type declares: nn.ReLU's relu and relu_ (F., torch.,
    tensor methods) must be the type's torch_ops too (mapped by its from_torch_call, or for
    calls on parameters, F.linear / F.conv2d, by the importer), so a name left out is red here."""
    lt = registry.get(type_name)
    for name in (_snake(op), _snake(op) + "_"):
        if _user_function(name) and name not in NOT_MAPPED_YET:
            assert name in lt.torch_ops, f"{op}: torch has {name}, which {type_name} does not name"
            if lt.from_torch_call:
                got = registry.torch_call_index().get(name)
                assert got is lt, f"{op}: torch has {name}, which maps to {got and got.name}"


@pytest.mark.xfail(strict=True, reason="F.group_norm / F.conv_transpose2d import as Generic (no rule yet)")
@pytest.mark.parametrize("name", sorted(NOT_MAPPED_YET))
def test_not_mapped_yet(name):
    assert any(name in lt.torch_ops for lt in registry.all_types())


# modules whose aten op under torch.export the importer has no rule for yet (they import as Generic
# there; through torch.fx and the dispatch recorder they are whole modules)
EXPORT_GAPS = {t: f"aten {op} (torch.export of nn.{t}) has no rule yet" for t, op in (
    ("BatchNorm1d", "batch_norm"), ("BatchNorm2d", "batch_norm"), ("BatchNorm3d", "batch_norm"),
    ("GroupNorm", "group_norm"), ("ConvTranspose2d", "conv_transpose2d"))}
VARIANTS = ["defaults", "inplace"]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("path", ["fx", "export", "dispatch"])
@pytest.mark.parametrize("type_name,op", MODULE_CASES)
def test_module_imports_as_its_type(type_name, op, path, variant, monkeypatch, request):
    """Through torch.export and the dispatch recorder the module runs as aten ops (relu_, hardtanh,
    _softmax): each must import as the type too, with the module's props."""
    mod, shape = module_case(type_name, op)
    if path == "export" and type_name in EXPORT_GAPS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=EXPORT_GAPS[type_name]))
    if path == "export" and _python_only(type_name):
        pytest.skip(f"torch.export writes the aten ops {type_name}'s Python function runs (no aten op of its own)")
    if variant == "inplace":
        if "inplace" not in registry.get(type_name).defaults():
            pytest.skip("no in-place form")
        for m in mod.modules():
            if type(m).__name__ == op:
                m.inplace = True
    _paths(monkeypatch, path)
    d = from_module(mod, shape)
    assert _types(d) == [type_name], (op, path, d.import_warnings)
    node = next(n for n in d.nodes.values() if n.type == type_name)
    assert node.props.get("inplace", False) == (variant == "inplace"), (op, path, node.props)


@pytest.mark.parametrize("path", ["fx", "export", "dispatch"])
@pytest.mark.parametrize("type_name,op", CALL_CASES)
def test_call_imports_as_its_type(type_name, op, path, monkeypatch):
    """The dispatch recorder keeps torch.nn.functional's calls whole; torch.x and tensor methods
    it sees as the aten ops they run, which may be other ops (torch.feature_dropout's bernoulli_):
    those are checked through torch.fx and torch.export."""
    if path == "dispatch" and not callable(getattr(F, op, None)) and _decomposed(op):
        pytest.skip(f"{op} runs as other aten ops below the dispatcher")
    if path == "export" and _python_only(type_name):
        pytest.skip(f"torch.export writes the aten ops {op} runs (no aten op of its own)")
    args, kwargs = CALL_ARGS.get(op, ((), {}))
    _paths(monkeypatch, path)
    d = from_module(_Call(_function(op), args, kwargs), CALL_SHAPE.get(op, SHAPE))
    assert _types(d) == [type_name], (op, path, d.import_warnings)


def test_module_props_are_read():
    """The props reader of a module rule reads the module, not only its class."""
    d = from_module(nn.Sequential(nn.LeakyReLU(0.2, inplace=True), nn.GELU(approximate="tanh"),
                                  nn.LogSoftmax(dim=1), nn.Dropout(0.25)), SHAPE)
    got = [(n.type, dict(n.props)) for n in d.nodes.values() if n.type != "Input"]
    assert got == [("LeakyReLU", {"negative_slope": 0.2, "inplace": True}), ("GELU", {"approximate": "tanh"}),
                   ("Softmax", {"dim": 1, "log": True}), ("Dropout", {"p": 0.25, "inplace": False})]


def test_call_props_are_read():
    class M(nn.Module):
        def forward(self, x):
            x = F.leaky_relu(x, 0.3)
            x = F.relu(x, True)
            x = F.softmax(x, dim=2)
            return F.dropout(x, 0.2, training=False)  # no node: the input passes

    d = from_module(M(), SHAPE)
    got = [(n.type, dict(n.props)) for n in d.nodes.values() if n.type != "Input"]
    assert got == [("LeakyReLU", {"negative_slope": 0.3, "inplace": False}), ("ReLU", {"inplace": True}),
                   ("Softmax", {"dim": 2, "log": False})]


def test_hardtanh_outside_0_6_is_generic_with_the_reason():
    d = from_module(_Call(F.hardtanh, (-1.0, 1.0), {}), SHAPE)
    g = [n for n in d.nodes.values() if n.type == "Generic"]
    assert len(g) == 1 and not any(n.type == "ReLU6" for n in d.nodes.values())


def _keras(layers):
    return {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [None, *SHAPE], "dtype": "float32"}}, *layers]}}


@pytest.mark.parametrize("type_name,alias", KERAS_CASES)
def test_keras_activation_imports_as_its_type(type_name, alias):
    d = load_keras_json(_keras([{"class_name": "Dense", "config": {"units": 5, "activation": alias}},
                                {"class_name": "Activation", "config": {"activation": alias}}]))
    assert [n.type for n in d.nodes.values()][1:] == ["Linear", type_name, type_name], d.import_warnings
    assert not d.import_warnings


def test_keras_props_are_read():
    d = load_keras_json(_keras([{"class_name": "Activation", "config": {"activation": "leaky_relu"}},
                                {"class_name": "Activation", "config": {"activation": "softmax"}}]))
    got = [(n.type, dict(n.props)) for n in d.nodes.values() if n.type != "Input"]
    assert got == [("LeakyReLU", {"negative_slope": 0.2, "inplace": False}), ("Softmax", {"dim": 2, "log": False})]


# Keras 3's own activation names (keras.activations), and its aliases: Keras's API, not memdesigner's
KERAS_ACTIVATIONS = ("celu", "elu", "exponential", "gelu", "glu", "hard_shrink", "hard_sigmoid", "hard_silu",
                     "hard_swish", "hard_tanh", "leaky_relu", "linear", "log_sigmoid", "log_softmax", "mish", "relu",
                     "relu6", "selu", "sigmoid", "silu", "swish", "soft_shrink", "softmax", "softplus", "softsign",
                     "sparse_plus", "sparsemax", "squareplus", "tanh", "tanh_shrink", "threshold")
KERAS_ALIASES = {"swish": "silu", "hard_swish": "hard_silu"}


@pytest.mark.parametrize("alias", KERAS_ACTIVATIONS)
def test_a_keras_activation_named_as_a_mapped_torch_function_is_mapped(alias):
    """Keras's relu is torch's relu: when a type maps the torch function of that name, the Keras
    activation must import as the same type (a name left out of keras_activations is red here)."""
    lt = registry.torch_call_index().get(KERAS_ALIASES.get(alias, alias))
    if lt is None:
        pytest.skip(f"no type maps torch's {alias}")
    got = registry.keras_activation_index().get(alias)
    assert got is lt, f"Keras {alias!r} imports as {got and got.name}, torch's as {lt.name}"

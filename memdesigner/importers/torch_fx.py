"""Import a PyTorch ``nn.Module`` as a design (torch.fx trace + shape propagation).

    from memdesigner.importers.torch_fx import from_module, import_file
    design = from_module(model, (3, 224, 224))
    design = import_file("zoo.py:resnet18")

The module is traced with ``torch.fx.symbolic_trace`` (falling back to ``torch.export`` where fx
cannot trace), every node's output shape and dtype is found by running the graph on meta tensors
of batch 2 (no memory is used; build big models under ``with torch.device("meta")``), and modules
and functional ops are mapped onto registry layers. An op with no mapping becomes a ``Generic``
node that still counts its output; ``design.import_warnings`` names each one.

torch is imported lazily: this module can be imported without torch installed.
"""

from __future__ import annotations

import importlib.util
import operator
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdesigner.importers import _torch_loss
from memdesigner.importers._torch_casts import loss_upcast, return_uncast
from memdesigner.importers._torch_frozen import mark_frozen
from memdesigner.importers._torch_no_grad import mark_no_grad
from memdesigner.importers._torch_param_order import param_order
from memdesigner.model import registry
from memdesigner.model.blocks import fold_repeats
from memdesigner.model.design import Design
from memdesigner.model.registry import LayerError, ShapeCtx, TensorSpec

META_BATCH = 2


class TorchImportError(ValueError):
    """The module could not be traced or the factory could not be loaded."""


class NeedsInputShape(TorchImportError):
    """The factory gave no input shape. ``str()`` is the command line's wording (pass
    --input-shape); ``what`` says only what is missing, for a window to add its own words."""

    def __init__(self, what: str):
        super().__init__(f"{what}; pass --input-shape")
        self.what = what


# ----------------------------------------------------------------------------------------------
# values flowing through the traced graph
# ----------------------------------------------------------------------------------------------
@dataclass
class Val:
    """A tensor of the traced graph as it appears in the design.

    The design keeps the batch first and may keep singleton dims that the real tensor squeezed
    (unbind); ``dmap[i]`` is the design dimension (batch = 0) of real dimension ``i``.
    """

    nid: str
    port: int
    spec: TensorSpec  # design per-sample shape
    dmap: tuple  # real dim -> design dim

    @property
    def drank(self) -> int:
        return len(self.spec.shape) + 1

    def ddim(self, d: int, real_rank: int) -> int:
        if d < 0:
            d += real_rank
        return self.dmap[d]

    @property
    def identity(self) -> bool:
        return self.dmap == tuple(range(self.drank))


@dataclass
class Multi:
    """A tuple result (LSTM, MultiheadAttention, split): getitem picks an element."""

    items: list


@dataclass
class ParamVal:
    """A parameter reached through get_attr (class token, position embedding, F.linear weights)."""

    name: str
    shape: tuple
    expanded: bool = False


class Other:
    """A non-tensor Python value (a size, a shape, a constant)."""

    def __init__(self, value=None):
        self.value = value


@dataclass
class _State:
    design: Design
    torch: Any
    module: Any
    warnings: list = field(default_factory=list)
    vals: dict = field(default_factory=dict)  # fx node -> Val | Multi | ParamVal | Other
    used_ids: set = field(default_factory=set)
    used_params: set = field(default_factory=set)  # parameter names mapped onto design params
    depth: dict = field(default_factory=dict)  # nid -> layout depth
    param_owner: dict = field(default_factory=dict)  # id(Parameter) -> "node_id.param" that holds it
    generic_owner: dict = field(default_factory=dict)  # module path -> Generic node carrying its params
    gm: Any = None
    generic_fx: dict = field(default_factory=dict)  # fx node -> [fx input node of each design input]
    call_tensors: dict = field(default_factory=dict)  # id(tensor) -> (Generic node id, index) its call owns


def _sanitize(name: str) -> str:
    return "".join(c if (c.isalnum() or c in "._-") else "_" for c in name) or "node"


# ----------------------------------------------------------------------------------------------
# public entry points
# ----------------------------------------------------------------------------------------------
def from_module(module, input_shape, input_dtype: str = "float", name: str | None = None) -> Design:
    """Trace ``module`` on an input of per-sample ``input_shape`` and build a design.

    input_dtype: "float" (the run's dtype), "int64" (token ids) or "auto"/None: int64 when the
    input goes straight into an embedding (a token model traced on floats fails inside
    F.embedding), float otherwise. A module with ``truth_input = ("tokens", vocab)`` gets int64
    ids whatever input_dtype says.
    """
    import torch

    input_shape = tuple(int(d) for d in input_shape)
    spec = getattr(module, "truth_input", None)
    vocab = 0
    if spec is not None and spec[0] == "tokens":
        input_dtype = "int64"
        vocab = int(spec[1])
    input_dtype = {"long": "int64", "int": "int64", "float32": "float", "fp32": "float",
                   None: "auto"}.get(input_dtype, input_dtype)
    if input_dtype not in ("float", "int64", "auto"):
        raise TorchImportError(f"input_dtype: {input_dtype!r} is not float or int64")
    auto = input_dtype == "auto"
    if auto:
        input_dtype = "float"
    try:
        gm = _trace(torch, module, _meta_input(torch, input_shape, input_dtype, max(_guess_vocab(module), 1)))
    except TorchImportError:
        if not (auto and _has_embedding(torch, module)):
            raise
        input_dtype = "int64"  # torch.export ran the forward on floats: retry on token ids
        gm = _trace(torch, module, _meta_input(torch, input_shape, input_dtype, max(_guess_vocab(module), 1)))
    if auto and input_dtype == "float" and _feeds_embedding(torch, gm):
        input_dtype = "int64"
    if not vocab and input_dtype == "int64":
        vocab = _guess_vocab(module)

    x = _meta_input(torch, input_shape, input_dtype, max(vocab, 1))
    _check_returns_tensors(torch, gm, module)
    _propagate(torch, gm, x)

    design = Design(name=name or type(module).__name__)
    st = _State(design, torch, module, gm=gm)
    _build(st, gm, input_shape, input_dtype, vocab)
    mark_frozen(design, module, gm, st.param_owner, st.warnings)  # requires_grad=False parameters
    mark_no_grad(design, gm, lambda f: getattr(st.vals.get(f), "nid", None), st.warnings)  # torch.no_grad()
    _trace_generics(st, gm, input_shape, input_dtype, max(vocab, 1))
    _python_locals(st, gm)
    _layout(st)
    _check_params(st)
    design.import_warnings = st.warnings
    design.param_order = param_order(module, st.param_owner, design.nodes)
    return fold_repeats(design)  # repeated identical children open as one block ×N


def import_file(target: str, input_shape=None, input_dtype=None, name: str | None = None) -> Design:
    """``"FILE.py:FACTORY"``: FACTORY() returns an nn.Module or ``(module, input_shape)``.

    The module is built on the meta device, so importing a model with gigabytes of weights
    costs no memory.
    """
    module, shape, factory_name = load_factory_module(target, meta=True)
    if input_shape is not None:
        shape = tuple(input_shape)
    if shape is None:
        raise NeedsInputShape(f"{target}: the factory returned no input shape")
    shape = _check_shape(shape, target)
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(f"{target}: the factory returned {type(module).__name__}, not an nn.Module "
                               "(or (module, input_shape))")
    return from_module(module, shape, input_dtype, name=name or factory_name)


def _check_returns_tensors(torch, gm, module) -> None:
    """A forward that returns no tensor (None, a number) has nothing to design: say so rather than
    import a lone Input."""
    found: list = []
    for n in gm.graph.nodes:
        if n.op == "output":
            torch.fx.node.map_arg(n.args, found.append)
            if not found:
                raise TorchImportError(f"{type(module).__name__}.forward returns no tensor "
                                       f"({str(n.args[0] if n.args else None)[:80]})")


def _check_shape(shape, target: str) -> tuple:
    if not isinstance(shape, (tuple, list)) or not shape or \
            any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in shape):
        raise TorchImportError(f"{target}: the factory's input shape {str(shape)[:80]} is not a tuple of "
                               "positive integers")
    return tuple(shape)


def _fresh_module(p: Path):
    """Run the file's current source as a new module every time: a re-import after an edit must
    see the edit, so neither a module cached in sys.modules nor __pycache__ bytecode (keyed on
    the file's mtime in whole seconds and its size, so an edit within the same second that keeps
    the size would be missed) is used."""
    mod_name = f"_memdesigner_user_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, str(p))
    mod = importlib.util.module_from_spec(spec)
    code = compile(p.read_bytes(), str(p), "exec", dont_inherit=True)
    sys.path.insert(0, str(p.parent.resolve()))
    try:
        sys.modules[mod_name] = mod  # dataclasses and pickling look the module up by name
        exec(code, mod.__dict__)  # noqa: S102 - importing a model file runs it (documented)
    except Exception:
        sys.modules.pop(mod_name, None)
        raise
    finally:
        try:
            sys.path.remove(str(p.parent.resolve()))
        except ValueError:
            pass
    return mod


def load_factory(target: str):
    """Resolve "FILE.py:FACTORY" to the factory callable; "FILE.py" alone takes the first
    nn.Module class the file defines (built with no arguments)."""
    if ":" in target and not Path(target).exists():
        path, fname = target.rsplit(":", 1)
    else:
        path, fname = target, None
    p = Path(path)
    if not p.exists():
        raise TorchImportError(f"{path}: no such file")
    mod = _fresh_module(p)
    mod_name = mod.__name__
    if fname is None:
        import torch

        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, torch.nn.Module) and obj.__module__ == mod_name:
                return obj
        raise TorchImportError(f"{path}: defines no nn.Module class; name a factory as FILE.py:FACTORY")
    fn = getattr(mod, fname, None)
    if fn is None and hasattr(mod, "MODELS"):
        fn = mod.MODELS.get(fname)
    if fn is None or not callable(fn):
        raise TorchImportError(f"{path}: no factory {fname!r}")
    return fn


def build_module(fn, meta: bool = True):
    """Call a factory (returning a module or ``(module, input_shape)``) on the meta device, so that
    big weights cost no memory; a constructor that needs real data there (RegNet's ``.tolist()``
    on a computed tensor) is built again on the CPU. Returns (module, input_shape or None)."""
    import torch

    built = None
    if meta:
        try:
            with torch.device("meta"):
                built = fn()
        except Exception:  # noqa: BLE001 - any data-dependent constructor: build it for real
            built = None
    if built is None:
        built = fn()
    if isinstance(built, tuple):
        if len(built) != 2:
            raise TorchImportError(f"the factory returned a tuple of {len(built)}; expected (module, input_shape)")
        module, shape = built
        return module, (tuple(shape) if isinstance(shape, (tuple, list)) else shape)
    return built, None


def load_factory_module(target: str, meta: bool = True):
    """Build the module of "FILE.py:FACTORY" (on the meta device by default, see build_module)."""
    fn = load_factory(target)
    try:
        module, shape = build_module(fn, meta)
    except TorchImportError as err:
        raise TorchImportError(f"{target}: {err}") from None
    name = getattr(fn, "__name__", None) or Path(target.split(":")[0]).stem
    return module, shape, name


# ----------------------------------------------------------------------------------------------
# tracing and shapes
# ----------------------------------------------------------------------------------------------
def _guess_vocab(module) -> int:
    import torch

    for m in module.modules():
        if isinstance(m, torch.nn.Embedding):
            return m.num_embeddings
    return 2


def _has_embedding(torch, module) -> bool:
    return any(isinstance(m, torch.nn.Embedding) for m in module.modules())


def _feeds_embedding(torch, gm) -> bool:
    """The (first) input goes straight into an embedding lookup: token ids, not floats."""
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        for u in n.users:
            if u.op == "call_module" and isinstance(gm.get_submodule(str(u.target)), torch.nn.Embedding):
                return True
            if u.op == "call_function" and u.target in (torch.nn.functional.embedding, torch.embedding):
                return True
            if u.op == "call_function" and getattr(u.target, "__name__", "") == "embedding" and u.args \
                    and u.args[-1] is n:  # torch.export's aten.embedding(weight, indices)
                return True
        return False
    return False


def _meta_input(torch, shape, dtype, vocab):
    full = (META_BATCH, *shape)
    if dtype == "int64":
        return torch.zeros(full, dtype=torch.int64, device="meta")
    return torch.empty(full, dtype=torch.float32, device="meta")


def _whole_modules() -> dict:
    """Module class name -> the layer type that maps it whole (registrations with from_torch)."""
    return {cls: lt for lt in registry.all_types() if lt.from_torch for cls in lt.torch_ops}


def _tracer(torch):
    """fx's tracer, keeping the modules a registration maps whole (a MoE block) as leaves."""
    import torch.fx

    whole = _whole_modules()

    class _Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return type(m).__name__ in whole or super().is_leaf_module(m, qualname)

    return _Tracer()


def _custom_functions_as_calls(torch):
    """While fx traces, a custom ``torch.autograd.Function``'s ``apply`` on traced values becomes
    one call node instead of the ops of its ``forward``: PyTorch runs that forward without
    recording (its ops make no graph; their intermediates die as they go), keeps only what
    ``ctx.save_for_backward`` saved and runs the Function's own backward. The call becomes a
    Generic node, which the characterisation runs forward and backward (_torch_characterise)."""
    import contextlib

    Function = torch.autograd.Function
    original = Function.__dict__["apply"]
    made: dict = {}

    def call_of(cls):
        fn = made.get(cls)
        if fn is None:
            def fn(*args, **kwargs):
                return original.__get__(None, cls)(*args, **kwargs)
            fn.__name__ = fn.__qualname__ = f"{cls.__name__}_apply"
            fn.__module__ = "memdesigner_custom_function"  # not torch's: fx keeps it as a global
            made[cls] = fn
        return fn

    def apply(cls, *args, **kwargs):
        proxies = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.fx.Proxy)]
        if not proxies:
            return original.__get__(None, cls)(*args, **kwargs)
        return proxies[0].tracer.create_proxy("call_function", call_of(cls), args, kwargs)

    @contextlib.contextmanager
    def patched():
        Function.apply = classmethod(apply)
        try:
            yield
        finally:
            Function.apply = original
    return patched()


_FACTORIES = ("zeros", "ones", "full", "empty", "rand", "randn", "randint", "arange", "eye", "tensor")


def _factories_on_traced_sizes(torch):
    """While fx traces, ``torch.zeros(x.shape[0], L, device=x.device)`` (an LSTM's h0, a mask)
    becomes one call node: fx's Proxy cannot stand in a size list, so PyTorch's argument parser
    rejects it ("zeros() takes 1 positional argument but 2 were given") and the import would fall
    back to torch.export, which breaks modules such as nn.MultiheadAttention into generic ops."""
    import contextlib

    Proxy = torch.fx.Proxy

    def traced(a) -> bool:
        if isinstance(a, Proxy):
            return True
        if isinstance(a, (tuple, list)):
            return any(traced(b) for b in a)
        return False

    def wrap(original):
        def factory(*args, **kwargs):
            for a in (*args, *kwargs.values()):
                if traced(a):
                    tracer = next(_proxies(a)).tracer
                    return tracer.create_proxy("call_function", original, args, kwargs)
            return original(*args, **kwargs)
        return factory

    def _proxies(a):
        if isinstance(a, Proxy):
            yield a
        elif isinstance(a, (tuple, list)):
            for b in a:
                yield from _proxies(b)

    originals = {name: getattr(torch, name) for name in _FACTORIES}

    import operator

    def setitem(self, key, value):  # pad[:, -4:] = True on a traced mask: one in-place call node
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})

    @contextlib.contextmanager
    def patched():
        for name, fn in originals.items():
            setattr(torch, name, wrap(fn))
        Proxy.__setitem__ = setitem
        try:
            yield
        finally:
            del Proxy.__setitem__
            for name, fn in originals.items():
                setattr(torch, name, fn)
    return patched()


def _trace(torch, module, example=None):
    import torch.fx

    try:
        # stack traces let the mapping see the source line ("out += identity" is in place)
        tracer = _tracer(torch)
        tracer.record_stack_traces = True
        tracer.proxy_buffer_attributes = True  # self.mask[:t, :t] with a traced t
        with _custom_functions_as_calls(torch), _factories_on_traced_sizes(torch):
            graph = tracer.trace(module)
        return torch.fx.GraphModule(tracer.root, graph, type(module).__name__)
    except Exception as fx_err:  # noqa: BLE001 - data-dependent control flow and friends
        try:
            from memdesigner.importers._torch_export import export_graph_module
        except ImportError:
            raise TorchImportError(f"torch.fx cannot trace {type(module).__name__}: {fx_err}") from None
        try:
            return export_graph_module(torch, module, fx_err, example)
        except TorchImportError:
            raise
        except Exception as ex_err:  # noqa: BLE001
            raise TorchImportError(f"neither torch.fx ({fx_err}) nor torch.export ({ex_err}) can trace "
                                   f"{type(module).__name__}") from None


def _propagate(torch, gm, x):
    """Shape propagation on meta tensors: a meta module runs as is; a real one is run through
    FakeTensorMode so that no memory is used either way."""
    from torch.fx.passes.shape_prop import ShapeProp

    real = any(p.device.type != "meta" for p in gm.parameters()) or \
        any(b.device.type != "meta" for b in gm.buffers())
    if not real:
        # factories without a device (torch.arange(x.shape[0]), torch.ones(t, t)) make meta tensors
        # too: a CPU one beside the meta activations fails the op that mixes them
        with torch.device("meta"):
            ShapeProp(gm).propagate(x)
        return
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake = FakeTensorMode(allow_non_fake_inputs=True)
    with fake:
        fx = torch.empty(x.shape, dtype=x.dtype)
    ShapeProp(gm, fake_mode=fake).propagate(fx)


def _tmeta(n):
    """(shape, dtype) of an fx node's output, or None for non-tensors."""
    tm = n.meta.get("tensor_meta")
    if tm is None or not hasattr(tm, "shape"):
        return None
    return tuple(int(d) for d in tm.shape), tm.dtype


# ----------------------------------------------------------------------------------------------
# graph construction
# ----------------------------------------------------------------------------------------------
def _owner(n) -> str:
    stack = n.meta.get("nn_module_stack")
    if stack:
        path = list(stack.values())[-1]
        if isinstance(path, tuple):
            path = path[0]
        return str(path)
    return ""


def _call_chain(n) -> str:
    """The module calls an op ran in, outermost first, '/'-joined (containers such as
    ModuleList are never called and do not appear)."""
    return "/".join(str(k) for k in (n.meta.get("nn_module_stack") or {}))


def _new_id(st: _State, base: str) -> str:
    base = _sanitize(base)
    cand, k = base, 1
    while cand in st.used_ids or cand in st.design.nodes:
        k += 1
        cand = f"{base}_{k}"
    st.used_ids.add(cand)
    return cand


def _add(st: _State, fxn, type_name: str, props: dict, inputs: list, name: str | None = None) -> list:
    """Add a design node fed by ``inputs`` (Vals), check its shape rule and return its output
    specs. Raises LayerError if the rule rejects it."""
    lt = registry.get(type_name)
    values = lt.coerce_props(props)
    specs = lt.shape(ShapeCtx(values, [v.spec for v in inputs], name or "")) if lt.shape else []
    if name is None:
        if fxn.op == "call_module":
            name = str(fxn.target)
        else:
            own = _owner(fxn)
            base = re.sub(r"_\d+$", "", fxn.name)
            name = f"{own}.{base}" if own else base
    nid = _new_id(st, name)
    st.design.add_node(lt.name, props, id=nid, name=name, scope=_call_chain(fxn))
    for port, v in enumerate(inputs):
        st.design.add_edge(v.nid, nid, v.port, port)
    st.depth[nid] = 1 + max((st.depth.get(v.nid, 0) for v in inputs), default=-1)
    if fxn.op == "call_module":
        _tie_shared_params(st, nid, lt, values, inputs, str(fxn.target))
    return nid, specs


def _tie_shared_params(st: _State, nid: str, lt, values: dict, inputs: list, target: str) -> None:
    """A parameter object used by two modules (``lm_head.weight = wte.weight``) is one tensor:
    the second node names the first as the owner of that parameter (Node.tied)."""
    try:
        mod = st.module.get_submodule(target)
    except AttributeError:
        return
    try:
        specs = lt.params(ShapeCtx(values, [v.spec for v in inputs], ""))
    except (LayerError, ValueError, TypeError, IndexError):
        return
    for p in specs:
        obj = mod
        for part in p.name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is None or not isinstance(obj, st.torch.nn.Parameter):
            continue
        owner = st.param_owner.get(id(obj))
        if owner is None:
            st.param_owner[id(obj)] = f"{nid}.{p.name}"
        else:
            st.design.nodes[nid].tied[p.name] = owner


def _single(st, fxn, type_name, props, inputs, dmap=None, name=None) -> Val:
    nid, specs = _add(st, fxn, type_name, props, inputs, name)
    spec = specs[0]
    if dmap is None:
        dmap = tuple(range(len(spec.shape) + 1))
    return Val(nid, 0, spec, dmap)


def _generic(st: _State, fxn, op: str, inputs: list, why: str = "", saves_input: bool = True, params: int = 0):
    """A node for an op with no rule: its traced output shape and dtype count."""
    torch = st.torch
    tm = _tmeta(fxn)
    if tm is None:
        return Other()
    shape, dtype = tm
    per = shape[1:] if shape else ()
    empty = 0 in per  # an empty tensor (Phi-3's q[..., rotary_dim:] when all of q rotates): no bytes
    if not per or empty:
        per = (1,)
    kind = "int64" if dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8) else \
        ("bool" if dtype == torch.bool else "float")
    msg = f"{fxn.name}: {op} has no memdesigner rule; imported as a Generic node (output {tuple(shape)})"
    if why:
        msg += f" ({why})"
    st.warnings.append(msg)
    ins = [v for v in inputs if isinstance(v, Val)]
    dmap = None
    if shape and shape[0] != META_BATCH and shape[0] % META_BATCH == 0 and shape[0] > META_BATCH:
        # the batch merged with the next dims (x.view(-1, C)): the design keeps a per-sample
        # leading dim so that the element count stays right
        per = (shape[0] // META_BATCH,) + tuple(shape[1:])
        dmap = (0,) + tuple(range(2, len(shape) + 1))
    # parameters passed to the op (a torch.fx.wrap function, torch.addmm(bias, x, weight)): the
    # node owns them, each counted once however many ops read it
    claims = []
    seen = set()  # (a module's own parameters are not among its arguments: _module_generic counts them)
    for pv in _flat_vals(st, (fxn.args, fxn.kwargs)):
        if not isinstance(pv, ParamVal) or pv.name in seen:
            continue
        seen.add(pv.name)
        t = _tensor_of(st, pv.name)
        if t is None or not isinstance(t, torch.nn.Parameter):  # (a frozen one still weighs: _torch_frozen)
            continue
        st.used_params.add(pv.name)
        if id(t) not in st.param_owner:
            params += t.numel()
            claims.append(t)
    props = {"op": op, "out_shape": per, "dtype": kind, "saves_input": saves_input}
    if empty:
        props.update(batch_free=True, out_elems=0)
    if params:
        props["params"] = int(params)
    out = _single(st, fxn, "Generic", props, ins, dmap)
    for t in claims:
        st.param_owner[id(t)] = f"{out.nid}.weight"
    # the call itself, as data: the exporter writes it back instead of a placeholder
    from memdesigner.importers._torch_call import call_props

    call = call_props(st, fxn, out.nid, ins, Val)
    if call:
        st.design.nodes[out.nid].props["call"] = call
    st.generic_fx[fxn] = (out.nid, _input_nodes(st, fxn, ins))
    return out


def _input_nodes(st, fxn, ins) -> list:
    """The fx node that produced each design input of a node, in order."""
    out = []
    for v in ins:
        a = next((a for a in fxn.all_input_nodes if st.vals.get(a) is v), None)
        if a is None:
            a = next((a for a in fxn.all_input_nodes if isinstance(st.vals.get(a), Val)
                      and (st.vals[a].nid, st.vals[a].port) == (v.nid, v.port)), None)
        out.append(a)
    return out


def _tensor_of(st, name):
    try:
        return _get_attr(st.gm, name)
    except AttributeError:
        return None


def _claim(st, nid: str, pname: str, name: str) -> None:
    """Node ``nid``'s parameter ``pname`` is the module's tensor ``name``: the first node to use a
    tensor owns it; later ones name that owner (Node.tied), so it is counted once."""
    st.used_params.add(name)
    t = _tensor_of(st, name)
    if t is None:
        return
    owner = st.param_owner.get(id(t))
    if owner is None:
        st.param_owner[id(t)] = f"{nid}.{pname}"
    elif not owner.startswith(f"{nid}."):
        st.design.nodes[nid].tied[pname] = owner


def _trace_generics(st, gm, input_shape, input_dtype, vocab) -> None:
    """Ask PyTorch what each Generic node's op keeps (see _torch_characterise)."""
    from memdesigner.importers._torch_characterise import characterise

    torch = st.torch
    targets = {fxn: nodes for fxn, (nid, nodes) in st.generic_fx.items()
               if nid in st.design.nodes and all(a is not None for a in nodes)}

    def x_of(b, device):
        full = (b, *input_shape)
        if input_dtype == "int64":
            return torch.zeros(full, dtype=torch.int64, device=device)
        return torch.empty(full, dtype=torch.float32, device=device)

    try:
        found = characterise(torch, gm, x_of, targets)
    except Exception:  # noqa: BLE001 - the untraced rule stays
        found = {}
    for fxn, props in found.items():
        node = st.design.nodes[st.generic_fx[fxn][0]]
        tm = _tmeta(fxn)
        if props["batch_free"] and tm is not None:
            n = 1
            for d in tm[0]:
                n *= int(d)
            props["out_elems"] = n
        else:
            props["batch_free"] = False
        node.props.update(props)


def _build(st: _State, gm, input_shape, input_dtype, vocab):
    torch = st.torch
    for fxn in gm.graph.nodes:
        if fxn.op == "placeholder":
            if any(isinstance(v, Val) and st.design.nodes[v.nid].type == "Input" for v in st.vals.values()):
                st.vals[fxn] = Other()
                st.warnings.append(f"{fxn.name}: only the first input is imported")
                continue
            props = {"shape": input_shape, "dtype": input_dtype}
            if vocab:
                props["vocab"] = vocab
            st.vals[fxn] = _single(st, fxn, "Input", props, [], name=str(fxn.target))
            continue
        if fxn.op == "output":
            # every tensor the model returns is an output (BERT returns the last hidden state
            # that its pooler also reads): it stays alive with the result, and the loss reads it
            for v in _flat_vals(st, fxn.args):
                if isinstance(v, Val) and v.port == 0 and v.nid in st.design.nodes \
                        and st.design.nodes[v.nid].type != "Input":
                    st.design.nodes[v.nid].output = True
            continue
        if fxn.op == "get_attr":
            obj = _get_attr(gm, fxn.target)
            if isinstance(obj, torch.Tensor):
                st.vals[fxn] = ParamVal(str(fxn.target), tuple(obj.shape))
            else:
                st.vals[fxn] = Other(obj)
            continue
        try:
            st.vals[fxn] = _map(st, gm, fxn)
        except LayerError as err:
            ins = [v for v in _flat_vals(st, (fxn.args, fxn.kwargs)) if isinstance(v, Val)]
            st.vals[fxn] = _generic(st, fxn, _op_name(fxn), ins, f"{err.field}: {err.message}")
        except (TypeError, ValueError, IndexError, KeyError) as err:
            # e.g. a size computed from a traced value (F.max_pool1d(c, c.shape[2])): keep the op
            # as a Generic node with its traced output rather than fail the whole import
            ins = [v for v in _flat_vals(st, (fxn.args, fxn.kwargs)) if isinstance(v, Val)]
            st.vals[fxn] = _generic(st, fxn, _op_name(fxn), ins, f"could not map: {err}")


_FRAME = re.compile(r'\s*File "([^"]+)", line (\d+), in (\w+)')


def _forward_frames(fxn) -> list:
    """The ``forward`` frames an op ran in, outermost first: [(owner module key, file, line,
    code)]. The i-th forward frame belongs to the root module (i = 0) or to the i-th entry of the
    op's nn_module_stack; a leaf module called by the op has no frame of its own."""
    trace = fxn.meta.get("stack_trace") or ""
    lines = str(trace).splitlines()
    nms = fxn.meta.get("nn_module_stack") or {}
    stack = list(nms.keys())
    vals = list(nms.values())
    if vals and isinstance(vals[0], tuple) and vals[0][0] == "":
        stack = stack[1:]  # torch.export lists the root module itself first
    owners = [""] + stack
    out = []
    for i, ln in enumerate(lines):
        m = _FRAME.match(ln)
        if not m or m.group(3) != "forward" or i + 1 >= len(lines) or "/torch/fx/" in m.group(1):
            continue
        k = len(out)
        if k >= len(owners):
            break
        line, code = _statement(m.group(1), int(m.group(2)), lines[i + 1].strip())
        out.append((owners[k], m.group(1), line, code))
    return out


_STATEMENTS: dict = {}


def _statement(file: str, line: int, code: str) -> tuple:
    """The whole simple statement a source line belongs to: (its first line, its source).

    A stack trace shows one line, but ``x = f(\n  a,\n)`` spans several, and each op of it may
    name another line; keying on the statement keeps them one binding."""
    table = _STATEMENTS.get(file)
    if table is None:
        import ast
        import linecache

        table = {}
        src = "".join(linecache.getlines(file))
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            simple = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)
            for node in ast.walk(tree):
                if isinstance(node, simple) and node.end_lineno and node.end_lineno > node.lineno:
                    seg = ast.get_source_segment(src, node)
                    if seg:
                        # one line, without comments (a "# ..." inside the call's parentheses
                        # would swallow the rest of the joined line)
                        seg = " ".join(part.strip() for part in _without_comments(seg).splitlines())
                        for ln in range(node.lineno, node.end_lineno + 1):
                            table[ln] = (node.lineno, seg)
        _STATEMENTS[file] = table
    return table.get(line, (line, code))


def _without_comments(src: str) -> str:
    import io
    import tokenize

    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type != tokenize.COMMENT]
        return tokenize.untokenize(toks)
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):
        return src


_LOOP_LINES: dict = {}


def _in_loop(file: str, line: int) -> bool:
    """Whether a source line sits inside a for/while loop (each pass binds anew)."""
    lines = _LOOP_LINES.get(file)
    if lines is None:
        import ast
        import linecache

        lines = set()
        try:
            tree = ast.parse("".join(linecache.getlines(file)))
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            for node in ast.walk(tree):
                if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
                    for sub in node.body:
                        for inner in ast.walk(sub):
                            if hasattr(inner, "lineno"):
                                lines.add(inner.lineno)
        _LOOP_LINES[file] = lines
    return line in lines


def _assigned_names(code: str) -> list:
    """Names that a single-line ``a = <tensor expression>`` binds (not tuples, lists, sizes)."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Assign, ast.AnnAssign)):
        return []
    stmt = tree.body[0]
    value = stmt.value
    if not isinstance(value, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript)):
        return []
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in (
            "pop", "size", "dim", "numel", "item", "tolist"):
        return []
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    if not names and len(targets) == 1 and isinstance(targets[0], ast.Tuple) and targets[0].elts \
            and isinstance(targets[0].elts[0], ast.Name) and _is_module_call(value):
        # ``out, h = self.gru(x)``: the first name holds the module's first output (the one a
        # design node's keep_until keeps), even when it is ``_`` and never read again
        names = [targets[0].elts[0].id]
    return names


def _is_module_call(value) -> bool:
    """``self.child(...)``: one call of a submodule, nothing chained after it (a chain such as
    ``self.qkv(x).unbind(0)`` binds views made by its last op instead)."""
    import ast

    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name) and value.func.value.id == "self")


def _unpacked_per_item(code: str) -> list:
    """``a, b = (f(t) for t in (x, y))``, ``[... for t in ...]`` or ``map(fn, (x, y))``: the names
    that each take one item's result, in order (empty for any other statement)."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign) or len(tree.body[0].targets) != 1:
        return []
    target, value = tree.body[0].targets[0], tree.body[0].value
    if not isinstance(target, (ast.Tuple, ast.List)) or not all(isinstance(e, ast.Name) for e in target.elts):
        return []
    if isinstance(value, (ast.GeneratorExp, ast.ListComp)):
        items = value.generators[0].iter if len(value.generators) == 1 else None
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "map" \
            and len(value.args) == 2:
        items = value.args[1]
    else:
        return []
    if not isinstance(items, (ast.Tuple, ast.List)) or len(items.elts) != len(target.elts):
        return []
    return [e.id for e in target.elts]


def _python_locals(st: _State, gm) -> None:
    """Eager PyTorch frees a tensor when its last Python reference goes, not after its last op:
    ``q = q * self.scale`` keeps q until q is rebound or ``forward`` returns. From the source
    lines in each op's stack trace, find the values bound to local names in every forward frame
    and set ``keep_until`` on their design nodes: the end of the statement that rebinds the
    name, or the frame's last op."""
    frames: dict = {}  # (owner, file) -> list of [line, code, last design node of the run]
    frame_end: dict = {}
    for fxn in gm.graph.nodes:
        if fxn.op not in ("call_module", "call_function", "call_method"):
            continue
        v = st.vals.get(fxn)
        nid = v.nid if isinstance(v, Val) else None
        chain = _forward_frames(fxn)
        leaf = str(fxn.target) if fxn.op == "call_module" else None
        for k, (owner, file, line, code) in enumerate(chain):
            key = (owner, file)
            # the module this statement called: a loop (for b in blocks: x = b(x)) runs the same
            # line once per child, and each execution binds its own value
            child = chain[k + 1][0] if k + 1 < len(chain) else leaf
            # what this op is to the statement: the module it went through (indices folded, so
            # blocks.0 and blocks.1 look alike) or the function it called
            sig = re.sub(r"\.\d+", ".#", child) if child else f"fn:{fxn.target}"
            runs = frames.setdefault(key, [])
            last = runs[-1] if runs else None
            # a loop line (for b in blocks: x = b(x)) executes once per pass: a pass starts again
            # when the statement's first call recurs on another module than the previous op's
            new_pass = (last is not None and last[0] == line and child != last[4] and sig == last[3]
                        and _in_loop(file, line))
            if last is not None and last[0] == line and not new_pass:
                if nid:
                    last[2] = nid
                    last[5].append(nid)
                last[4] = child
            else:
                runs.append([line, code, nid, sig, child, [nid] if nid else []])
            if nid:
                frame_end[key] = nid
    for key, runs in frames.items():
        end = frame_end.get(key)
        bound: dict = {}  # name -> design node holding its value
        for _line, code, last, _sig, _child, nids in runs:
            names = _assigned_names(code)
            values = [last] * len(names)
            per_item = _unpacked_per_item(code)
            if per_item and nids and len(nids) % len(per_item) == 0:
                # q, k, v = (f(t) for t in (q, k, v)): each name gets the last op of its own item
                step = len(nids) // len(per_item)
                names, values = per_item, [nids[(i + 1) * step - 1] for i in range(len(per_item))]
            if not names or not last:
                continue
            for name, value in zip(names, values):
                old = bound.pop(name, None)
                if old is not None and old != last:
                    _keep(st, old, last)
                bound[name] = value
        for nid in set(bound.values()):
            if end and nid != end:
                _keep(st, nid, end)


def _keep(st: _State, nid: str, until: str) -> None:
    node = st.design.nodes.get(nid)
    if node is None or until not in st.design.nodes:
        return
    order = list(st.design.nodes)
    if order.index(until) > order.index(nid) and (
            not node.keep_until or order.index(until) > order.index(node.keep_until)):
        node.keep_until = until


def _get_attr(gm, target):
    obj = gm
    for part in str(target).split("."):
        obj = getattr(obj, part)
    return obj


def _flat_vals(st, obj):
    out = []
    if isinstance(obj, (list, tuple)):
        for o in obj:
            out += _flat_vals(st, o)
    elif isinstance(obj, dict):
        for o in obj.values():
            out += _flat_vals(st, o)
    elif hasattr(obj, "op") and hasattr(obj, "graph"):
        out.append(st.vals.get(obj))
    return out


def _v(st, a):
    """The value of an fx argument (a node's value, or a Python constant)."""
    if hasattr(a, "op") and hasattr(a, "graph"):
        return st.vals.get(a, Other())
    if isinstance(a, (list, tuple)):
        return type(a)(_v(st, x) for x in a)
    return a


def _op_name(fxn) -> str:
    t = fxn.target
    if fxn.op == "call_module":
        return str(t)
    if isinstance(t, str):
        return t
    schema = getattr(t, "_schema", None)
    if schema is not None:  # an aten OpOverload (torch.export fallback): aten::relu_ -> relu_
        return schema.name.split("::")[-1]
    return getattr(t, "__name__", str(t))


def _arg(fxn, i, name, default=None):
    if len(fxn.args) > i:
        return fxn.args[i]
    return fxn.kwargs.get(name, default)


def _pair(v):
    if isinstance(v, (tuple, list)):
        v = tuple(int(x) for x in v)
        return v[0] if len(set(v)) == 1 else v
    return int(v)


def _real_rank(fxn_arg) -> int | None:
    tm = _tmeta(fxn_arg) if hasattr(fxn_arg, "meta") else None
    return len(tm[0]) if tm else None


# -- op families --------------------------------------------------------------------------------
_ACT_MODULES = {"ReLU": "ReLU", "ReLU6": "ReLU6", "LeakyReLU": "LeakyReLU", "GELU": "GELU", "SiLU": "SiLU",
                "Sigmoid": "Sigmoid", "Tanh": "Tanh"}
_ACT_FUNCS = {"relu": "ReLU", "relu_": "ReLU", "relu6": "ReLU6", "leaky_relu": "LeakyReLU", "leaky_relu_": "LeakyReLU",
              "gelu": "GELU", "silu": "SiLU", "silu_": "SiLU", "sigmoid": "Sigmoid", "sigmoid_": "Sigmoid",
              "tanh": "Tanh", "tanh_": "Tanh", "hardtanh": "ReLU6"}
_PASSTHROUGH_METHODS = {"detach"}  # (detach is rare inside models; treated as a view)


def _map(st: _State, gm, fxn):
    if fxn.op == "call_module":
        mod = gm.get_submodule(str(fxn.target))
        return _map_module(st, fxn, mod)
    name = _op_name(fxn)
    args = [_v(st, a) for a in fxn.args]
    x = args[0] if args else None

    # non-tensor plumbing -------------------------------------------------------------------
    if fxn.op == "call_function" and fxn.target is getattr:
        return Other()
    if name in ("size", "dim", "numel") or (fxn.op == "call_function" and _tmeta(fxn) is None
                                            and fxn.target is not operator.getitem
                                            and not any(isinstance(a, (Val, Multi, ParamVal))
                                                        for a in _flat_vals(st, (fxn.args, fxn.kwargs)))):
        return Other()
    if fxn.target is operator.getitem:
        return _map_getitem(st, fxn, x, fxn.args[1])

    # parameters reached by get_attr ---------------------------------------------------------
    if isinstance(x, ParamVal) and name in ("expand", "expand_as", "repeat", "to", "type_as"):
        return ParamVal(x.name, x.shape, True)
    flat = _flat_vals(st, (fxn.args, fxn.kwargs))
    if isinstance(x, ParamVal) and not any(isinstance(v, Val) for v in flat) and _tmeta(fxn) is not None \
            and name not in ("embedding", "cat", "concat", "concatenate"):
        # computed from a parameter alone (weight.float(), 1 + weight, weight.t()): still that
        # parameter for the ops that read it (its small copy is not counted)
        return ParamVal(x.name, _tmeta(fxn)[0], True)

    # element-wise merges --------------------------------------------------------------------
    if name in ("add", "iadd", "add_", "__add__", "__iadd__", "__radd__"):
        return _map_add(st, fxn, args, inplace=name in ("iadd", "add_", "__iadd__") or _augmented(fxn, "+="))
    if name in ("mul", "mul_", "__mul__", "__rmul__", "multiply"):
        return _map_mul(st, fxn, args, div=False)
    if name in ("truediv", "div", "div_", "__truediv__"):
        return _map_mul(st, fxn, args, div=True)
    if name in ("matmul", "bmm", "__matmul__"):
        return _map_matmul(st, fxn, args)
    if name == "cat" or name == "concat" or name == "concatenate":
        return _map_cat(st, fxn)
    if name == "embedding":  # F.embedding(ids, weight) or aten.embedding(weight, ids)
        ids = next((a for a in args[:2] if isinstance(a, Val)), None)
        w = next((a for a in args[:2] if isinstance(a, ParamVal)), None)
        if ids is not None and w is not None and len(w.shape) == 2 and ids.spec.kind == "int64":
            st.used_params.add(w.name)
            nid, specs = _add(st, fxn, "Embedding", {"num_embeddings": w.shape[0], "embedding_dim": w.shape[1]},
                              [ids])
            _claim(st, nid, "weight", w.name)
            return Val(nid, 0, specs[0], ids.dmap + (len(ids.dmap),))

    if name == "addmm" and len(args) > 2 and isinstance(args[2], ParamVal) and len(args[2].shape) == 2 \
            and isinstance(x, ParamVal) and isinstance(args[1], Val) and _arg(fxn, 3, "beta", 1) == 1 \
            and _arg(fxn, 4, "alpha", 1) == 1:
        # HF GPT-2's Conv1D: torch.addmm(bias, x, weight), weight (in, out): a Linear
        return _param_linear(st, fxn, args[1], args[2], x, args[2].shape[1])
    if not isinstance(x, Val):
        return _generic(st, fxn, name, _flat_vals(st, (fxn.args, fxn.kwargs)))
    rank = _real_rank(fxn.args[0]) or (len(x.dmap))

    # activations ------------------------------------------------------------------------------
    if name in _ACT_FUNCS:
        t = _ACT_FUNCS[name]
        if name == "hardtanh":
            lo, hi = _arg(fxn, 1, "min_val", -1.0), _arg(fxn, 2, "max_val", 1.0)
            if (lo, hi) != (0.0, 6.0):
                return _generic(st, fxn, name, [x], "only hardtanh(0, 6) maps to ReLU6")
        props = {}
        lt = registry.get(t)
        if any(p.name == "inplace" for p in lt.props):
            props["inplace"] = bool(name.endswith("_") or fxn.kwargs.get("inplace", False)
                                    or (name in ("relu", "relu6", "silu", "leaky_relu") and fxn.op == "call_function"
                                        and _arg(fxn, 2 if name == "leaky_relu" else 1, "inplace", False) is True))
        if t == "LeakyReLU":
            props["negative_slope"] = float(_arg(fxn, 1, "negative_slope", 0.01))
        if t == "GELU":
            props["approximate"] = fxn.kwargs.get("approximate", "none")
        return _same(st, fxn, t, props, x)
    if name in ("softmax", "_softmax", "log_softmax", "_log_softmax"):
        d = _arg(fxn, 1, "dim", None)
        if d is None:
            return _generic(st, fxn, name, [x], "softmax without dim")
        return _same(st, fxn, "Softmax", {"dim": x.ddim(int(d), rank), "log": "log" in name}, x)
    if name in _torch_loss.KINDS:  # a loss computed in the model: the Loss rule
        y = args[1] if len(args) > 1 else _v(st, fxn.kwargs.get("target"))
        v = _torch_loss.map_loss(st, fxn, name, x, y, _torch_loss.options_of_call(fxn, name), _single)
        if v is not None:
            return v
    if name in ("dropout", "dropout_", "feature_dropout"):
        p = float(_arg(fxn, 1, "p", 0.5))
        training = _arg(fxn, 2, "training", True)
        inplace = bool(_arg(fxn, 3, "inplace", False)) or name.endswith("_")
        if training is False:
            return x
        return _same(st, fxn, "Dropout", {"p": p, "inplace": inplace}, x)

    # views and layout -----------------------------------------------------------------------
    if name in _PASSTHROUGH_METHODS:
        return x
    if name in ("contiguous",):
        return _single(st, fxn, "Contiguous", {}, [x], x.dmap)
    if name in ("clone",):
        return _single(st, fxn, "Contiguous", {"always_copy": True}, [x], x.dmap)
    if name in ("to", "type", "float", "type_as", "half", "bfloat16", "double"):
        tm = _tmeta(fxn)
        if x.spec.kind == "float" and loss_upcast(st.torch, fxn, name):  # logits.float() in a HF loss
            return_uncast(st.torch, fxn)
            return _single(st, fxn, "ToDtype", {"to": "float32"}, [x], x.dmap)
        if tm is not None and tm[1] == _tmeta(fxn.args[0])[1]:
            return x
        return _generic(st, fxn, name, [x], "dtype conversion", saves_input=False)
    if name in ("view", "reshape", "view_as", "reshape_as", "unflatten", "unsqueeze", "squeeze"):
        return _map_reshape(st, fxn, x)
    if name in ("flatten",):
        s = int(_arg(fxn, 1, "start_dim", 0))
        e = int(_arg(fxn, 2, "end_dim", -1))
        return _map_flatten(st, fxn, x, s, e, rank)
    if name in ("transpose", "swapaxes", "swapdims"):
        a, b = int(_arg(fxn, 1, "dim0")), int(_arg(fxn, 2, "dim1"))
        perm = list(range(rank))
        a, b = a % rank, b % rank
        perm[a], perm[b] = perm[b], perm[a]
        return _map_permute(st, fxn, x, perm)
    if name == "t":
        return _map_permute(st, fxn, x, [1, 0] if rank == 2 else [0])
    if name == "permute":
        dims = fxn.args[1:] if len(fxn.args) > 2 else _arg(fxn, 1, "dims")
        if isinstance(dims, int):
            dims = [dims]
        return _map_permute(st, fxn, x, [int(d) % rank for d in dims])
    if name in ("chunk", "split", "unbind", "tensor_split"):
        return _map_split(st, fxn, x, name, rank)
    if name in ("mean",):
        d = _arg(fxn, 1, "dim", None)
        keep = bool(_arg(fxn, 2, "keepdim", False))
        if isinstance(d, (list, tuple)) and len(d) == 1:
            d = d[0]
        if isinstance(d, int):
            return _single(st, fxn, "Mean", {"dim": x.ddim(d, rank), "keepdim": keep}, [x],
                           _drop_dim(x.dmap, d % rank) if not keep else x.dmap)
        if isinstance(d, (list, tuple)) and len(d) == 2 and sorted(int(i) % rank for i in d) == [rank - 2, rank - 1] \
                and x.identity and rank == 4:
            # mean over H, W: global average pooling
            v = _single(st, fxn, "AdaptiveAvgPool2d", {"output_size": 1}, [x])
            return v if keep else _reshape_to(st, fxn, v, _tmeta(fxn)[0][1:])
        return _generic(st, fxn, name, [x], "mean over several dims or all", saves_input=False)
    if name in ("max", "min"):
        d = _arg(fxn, 1, "dim", None)
        if isinstance(d, int):
            keep = bool(_arg(fxn, 2, "keepdim", False))
            nid, specs = _add(st, fxn, "Max", {"dim": x.ddim(d, rank), "keepdim": keep}, [x])
            dm = _drop_dim(x.dmap, d % rank) if not keep else x.dmap
            return Multi([Val(nid, 0, specs[0], dm), Val(nid, 1, specs[1], dm)])
    if name in ("adaptive_avg_pool2d",):
        return _single(st, fxn, "AdaptiveAvgPool2d", {"output_size": _pair(_arg(fxn, 1, "output_size"))}, [x])
    if name in ("max_pool2d", "max_pool1d", "avg_pool2d", "max_pool3d", "avg_pool3d"):
        k = _arg(fxn, 1, "kernel_size")
        s = _arg(fxn, 2, "stride", None) or k
        p = _arg(fxn, 3, "padding", 0)
        ceil = bool(fxn.kwargs.get("ceil_mode", False))
        t = {"max_pool2d": "MaxPool2d", "max_pool1d": "MaxPool1d", "avg_pool2d": "AvgPool2d", "max_pool3d": "MaxPool3d",
             "avg_pool3d": "AvgPool3d"}[name]
        if name.startswith("max"):
            dil = _arg(fxn, 4, "dilation", 1)
            if _pair(dil) != 1:
                return _generic(st, fxn, name, [x], "dilated pooling")
            ceil = bool(_arg(fxn, 5, "ceil_mode", False))
        return _single(st, fxn, t, {"kernel": _pair(k), "stride": _pair(s), "padding": _pair(p), "ceil_mode": ceil}, [x])
    if name in ("interpolate", "upsample"):
        return _map_upsample(st, fxn, x, _arg(fxn, 2, "scale_factor"), _arg(fxn, 3, "mode", "nearest"))
    if name == "scaled_dot_product_attention":
        q, k, v = args[0], args[1], args[2]
        if not all(isinstance(t, Val) and t.identity for t in (q, k, v)) or _arg(fxn, 3, "attn_mask") is not None:
            return _generic(st, fxn, name, [t for t in (q, k, v) if isinstance(t, Val)], "mask or layout")
        return _single(st, fxn, "ScaledDotProductAttention",
                       {"kernel": "fused", "causal": bool(_arg(fxn, 5, "is_causal", False))}, [q, k, v])
    if name == "linear" and len(args) > 1 and isinstance(args[1], ParamVal) and len(args[1].shape) == 2:
        w = args[1]
        b = args[2] if len(args) > 2 else _v(st, fxn.kwargs.get("bias"))
        return _param_linear(st, fxn, x, w, b if isinstance(b, ParamVal) else None, w.shape[0])
    if name in ("conv2d", "conv1d", "conv3d") and len(args) > 1 and isinstance(args[1], ParamVal) and isinstance(x, Val):
        w = args[1]
        b = args[2] if len(args) > 2 else _v(st, fxn.kwargs.get("bias"))
        pad = _arg(fxn, 4, "padding", 0)
        props = {"out_channels": w.shape[0], "kernel": _pair(tuple(w.shape[2:])), "stride": _pair(_arg(fxn, 3, "stride", 1)),
                 "padding": pad.upper() if isinstance(pad, str) else _pair(pad),
                 "dilation": _pair(_arg(fxn, 5, "dilation", 1)), "groups": int(_arg(fxn, 6, "groups", 1)),
                 "bias": isinstance(b, ParamVal)}
        out = _single(st, fxn, {"conv1d": "Conv1d", "conv2d": "Conv2d", "conv3d": "Conv3d"}[name], props, [x])
        _claim(st, out.nid, "weight", w.name)
        if isinstance(b, ParamVal):
            _claim(st, out.nid, "bias", b.name)
        return out
    if name in ("layer_norm",) and isinstance(_v(st, _arg(fxn, 2, "weight")), ParamVal):
        w, b = _v(st, _arg(fxn, 2, "weight")), _v(st, _arg(fxn, 3, "bias"))
        if isinstance(b, ParamVal):
            ns = tuple(_arg(fxn, 1, "normalized_shape"))
            out = _same(st, fxn, "LayerNorm", {"normalized_shape": ns if len(ns) > 1 else (),
                                               "eps": float(_arg(fxn, 4, "eps", 1e-5))}, x)
            _claim(st, out.nid, "weight", w.name)
            _claim(st, out.nid, "bias", b.name)
            return out
    if name in ("identity",):
        return x
    return _generic(st, fxn, name, _flat_vals(st, (fxn.args, fxn.kwargs)))


def _param_linear(st, fxn, x, w, b, out_features):
    out = _single(st, fxn, "Linear", {"out_features": int(out_features), "bias": b is not None}, [x], x.dmap)
    _claim(st, out.nid, "weight", w.name)
    if b is not None:
        _claim(st, out.nid, "bias", b.name)
    return out


def _augmented(fxn, op: str) -> bool:
    """Whether the user source line that made this node is an augmented assignment (``a += b``):
    torch.fx records ``a += b`` as operator.add, but eager PyTorch runs it in place."""
    import torch

    trace = fxn.meta.get("stack_trace") or ""
    torch_dir = os.path.dirname(torch.__file__)
    code = None
    lines = str(trace).splitlines()
    for i, ln in enumerate(lines):
        m = re.match(r'\s*File "([^"]+)"', ln)
        if m and i + 1 < len(lines) and not m.group(1).startswith(torch_dir):
            code = lines[i + 1].strip()
    if not code:
        return False
    return re.match(r"^[A-Za-z_][\w.]*(\[[^\]]*\])?\s*" + re.escape(op), code) is not None


def _same(st, fxn, t, props, x):
    return _single(st, fxn, t, props, [x], x.dmap)


def _drop_dim(dmap, real_d):
    """dmap after the real dim ``real_d`` is removed and the design dim removed as well."""
    gone = dmap[real_d]
    return tuple(d - (1 if d > gone else 0) for i, d in enumerate(dmap) if i != real_d)


# -- modules ------------------------------------------------------------------------------------
def _map_module(st: _State, fxn, mod):
    torch = st.torch
    nn = torch.nn
    cls = type(mod).__name__
    x = _v(st, fxn.args[0]) if fxn.args else _v(st, next(iter(fxn.kwargs.values()), None))
    path = str(fxn.target)
    if not isinstance(x, Val):  # fed by a parameter (latents.expand(...)): its own parameters still count
        return _module_generic(st, fxn, mod, cls, path)

    def own():
        for pn, _ in mod.named_parameters():
            st.used_params.add(f"{path}.{pn}")

    if isinstance(mod, nn.Identity):
        return x
    whole = _whole_modules().get(cls)
    if whole is not None:
        props = whole.from_torch(mod)
        if props is not None:
            own()
            return _single(st, fxn, whole.name, props, [x])
    if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d)) and type(mod) in (nn.Conv1d, nn.Conv2d, nn.Conv3d):
        if mod.padding_mode != "zeros":
            st.warnings.append(f"{path}: padding_mode {mod.padding_mode!r} is imported as zero padding")
        pad = mod.padding
        pad = pad.upper() if isinstance(pad, str) else _pair(pad)
        own()
        return _single(st, fxn, type(mod).__name__, {
            "out_channels": mod.out_channels, "kernel": _pair(mod.kernel_size), "stride": _pair(mod.stride),
            "padding": pad, "dilation": _pair(mod.dilation), "groups": mod.groups, "bias": mod.bias is not None}, [x])
    if type(mod) is nn.ConvTranspose2d:
        own()
        return _single(st, fxn, "ConvTranspose2d", {
            "out_channels": mod.out_channels, "kernel": _pair(mod.kernel_size), "stride": _pair(mod.stride),
            "padding": _pair(mod.padding), "output_padding": _pair(mod.output_padding),
            "dilation": _pair(mod.dilation), "groups": mod.groups, "bias": mod.bias is not None}, [x])
    if isinstance(mod, nn.Linear) and type(mod) in (nn.Linear,):
        own()
        return _single(st, fxn, "Linear", {"out_features": mod.out_features, "bias": mod.bias is not None}, [x],
                       x.dmap)
    if type(mod) in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d):
        own()
        mom = mod.momentum
        if mom is None:
            st.warnings.append(f"{path}: momentum None (cumulative average) imported as 0.1")
            mom = 0.1
        return _single(st, fxn, type(mod).__name__, {"eps": float(mod.eps), "momentum": float(mom),
                                                     "affine": mod.affine,
                                                     "track_running_stats": mod.track_running_stats}, [x])
    if type(mod) is nn.LayerNorm:
        own()
        if mod.elementwise_affine and getattr(mod, "bias", True) is None:
            st.warnings.append(f"{path}: LayerNorm(bias=False) is imported with a bias")
        ns = tuple(mod.normalized_shape)
        return _same(st, fxn, "LayerNorm", {"normalized_shape": ns if len(ns) > 1 else (), "eps": float(mod.eps),
                                            "elementwise_affine": mod.elementwise_affine}, x)
    if type(mod) is nn.GroupNorm:
        own()
        return _single(st, fxn, "GroupNorm", {"num_groups": mod.num_groups, "eps": float(mod.eps),
                                              "affine": mod.affine}, [x])
    if type(mod) is nn.Dropout:
        return _same(st, fxn, "Dropout", {"p": float(mod.p), "inplace": bool(mod.inplace)}, x)
    if cls in _ACT_MODULES and type(mod).__module__.startswith("torch.nn"):
        t = _ACT_MODULES[cls]
        props = {}
        if hasattr(mod, "inplace") and any(p.name == "inplace" for p in registry.get(t).props):
            props["inplace"] = bool(mod.inplace)
        if t == "LeakyReLU":
            props["negative_slope"] = float(mod.negative_slope)
        if t == "GELU":
            props["approximate"] = mod.approximate
        return _same(st, fxn, t, props, x)
    if type(mod) in (nn.Softmax, nn.LogSoftmax):
        if mod.dim is None:
            return _generic(st, fxn, cls, [x], "Softmax without dim")
        return _same(st, fxn, "Softmax", {"dim": x.ddim(mod.dim, len(x.dmap)), "log": type(mod) is nn.LogSoftmax}, x)
    if type(mod) in (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d):
        if _pair(mod.dilation) != 1 or mod.return_indices:
            return _generic(st, fxn, cls, [x], "dilation or return_indices")
        return _single(st, fxn, cls, {"kernel": _pair(mod.kernel_size), "stride": _pair(mod.stride or mod.kernel_size),
                                      "padding": _pair(mod.padding), "ceil_mode": bool(mod.ceil_mode)}, [x])
    if type(mod) in (nn.AvgPool2d, nn.AvgPool3d):
        return _single(st, fxn, cls, {"kernel": _pair(mod.kernel_size),
                                              "stride": _pair(mod.stride or mod.kernel_size),
                                              "padding": _pair(mod.padding), "ceil_mode": bool(mod.ceil_mode)}, [x])
    if type(mod) is nn.AdaptiveAvgPool2d:
        os_ = mod.output_size
        if isinstance(os_, (tuple, list)) and any(o is None for o in os_) or os_ is None:
            return _generic(st, fxn, cls, [x], "output_size with None")
        return _single(st, fxn, "AdaptiveAvgPool2d", {"output_size": _pair(os_)}, [x])
    if type(mod) is nn.Flatten:
        return _map_flatten(st, fxn, x, mod.start_dim, mod.end_dim, len(x.dmap))
    if type(mod) is nn.Upsample:
        return _map_upsample(st, fxn, x, mod.scale_factor, mod.mode)
    if type(mod) is nn.Embedding:
        own()
        return _single(st, fxn, "Embedding", {"num_embeddings": mod.num_embeddings,
                                              "embedding_dim": mod.embedding_dim}, [x])
    if type(mod) is nn.GRUCell:
        ins = [x]
        h0 = _v(st, fxn.args[1]) if len(fxn.args) > 1 else _v(st, fxn.kwargs.get("hx"))
        if isinstance(h0, Val):
            ins.append(h0)
        own()
        return _single(st, fxn, "GRUCell", {"hidden_size": mod.hidden_size, "bias": mod.bias}, ins, x.dmap)
    if type(mod) in (nn.LSTM, nn.GRU):
        if not mod.batch_first:
            st.warnings.append(f"{path}: batch_first=False; imported as batch first (same memory, "
                               "the sequence must be dim 1 of the design's input)")
        if getattr(mod, "proj_size", 0):
            return _generic(st, fxn, cls, [x], "proj_size")
        if len(fxn.args) > 1 and fxn.args[1] is not None:
            st.warnings.append(f"{path}: the initial state argument is ignored")
        own()
        nid, specs = _add(st, fxn, cls, {"hidden_size": mod.hidden_size, "num_layers": mod.num_layers,
                                         "bias": mod.bias, "bidirectional": mod.bidirectional,
                                         "dropout": float(mod.dropout), "return_sequences": True}, [x])
        v = Val(nid, 0, specs[0], tuple(range(len(specs[0].shape) + 1)))
        # h_n is (layers * directions, B, H): the design keeps the batch first, real dim 1 -> 0
        h_n = Val(nid, 1, specs[1], (1, 0, 2))
        return Multi([v, Multi([h_n, Other()]) if cls == "LSTM" else h_n])
    if type(mod) in (nn.TransformerEncoder, nn.TransformerEncoderLayer):
        out = _map_transformer_encoder(st, fxn, mod, path, x)
        if out is not None:
            own()
            return out
    if type(mod) is nn.MultiheadAttention:
        return _map_mha(st, fxn, mod, path, own)
    if cls in _torch_loss.KINDS and type(mod).__module__.startswith("torch.nn."):
        y = _v(st, fxn.args[1]) if len(fxn.args) > 1 else _v(st, fxn.kwargs.get("target"))
        v = _torch_loss.map_loss(st, fxn, cls, x, y, _torch_loss.options_of_module(mod), _single)
        if v is not None:
            return v
    return _module_generic(st, fxn, mod, cls, path)


def _module_generic(st, fxn, mod, cls, path):
    """An unmapped module still brings its parameters (as one block on the Generic node)."""
    n_params = sum(p.numel() for p in mod.parameters())  # frozen ones too (_torch_frozen marks the node)
    if path in st.generic_owner:  # the same module called again: its parameters are counted once
        n_params = 0
    why = f"its {n_params:,} parameters are counted as one block" if n_params else ""
    out = _generic(st, fxn, cls, _flat_vals(st, (fxn.args, fxn.kwargs)), why, params=n_params)
    if n_params and not isinstance(out, Other):
        st.generic_owner[path] = out.nid
        for pn, p in mod.named_parameters():
            st.used_params.add(f"{path}.{pn}")
            st.param_owner.setdefault(id(p), f"{out.nid}.weight")
    return out


def _map_mha(st, fxn, mod, path, own):
    q = _v(st, _arg(fxn, 0, "query"))
    k = _v(st, _arg(fxn, 1, "key"))
    v = _v(st, _arg(fxn, 2, "value"))
    same = q is k is v or (isinstance(q, Val) and isinstance(k, Val) and isinstance(v, Val)
                           and (q.nid, q.port) == (k.nid, k.port) == (v.nid, v.port))
    # batch_first=False (the default) takes the real (L, B, E): the design's (B, L, E) transposed
    seq = (1, 0, 2)
    if (not same or _arg(fxn, 4, "need_weights", True) is None
            or (not mod.batch_first and not (isinstance(q, Val) and q.dmap == seq))):
        out = _module_generic(st, fxn, mod, "MultiheadAttention", path)
        return out
    if mod.bias_k is not None or not mod._qkv_same_embed_dim:
        return _module_generic(st, fxn, mod, "MultiheadAttention", path)
    kpm = _v(st, _arg(fxn, 3, "key_padding_mask"))
    # a (B, S) key_padding_mask is the layer's second input
    kpm = kpm if isinstance(kpm, Val) and kpm.dmap == (0, 1) and kpm.spec.shape == q.spec.shape[:1] else None
    if (_arg(fxn, 3, "key_padding_mask") is not None and kpm is None) or _arg(fxn, 5, "attn_mask") is not None:
        st.warnings.append(f"{path}: attention masks are not modelled")
    own()
    need = bool(_arg(fxn, 4, "need_weights", True))
    am = _arg(fxn, 5, "attn_mask")
    am_meta = _tmeta(am) if hasattr(am, "meta") else None
    # need_weights=False takes scaled_dot_product_attention (no L x L matrix kept)
    out = _single(st, fxn, "MultiHeadAttention", {"num_heads": mod.num_heads, "dropout": float(mod.dropout),
                                                  "bias": mod.in_proj_bias is not None,
                                                  "kernel": "math" if need else "fused",
                                                  "need_weights": need, "batch_first": bool(mod.batch_first),
                                                  "float_mask": bool(am_meta and am_meta[1].is_floating_point)},
                  [q] + ([kpm] if kpm else []), q.dmap)
    return Multi([out, Other()])


def _map_transformer_encoder(st, fxn, mod, path, x):
    """nn.TransformerEncoder / EncoderLayer (either batch_first) as the layers their forward runs:
    self-attention through scaled_dot_product_attention (need_weights=False), dropouts, residual
    adds, layer norms (before or after, per norm_first) and the feed-forward block."""
    nn = st.torch.nn
    F = st.torch.nn.functional
    if isinstance(mod, nn.TransformerEncoder):
        layers, final = list(mod.layers), mod.norm
    else:
        layers, final = [mod], None
    # batch_first=False (the default) runs the same ops on the real (L, B, E)
    firsts = {bool(lay.self_attn.batch_first) for lay in layers}
    if len(firsts) != 1 or x.dmap != ((0, 1, 2) if firsts == {True} else (1, 0, 2)):
        return None
    if _arg(fxn, 1, "mask") is not None or _arg(fxn, 2, "src_key_padding_mask") is not None:
        st.warnings.append(f"{path}: attention masks are not modelled")

    def add(t, props, ins, name):
        return _single(st, fxn, t, props, ins, x.dmap, name=name)

    for i, lay in enumerate(layers):
        pre = f"{path}.layers.{i}" if isinstance(mod, nn.TransformerEncoder) else path
        act = lay.activation
        act_t = "GELU" if (act is F.gelu or isinstance(act, nn.GELU)) else "ReLU"
        sa = lay.self_attn
        mha = {"num_heads": sa.num_heads, "dropout": float(sa.dropout), "bias": sa.in_proj_bias is not None,
               "kernel": "fused", "need_weights": False, "batch_first": bool(sa.batch_first)}

        def hold(arg, until):
            # _sa_block(x) / _ff_block(x) are method calls: their argument lives until they return
            node = st.design.nodes[arg.nid]
            if not node.keep_until:
                node.keep_until = until.nid
            return until

        def sa_block(h, pre=pre, lay=lay, mha=mha):
            a = add("MultiHeadAttention", mha, [h], f"{pre}.self_attn")
            return hold(h, add("Dropout", {"p": float(lay.dropout1.p)}, [a], f"{pre}.dropout1"))

        def ff_block(h, pre=pre, lay=lay, act_t=act_t):
            f = add("Linear", {"out_features": lay.linear1.out_features, "bias": lay.linear1.bias is not None},
                    [h], f"{pre}.linear1")
            f = add(act_t, {}, [f], f"{pre}.activation")
            f = add("Dropout", {"p": float(lay.dropout.p)}, [f], f"{pre}.dropout")
            f = add("Linear", {"out_features": lay.linear2.out_features, "bias": lay.linear2.bias is not None},
                    [f], f"{pre}.linear2")
            return hold(h, add("Dropout", {"p": float(lay.dropout2.p)}, [f], f"{pre}.dropout2"))

        def norm(h, which, pre=pre, lay=lay):
            ln = getattr(lay, which)
            return add("LayerNorm", {"eps": float(ln.eps), "elementwise_affine": ln.elementwise_affine},
                       [h], f"{pre}.{which}")

        before = set(st.design.nodes)
        if lay.norm_first:
            x = add("Add", {}, [x, sa_block(norm(x, "norm1"))], f"{pre}.add")
            x1 = x
            x = add("Add", {}, [x, ff_block(norm(x, "norm2"))], f"{pre}.add_1")
            st.design.nodes[x1.nid].keep_until = x.nid  # the layer's local x, rebound by the last add
        else:
            x = norm(add("Add", {}, [x, sa_block(x)], f"{pre}.add"), "norm1")
            x = norm(add("Add", {}, [x, ff_block(x)], f"{pre}.add_1"), "norm2")
        # eval + no_grad runs the whole layer as aten._transformer_encoder_layer_fwd when PyTorch's
        # fast-path conditions hold (an odd head count, an unusual activation or unequal eps do not)
        fast = (sa.batch_first and sa.in_proj_bias is not None and sa._qkv_same_embed_dim and sa.num_heads % 2 == 0
                and (act is F.relu or act is F.gelu or isinstance(act, (nn.ReLU, nn.GELU)))
                and lay.norm1.eps == lay.norm2.eps)
        for nid in set(st.design.nodes) - before:
            node = st.design.nodes[nid]
            if pre != path:  # each layer is a module call of its own: it holds its input until it returns
                node.scope = f"{node.scope}/{pre}" if node.scope else pre
            if fast:
                node.fused = pre
    if final is not None:
        x = add("LayerNorm", {"eps": float(final.eps), "elementwise_affine": final.elementwise_affine}, [x],
                f"{path}.norm")
    return x


# -- helpers for specific ops -------------------------------------------------------------------
def _map_getitem(st, fxn, x, idx):
    if isinstance(x, Multi):
        if isinstance(idx, int) and -len(x.items) <= idx < len(x.items):
            return x.items[idx]
        return Other()
    if isinstance(x, (Other, ParamVal)) or x is None:
        return Other()
    if not isinstance(x, Val):
        return Other()
    rank = _real_rank(fxn.args[0]) or len(x.dmap)
    if not isinstance(idx, tuple):
        idx = (idx,)
    # expand an Ellipsis
    if any(i is Ellipsis for i in idx):
        k = idx.index(Ellipsis)
        fill = rank - (len(idx) - 1)
        idx = idx[:k] + (slice(None),) * fill + idx[k + 1:]
    ints = [(d, i) for d, i in enumerate(idx) if isinstance(i, int)]
    full = all(isinstance(i, slice) and i == slice(None) for d, i in enumerate(idx) if not isinstance(i, int))
    if len(ints) == 1 and full and not any(i is None for i in idx):
        d, i = ints[0]
        if x.dmap[d] == 0:
            return _generic(st, fxn, "getitem", [x], "indexes the batch dimension", saves_input=False)
        return _single(st, fxn, "Select", {"dim": x.dmap[d], "index": i}, [x], _drop_dim(x.dmap, d))
    # one basic slice along a non-batch dimension (x[:, :3], x[..., 1:]) is a view
    sl = [(d, i) for d, i in enumerate(idx) if isinstance(i, slice) and i != slice(None)]
    if not ints and len(sl) == 1 and not any(i is None for i in idx):
        d, i = sl[0]
        if x.dmap[d] != 0 and i.step in (None, 1) and all(isinstance(v, (int, type(None))) for v in (i.start, i.stop)):
            return _single(st, fxn, "Slice", {"dim": x.dmap[d], "start": i.start or 0, "end": i.stop}, [x], x.dmap)
    return _generic(st, fxn, "getitem", [x], f"index {idx!r}", saves_input=False)


def _map_add(st, fxn, args, inplace):
    a, b = args[0], args[1] if len(args) > 1 else _v(st, fxn.kwargs.get("other"))
    if isinstance(a, ParamVal) and isinstance(b, Val):
        a, b = b, a
    if isinstance(a, Val) and isinstance(b, ParamVal):
        if (tuple(b.shape) == (1,) + a.spec.shape or tuple(b.shape) == a.spec.shape) and not b.expanded \
                and getattr(_tensor_of(st, b.name), "requires_grad", False):
            out = _single(st, fxn, "PositionEmbedding", {}, [a], a.dmap, name=_pname(fxn, b.name))
            _claim(st, out.nid, "pos_embed", b.name)
            return out
        return _generic(st, fxn, "add", [a], f"adds parameter {b.name} of shape {b.shape}")
    if isinstance(a, Val) and isinstance(b, Val):
        if a.dmap != b.dmap and len(a.dmap) == len(b.dmap):
            return _generic(st, fxn, "add", [a, b], "operands laid out differently")
        return _single(st, fxn, "Add", {"inplace": bool(inplace)}, [a, b], a.dmap if len(a.dmap) >= len(b.dmap)
                       else b.dmap)
    t = a if isinstance(a, Val) else b
    if isinstance(t, Val):
        return _generic(st, fxn, "add_scalar", [t], saves_input=False)
    return Other()


def _pname(fxn, pname):
    return pname


def _map_mul(st, fxn, args, div):
    a = args[0]
    b = args[1] if len(args) > 1 else _v(st, fxn.kwargs.get("other"))
    if not div and isinstance(b, Val) and isinstance(a, (int, float)):
        a, b = b, a
    if isinstance(a, Val) and isinstance(b, (int, float)) and not isinstance(b, bool):
        f = 1.0 / b if div else float(b)
        return _same(st, fxn, "Scale", {"factor": f}, a)
    if isinstance(a, Val) and isinstance(b, Val):
        if div:
            return _generic(st, fxn, "div", [a, b])
        return _single(st, fxn, "Multiply", {}, [a, b], a.dmap if len(a.dmap) >= len(b.dmap) else b.dmap)
    ins = [v for v in (a, b) if isinstance(v, Val)]
    if ins:
        return _generic(st, fxn, "div" if div else "mul", ins)
    return Other()


def _map_matmul(st, fxn, args):
    a, b = args[0], args[1]
    if not (isinstance(a, Val) and isinstance(b, Val)):
        return _generic(st, fxn, "matmul", [v for v in (a, b) if isinstance(v, Val)])
    ra, rb = len(a.dmap), len(b.dmap)
    if ra != rb or ra < 3:
        return _generic(st, fxn, "matmul", [a, b], "operands of different rank")
    # the real matrix dims must be the design's last two dims, in order
    for v, _r in ((a, ra), (b, rb)):
        if v.dmap[-2:] != (v.drank - 2, v.drank - 1):
            return _generic(st, fxn, "matmul", [a, b], "matrix dims are not the last two")
    return _single(st, fxn, "MatMul", {}, [a, b], a.dmap)


def _map_cat(st, fxn):
    tensors = _arg(fxn, 0, "tensors")
    d = int(_arg(fxn, 1, "dim", 0))
    vals = [_v(st, t) for t in tensors]
    params = [v for v in vals if isinstance(v, ParamVal)]
    tens = [v for v in vals if isinstance(v, Val)]
    if params and len(tens) == 1 and len(params) == 1 and isinstance(vals[0], ParamVal):
        p, x = params[0], tens[0]
        rank = len(x.dmap)
        if rank == 3 and d % rank == 1 and x.identity and len(p.shape) == 3 and p.shape[0] == 1:
            out = _single(st, fxn, "ClassToken", {"tokens": int(p.shape[1])}, [x], name=p.name)
            _claim(st, out.nid, "cls_token", p.name)
            return out
    if params or len(tens) != len(vals):
        return _generic(st, fxn, "cat", tens, "concatenates parameters or constants")
    if len(tens) == 1:  # torch.cat of one tensor still allocates a copy
        return _single(st, fxn, "Contiguous", {"always_copy": True}, tens, tens[0].dmap)
    if any(t.dmap != tens[0].dmap for t in tens):
        return _generic(st, fxn, "cat", tens, "operands laid out differently")
    rank = len(tens[0].dmap)
    return _single(st, fxn, "Concat", {"dim": tens[0].ddim(d, rank)}, tens, tens[0].dmap)


def _reshape_to(st, fxn, x, per_sample, name=None):
    return _single(st, fxn, "Reshape", {"shape": tuple(per_sample) or (1,)}, [x], name=name)


def _reshape_like(st, fxn, x):
    """contiguous(): a copy only when the input is not contiguous; modelled as a same-shape Reshape
    in the design's layout (a view when contiguous, a copy otherwise)."""
    return _single(st, fxn, "Reshape", {"shape": x.spec.shape}, [x], x.dmap)


def _map_reshape(st, fxn, x):
    tm = _tmeta(fxn)
    if tm is None:
        return _generic(st, fxn, "reshape", [x])
    shape = tm[0]
    if x.dmap[0] != 0 or not shape or shape[0] != META_BATCH:
        return _generic(st, fxn, "reshape", [x], "merges or moves the batch dimension", saves_input=False)
    if not x.identity:
        # the real tensor's layout differs from the design's: the real reshape copies exactly
        # when the design's would not be contiguous in the real order; keep the design's reshape
        pass
    per = shape[1:]
    if not per:
        return _generic(st, fxn, "reshape", [x], "to a scalar per sample", saves_input=False)
    return _reshape_to(st, fxn, x, per)


def _map_flatten(st, fxn, x, s, e, rank):
    s %= rank
    e %= rank
    if s == 0:
        return _generic(st, fxn, "flatten", [x], "flattens the batch dimension", saves_input=False)
    if s >= e:
        return x
    if e == rank - 1 and x.identity:
        return _single(st, fxn, "Flatten", {"start_dim": s}, [x])
    return _map_reshape(st, fxn, x)


def _map_permute(st, fxn, x, perm):
    """A real permute in the design's terms: the batch stays first; singleton dims the real tensor
    squeezed stay right after it. Identity in the design: no node, only the mapping changes."""
    rank = len(perm)
    if sorted(perm) != list(range(rank)) or len(x.dmap) != rank:
        return _generic(st, fxn, "permute", [x], "bad permutation")
    real_src_design = [x.dmap[p] for p in perm]  # design dims in the real output order
    squeezed = [d for d in range(x.drank) if d not in x.dmap]
    order = [0] + squeezed + [d for d in real_src_design if d != 0]
    new_dmap = tuple(order.index(d) for d in real_src_design)
    if order == list(range(x.drank)):
        return Val(x.nid, x.port, x.spec, new_dmap)
    swaps = [i for i in range(len(order)) if order[i] != i]
    if len(swaps) == 2 and len(order) > 2:
        return _single(st, fxn, "Transpose", {"dim0": swaps[0], "dim1": swaps[1]}, [x], new_dmap)
    return _single(st, fxn, "Permute", {"dims": tuple(order)}, [x], new_dmap)


def _map_split(st, fxn, x, name, rank):
    tm_in = _tmeta(fxn.args[0])
    if name == "unbind":
        d = int(_arg(fxn, 1, "dim", 0)) % rank
        n = tm_in[0][d]
        squeeze = True
    else:
        d = int(_arg(fxn, 2, "dim", 0)) % rank
        size = tm_in[0][d]
        a1 = _arg(fxn, 1, "chunks" if name == "chunk" else "split_size_or_sections")
        if name == "chunk":
            n = int(a1)
            if size % n:
                return Multi([_generic(st, fxn, name, [x], "uneven chunks")])
        elif isinstance(a1, int):
            if size % a1:
                return Multi([_generic(st, fxn, name, [x], "uneven split")])
            n = size // a1
        else:
            sizes = list(a1)
            if len(set(sizes)) != 1:
                st.warnings.append(f"{fxn.name}: split into unequal sizes {sizes}; imported as a Generic node")
                return Multi([_generic(st, fxn, name, [x], "unequal sizes")])
            n = len(sizes)
        squeeze = False
    dd = x.dmap[d]
    if dd == 0:
        return Multi([_generic(st, fxn, name, [x], "splits the batch dimension")])
    nid, specs = _add(st, fxn, "Split", {"chunks": n, "dim": dd}, [x])
    if squeeze:
        dmap = tuple(m for i, m in enumerate(x.dmap) if i != d)  # the design keeps a singleton dim
    else:
        dmap = x.dmap
    return Multi([Val(nid, j, specs[j], dmap) for j in range(n)])


def _map_upsample(st, fxn, x, scale, mode):
    if mode not in ("nearest", "bilinear"):
        return _generic(st, fxn, "upsample", [x], f"mode {mode!r}")
    tm = _tmeta(fxn)
    if scale is None and tm is not None:
        scale = tm[0][-1] / max(x.spec.shape[-1], 1)
    if isinstance(scale, (tuple, list)):
        if len(set(scale)) != 1:
            return _generic(st, fxn, "upsample", [x], "different scale per dim")
        scale = scale[0]
    return _single(st, fxn, "Upsample", {"scale_factor": float(scale), "mode": mode}, [x])


# ----------------------------------------------------------------------------------------------
# layout, checks
# ----------------------------------------------------------------------------------------------
def _layout(st: _State) -> None:
    rows: dict[int, int] = {}
    for nid in st.design.nodes:
        d = st.depth.get(nid, 0)
        k = rows.get(d, 0)
        rows[d] = k + 1
        st.design.nodes[nid].pos = (float(k * 220), float(d * 90))


def _check_params(st: _State) -> None:
    from memdesigner.model.analysis import analyze

    an = analyze(st.design)
    for iss in an.issues:
        st.warnings.append(f"{iss}")
    design_params = sum(p.numel for nid, info in an.nodes.items() if info.ok for p in info.params
                        if p.trainable and p.name not in st.design.nodes[nid].tied)
    real = sum(p.numel() for p in st.module.parameters())
    st.design.import_params = real
    if design_params != real:
        missing = [n for n, p in st.module.named_parameters() if n not in st.used_params]
        st.warnings.append(f"parameter count: the design has {design_params:,}, the module {real:,}"
                           + (f" (not mapped: {', '.join(missing[:8])}{'...' if len(missing) > 8 else ''})"
                              if missing else ""))


# ----------------------------------------------------------------------------------------------
# CLI glue (the lead's CLI calls these)
# ----------------------------------------------------------------------------------------------
def _parse_shape(text):
    if text is None:
        return None
    return tuple(int(p) for p in str(text).replace("x", ",").split(",") if p.strip())


def add_torch_import_parser(subparsers):
    p = subparsers.add_parser("torch", help="import a PyTorch nn.Module from FILE.py:FACTORY",
                              description="Trace FILE.py:FACTORY (an nn.Module or (module, input_shape)) "
                                          "with torch.fx and write a design file.")
    p.add_argument("target", help="FILE.py:FACTORY")
    p.add_argument("-o", "--output", required=True, help="design file to write")
    p.add_argument("--input-shape", default=None, help="per-sample input shape, e.g. 3,224,224")
    p.add_argument("--input-dtype", default=None, choices=("float", "int64"), help="float or int64 (token ids)")
    p.add_argument("--name", default=None)
    p.set_defaults(func=cli_import_torch)
    return p


def cli_import_torch(args) -> int:
    from memdesigner.io.design_file import save_design

    try:
        d = import_file(args.target, _parse_shape(getattr(args, "input_shape", None)),
                        getattr(args, "input_dtype", None), name=getattr(args, "name", None))
    except ImportError as err:
        print(f"error: {err} (memdesigner import torch needs PyTorch: pip install torch)", file=sys.stderr)
        return 2
    except (TorchImportError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for w in d.import_warnings:
        print(f"warning: {w}", file=sys.stderr)
    save_design(d, args.output)
    print(f"wrote {args.output}: {len(d.nodes)} nodes, {d.import_params:,} parameters")
    return 0


__all__ = [
    "TorchImportError",
    "add_torch_import_parser",
    "build_module",
    "cli_import_torch",
    "from_module",
    "import_file",
    "load_factory",
    "load_factory_module",
]

"""Tracing a module for the PyTorch importer: torch.fx with the patches that keep it tracing
(custom autograd Functions and factories on traced sizes as one call each), the torch.export
fallback, and shape propagation on meta tensors."""

from __future__ import annotations

import operator

from memdesigner.importers._torch_coin_flips import coin_flips_run_everything
from memdesigner.importers._torch_finfo import finfo_of_traced_dtypes
from memdesigner.importers._torch_hf_masks import eager_hf_masks
from memdesigner.importers._torch_meta_autocast import autocast_on_meta_is_off
from memdesigner.importers._torch_reparam import weight_recomputing_modules
from memdesigner.importers._torch_root_call import one_input_forward
from memdesigner.importers._torch_values import META_BATCH, TorchImportError
from memdesigner.model import registry


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


def _tracer(torch, leaves=frozenset()):
    """fx's tracer, keeping the modules a registration maps whole (a MoE block) and the named
    ``leaves`` (qualified names) as leaves."""
    import torch.fx

    whole = _whole_modules()

    class _Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return type(m).__name__ in whole or qualname in leaves or super().is_leaf_module(m, qualname)

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


def _fx_trace(torch, module, leaves=frozenset()):
    # stack traces let the mapping see the source line ("out += identity" is in place)
    tracer = _tracer(torch, leaves)
    tracer.record_stack_traces = True
    tracer.proxy_buffer_attributes = True  # self.mask[:t, :t] with a traced t
    with _custom_functions_as_calls(torch), _factories_on_traced_sizes(torch), finfo_of_traced_dtypes(torch), \
            one_input_forward(module), coin_flips_run_everything(torch):
        return tracer, tracer.trace(module)


def _moe_block(module):
    """The class name of the first sparse MoE block in ``module`` (SparseMoE's torch_ops), or None."""
    names = set(registry.get("SparseMoE").torch_ops)
    return next((type(m).__name__ for m in module.modules() if type(m).__name__ in names), None)


def _short(err) -> str:
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    return text[:160]


def _trace(torch, module, example=None):
    # rotary embeddings on meta (transformers 4.57); transformers 5's masks as eager makes them
    with autocast_on_meta_is_off(torch), eager_hf_masks():
        return _trace_either(torch, module, example)


def _trace_either(torch, module, example=None):
    import torch.fx

    try:
        tracer, graph = _fx_trace(torch, module)
        leaves = weight_recomputing_modules(module, graph)
        if leaves:
            tracer, graph = _fx_trace(torch, module, frozenset(leaves))
        return torch.fx.GraphModule(tracer.root, graph, type(module).__name__)
    except Exception as fx_err:  # noqa: BLE001 - data-dependent control flow and friends
        moe = _moe_block(module)
        if moe is not None:
            # torch.export inlines every module: a MoE block would become its routing and
            # expert ops (grouped_mm a Generic op, the router a Linear that LoRA would wrap);
            # the dispatch-level trace keeps it whole, as SparseMoE
            raise TorchImportError(f"torch.fx cannot trace {type(module).__name__} ({_short(fx_err)}) and "
                                   f"torch.export would not keep its {moe} whole") from None
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

"""The PyTorch importer's last path: a dispatch-level trace of one real forward.

torch.fx fails on Python that reads tensor values (``.item()``, ``if x.sum() > 0``, iterating a
tensor's rows) and torch.export on data-dependent guards and meta-only failures (autocast on
meta, a meta-vs-cpu device mismatch). Code that runs in eager PyTorch still runs here: the
module is called once, on fake CPU tensors (no memory) or, where fake tensors refuse (a value
read in Python, a data-dependent output size), on real CPU tensors at the import's small batch,
under a ``TorchDispatchMode`` that writes every aten op into a ``torch.fx`` graph with its
module scope (global module hooks keep the stack) and its stack trace. Simple torch.nn leaves
(Linear, Conv2d, norms, activations, pools: the modules the fx path maps whole) become one
``call_module`` node each instead of their aten ops, and a few functions (F.linear,
F.cross_entropy, F.scaled_dot_product_attention, ...) one ``call_function`` node each (a
``TorchFunctionMode`` sees them), so they map onto their registry layers;
everything else becomes aten nodes that the importer maps as it maps torch.export's, and
characterises as Generic ops where it has no rule. Values read in Python are baked in as the
run saw them: the graph is the branch that ran.
"""

from __future__ import annotations

import contextlib
import traceback

from memdesigner.importers._torch_coin_flips import coin_flips_run_everything
from memdesigner.importers._torch_values import TorchImportError
from memdesigner.model import registry

# torch.nn leaves that _torch_map_modules maps by its own logic; the modules a type's own file maps
# (registry.torch_module_index: Linear, Conv2d, norms, activations, pools, ...) are leaves too
_LEAVES = ("Flatten", "Identity")


def _leaf_functions(torch) -> set:
    """Functions kept whole, as torch.fx records them, because the importer maps them onto their
    layers (Linear, Loss, the attention rule with its backend choice) while their aten pieces
    (t + addmm, _log_softmax + nll_loss_forward, the math path's ops) would be Generic ops."""
    F = torch.nn.functional
    mapped = {getattr(F, name) for name in registry.torch_call_index() if callable(getattr(F, name, None))}
    return mapped | {F.linear, F.conv1d, F.conv2d, F.conv3d, F.layer_norm, F.embedding, F.dropout, F.softmax,
                     F.log_softmax, F.scaled_dot_product_attention, F.cross_entropy, F.mse_loss, torch.matmul}


def _is_leaf(torch, m) -> bool:
    cls = type(m)
    if cls.__module__.startswith("torch.nn.") and cls.__name__ in ("MaxPool1d", "MaxPool2d", "MaxPool3d"):
        return not m.return_indices  # (output, indices): its aten ops, as the fx path's Generic has them
    if cls.__module__.startswith("torch.nn.") and (cls.__name__ in _LEAVES
                                                   or cls.__name__ in registry.torch_module_index()):
        return True
    from memdesigner.importers._torch_trace import _whole_modules

    return cls.__name__ in _whole_modules()


def _user_stack(torch) -> str:
    """The call's user frames in fx's stack-trace format (the importer reads source lines off it:
    ``a += b`` in place, ``with torch.no_grad()``, Python locals)."""
    import os

    skip = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)), contextlib.__file__)
    frames = [f for f in traceback.extract_stack()[:-3] if not f.filename.startswith(skip)]
    return "".join(traceback.StackSummary.from_list(frames).format())


class _Graph:
    """The fx graph being written: tensors (by the Python object, held alive so that an id is
    never reused) to the node that made them."""

    def __init__(self, torch, names: dict):
        self.torch = torch
        self.graph = torch.fx.Graph()
        self.env: dict = {}  # id(tensor) -> (tensor, fx node)
        self.names = names  # id(parameter or buffer as the run sees it) -> qualified name
        self.attrs: dict = {}  # get_attr target -> the object behind it
        self.consts: list = []  # (target, tensor the run saw) for tensors the module does not own
        self.scope: list = []  # (qualified name, class name) of the module calls around the op
        self.leaf_depth = 0

    def bind(self, t, node) -> None:
        self.env[id(t)] = (t, node)
        node.meta["tensor_meta"] = _tensor_meta(self.torch, t)

    def node_of(self, t):
        hit = self.env.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        name = self.names.get(id(t))
        if name is None:
            name = f"_dispatch_const_{len(self.consts)}"
            self.consts.append((name, t))
        node = self.graph.get_attr(name)
        self.bind(t, node)
        return node

    def arg(self, a):
        torch = self.torch
        if isinstance(a, torch.Tensor):
            return self.node_of(a)
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(b) for b in a)
        if isinstance(a, dict):
            return {k: self.arg(v) for k, v in a.items()}
        return a

    def annotate(self, node) -> None:
        node.meta["nn_module_stack"] = {path: (path, cls) for path, cls in self.scope}
        node.meta["stack_trace"] = _user_stack(self.torch)

    def outputs(self, node, out) -> None:
        """Bind the op's tensor outputs: the node itself, or getitem nodes of a tuple."""
        import operator

        torch = self.torch
        if isinstance(out, torch.Tensor):
            self.bind(out, node)
            return
        if isinstance(out, (list, tuple)):
            node.meta["tensor_meta"] = tuple(_tensor_meta(torch, o) if isinstance(o, torch.Tensor) else None
                                             for o in out)  # as ShapeProp leaves a tuple's
            for i, o in enumerate(out):
                if isinstance(o, torch.Tensor):
                    g = self.graph.call_function(operator.getitem, (node, i))
                    g.meta.update(node.meta)
                    self.bind(o, g)


def _tensor_meta(torch, t):
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    try:
        return _extract_tensor_metadata(t)
    except Exception:  # noqa: BLE001 - a tensor without strides (sparse, nested): no meta
        return None


def _has_tensor(torch, out) -> bool:
    from torch.utils._pytree import tree_leaves

    return any(isinstance(t, torch.Tensor) for t in tree_leaves(out))


def _recorder(torch, g: _Graph):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        """Writes each aten op that returns a tensor; ops that return Python values
        (``_local_scalar_dense``: ``.item()``, ``bool(x)``) leave their value baked into the
        later ops' arguments."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if g.leaf_depth or not _has_tensor(torch, out):
                return out
            node = g.graph.call_function(func, g.arg(tuple(args)), g.arg(kwargs))
            g.annotate(node)
            if isinstance(out, torch.Tensor):
                _note_alias(torch, g, node, out, (args, kwargs))
            g.outputs(node, out)
            return out

    return Recorder()


def _note_alias(torch, g: _Graph, node, out, args) -> None:
    """The argument whose storage the output shares (a view, an in-place op), as the run saw it:
    the fallback for ops the characterisation cannot run again (after a data-dependent size)."""
    from torch.utils._pytree import tree_leaves

    from memdesigner.importers._torch_characterise import _sid

    sid = _sid(out)
    for t in tree_leaves(args):
        if isinstance(t, torch.Tensor) and _sid(t) == sid:
            node.meta["dispatch_alias"] = g.node_of(t)
            return


def apply_recorded_aliases(st) -> None:
    """A Generic op the characterisation could not run again keeps the untraced rule (a new
    output), except where the run saw its output share an input's storage: then it is that
    input's view (``result[idx] = roi_align(...)`` in a detector's RoI pooling is one buffer
    filled level by level, not a new copy per level)."""
    for fxn, (nid, in_nodes) in st.generic_fx.items():
        node = st.design.nodes.get(nid)
        a = fxn.meta.get("dispatch_alias")
        if node is None or node.props.get("traced") or a is None or a not in in_nodes:
            continue
        i = in_nodes.index(a)
        saved = ",".join(str(k) for k in range(len(in_nodes))) if node.props.get("saves_input", True) else ""
        node.props.update(traced=True, alias_input=i, eval_alias_input=i, saved_inputs=saved)


def _function_recorder(torch, g: _Graph):
    from torch.overrides import TorchFunctionMode

    leaves = _leaf_functions(torch)

    class Functions(TorchFunctionMode):
        """A leaf function's call becomes one call_function node (its aten ops are not written)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func not in leaves or g.leaf_depth:
                return func(*args, **kwargs)
            g.leaf_depth += 1
            try:
                out = func(*args, **kwargs)
            finally:
                g.leaf_depth -= 1
            if isinstance(out, torch.Tensor):
                node = g.graph.call_function(func, g.arg(tuple(args)), g.arg(kwargs))
                g.annotate(node)
                g.outputs(node, out)
            return out

    return Functions()


@contextlib.contextmanager
def _module_hooks(torch, g: _Graph, modules: dict):
    """Keep the stack of module calls; a leaf module's call becomes one call_module node."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    entered: list = []  # per call: "leaf" (its input's node), "scope" or None

    def pre(m, inputs):
        name = modules.get(id(m))
        if name is None or g.leaf_depth:
            entered.append(None)
            return
        if name and _is_leaf(torch, m) and len(inputs) == 1 and isinstance(inputs[0], torch.Tensor):
            x = g.node_of(inputs[0])
            g.leaf_depth += 1
            entered.append(("leaf", name, x))
            return
        if name:
            g.scope.append((name, f"{type(m).__module__}.{type(m).__qualname__}"))
        entered.append(("scope", name, None))

    def post(m, inputs, output):
        e = entered.pop() if entered else None
        if e is None:
            return None
        kind, name, x = e
        if kind == "scope":
            if name:
                g.scope.pop()
            return None
        g.leaf_depth -= 1
        tensors = isinstance(output, torch.Tensor) or (
            isinstance(output, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in output))
        if not tensors:
            raise TorchImportError(f"{name}: a leaf module returned {type(output).__name__}")
        node = g.graph.call_module(name, (x,))
        g.scope.append((name, f"{type(m).__module__}.{type(m).__qualname__}"))
        g.annotate(node)
        g.scope.pop()
        g.attrs[name] = m
        g.outputs(node, output)  # a tuple (a MoE block's hidden states and router logits): getitem nodes
        return None

    h1 = register_module_forward_pre_hook(pre)
    h2 = register_module_forward_hook(post)
    try:
        yield
    finally:
        h1.remove()
        h2.remove()


def _record(torch, module, x, run_module, swap: dict):
    """Run ``run_module(x)`` under the recorder. ``swap``: {qualified name: the tensor the run
    uses for that parameter or buffer} (a fake one, or the module's own)."""
    names: dict = {}
    for name, t in swap.items():
        names.setdefault(id(t), name)
    g = _Graph(torch, names)
    placeholder = g.graph.placeholder("x")
    g.bind(x, placeholder)
    modules = {id(m): n for n, m in run_module.named_modules(remove_duplicate=False)}
    with torch.enable_grad(), _module_hooks(torch, g, modules), _recorder(torch, g), \
            _function_recorder(torch, g), coin_flips_run_everything(torch):
        out = run_module(x)
    from torch.utils._pytree import tree_leaves

    results = tuple(g.node_of(t) for t in tree_leaves(out) if isinstance(t, torch.Tensor))
    if not results:
        raise TorchImportError(f"{type(module).__name__}.forward returns no tensor")
    g.graph.output(results[0] if len(results) == 1 else results)
    return g


def _graph_module(torch, module, g: _Graph, params: dict):
    """The recorded graph over the module's own parameters (get_attr targets by name) and leaf
    modules; tensors it does not own become CPU constants of their shape."""
    root: dict = {}
    for n in g.graph.nodes:
        if n.op == "get_attr" and n.target in params:
            root[n.target] = params[n.target]
        elif n.op == "call_module":
            root[n.target] = module.get_submodule(n.target)
    for name, t in g.consts:
        if t.device.type == "cpu" and not _is_fake(torch, t):
            root[name] = t.detach()
        else:
            root[name] = torch.zeros(t.shape, dtype=t.dtype)
    # ops whose results only Python read (``.item()``'s sum, a branch's comparison) and the
    # detach autograd makes of each output it saves reach no output: they go (in-place ops stay)
    gm = torch.fx.GraphModule(root, g.graph, type(module).__name__)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _is_fake(torch, t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _fake_record(torch, module, shape, dtype, vocab):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.utils.stateless import _reparametrize_module

    named = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    with FakeTensorMode(allow_non_fake_inputs=True):
        memo, swap = {}, {}
        for name, t in named:
            if id(t) not in memo:
                memo[id(t)] = torch.empty(t.shape, dtype=t.dtype, device="cpu",
                                          requires_grad=bool(t.requires_grad and t.is_floating_point()))
            swap[name] = memo[id(t)]
        x = _input(torch, shape, dtype, vocab, "cpu")
        with _reparametrize_module(module, swap), torch.device("cpu"):
            return _record(torch, module, x, module, swap)


def _real_record(torch, module, real, shape, dtype, vocab):
    torch.manual_seed(0)
    x = _input(torch, shape, dtype, vocab, "cpu")
    swap = dict(real.named_parameters(remove_duplicate=False))
    swap.update(real.named_buffers(remove_duplicate=False))
    with torch.device("cpu"):
        return _record(torch, module, x, real, swap)


def _input(torch, shape, dtype, vocab, device):
    if dtype == "int64":
        return torch.randint(0, max(int(vocab), 1), shape, dtype=torch.int64, device=device)
    return torch.randn(shape, dtype=torch.float32, device=device)


def _real_copy(torch, module):
    """A CPU module to run for real: the module itself, or (built on meta) a copy with fresh
    random weights: ``reset_parameters`` where a module has it, a small normal draw elsewhere;
    floating buffers are ones (a frozen batch norm's running variance drawn around 0 would give
    NaNs)."""
    import copy

    if not any(t.device.type == "meta" for t in list(module.parameters()) + list(module.buffers())):
        return module
    real = copy.deepcopy(module).to_empty(device="cpu")
    torch.manual_seed(0)
    with torch.no_grad():
        for t in real.parameters():
            t.normal_(0.0, 0.02) if t.is_floating_point() else t.zero_()
        for t in real.buffers():
            t.fill_(1.0) if t.is_floating_point() else t.zero_()
        for m in real.modules():
            for reset in ("reset_parameters", "reset_running_stats"):
                fn = getattr(m, reset, None)
                if callable(fn):
                    with contextlib.suppress(Exception):
                        fn()
    return real


def dispatch_graph_module(torch, module, input_shape, input_dtype, vocab, batch, rebuild=None):
    """(GraphModule with tensor_meta on its nodes, how it ran: "fake tensors" or "real CPU
    tensors ..."). ``rebuild`` (optional) builds the module again on the CPU with real weights,
    for the real run. A module whose training forward fails (a detector without targets) is run
    in eval mode, as it runs at all."""
    shape = (int(batch), *input_shape)
    params = dict(module.named_parameters(remove_duplicate=False))
    params.update(module.named_buffers(remove_duplicate=False))
    try:
        g, how = _run_once(torch, module, shape, input_dtype, vocab, batch, rebuild, train=module.training)
    except TorchImportError as train_err:
        if not module.training:
            raise
        try:
            g, how = _run_once(torch, module, shape, input_dtype, vocab, batch, rebuild, train=False)
        except TorchImportError:
            raise train_err from None
        how += f", in eval mode (in training mode {train_err})"
    return _graph_module(torch, module, g, params), how


def _run_once(torch, module, shape, input_dtype, vocab, batch, rebuild, train: bool):
    was = module.training
    module.train(train)
    try:
        try:
            return _fake_record(torch, module, shape, input_dtype, vocab), "fake tensors"
        except Exception as fake_err:  # noqa: BLE001 - a value read in Python, a data-dependent size
            try:
                real = rebuild() if rebuild is not None else _real_copy(torch, module)
                real.train(train)
                g = _real_record(torch, module, real, shape, input_dtype, vocab)
            except Exception as real_err:  # noqa: BLE001 - the forward does not run: say both
                raise TorchImportError(f"the forward does not run on fake tensors ({_short(fake_err)}) nor on "
                                       f"the CPU ({_short(real_err)})") from None
            return g, f"real CPU tensors at batch {batch} (fake tensors: {_short(fake_err)})"
    finally:
        module.train(was)


@contextlib.contextmanager
def quiet_meta_failures():
    """While the recorded graph runs again (characterising its Generic ops at another batch size,
    where its baked sizes fail as expected), FakeTensorMode's logger would print each failing
    kernel's traceback to stderr."""
    import logging

    log = logging.getLogger("torch._subclasses.fake_tensor")
    was = log.disabled
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = was


def _short(err) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text[:160]

"""Ops without a registry rule, characterised by PyTorch itself rather than guessed.

After the import mapped what it knows, the traced graph runs once more on meta (or fake)
tensors, with autograd recording, at two batch sizes. Around every op that became a Generic node,
``torch.autograd.graph.saved_tensors_hooks`` lists the tensors autograd saves for its backward:
an input (by storage), the op's output, a parameter (free: it is alive anyway) or a new tensor
(its bytes, split into a per-sample and a fixed part from the two batch sizes). Whether the
output shares an input's storage (a view) and whether its size depends on the batch at all
(``torch.arange``, a causal mask) are read off the same runs. The result is stored on the node
as props (``traced``), so later estimates need no torch.
"""

from __future__ import annotations

import contextlib


def _sid(t):
    try:
        return t.untyped_storage()._cdata
    except Exception:  # noqa: BLE001 - sparse, nested, ...: no storage identity
        return id(t)


def _of_param(t) -> bool:
    """A parameter or a view of one (``weight.reshape(...)`` inside a module): alive anyway."""
    base = t._base if t._base is not None else t
    return base.is_leaf and base.requires_grad


def _storage_bytes(t) -> int:
    try:
        return t.untyped_storage().nbytes()
    except Exception:  # noqa: BLE001 - no storage identity: the tensor's own elements
        return t.numel() * t.element_size()


def _live_bytes_mode(torch):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class LiveBytes(TorchDispatchMode):
        """The storages the ops inside one call create, and the peak of those alive at once
        (a storage dies with the last tensor on it: weak references tell)."""

        def __init__(self, torch, known):
            super().__init__()
            self.torch = torch
            self.known = {_sid(t) for t in known}
            self.refs: list = []  # (sid, bytes, weakref to a tensor on it)
            self.peak = 0

        def now(self) -> int:
            alive = {}
            for sid, b, r in self.refs:
                if r() is not None:
                    alive[sid] = b
            return sum(alive.values())

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            import weakref

            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, self.torch.Tensor):
                    sid = _sid(t)
                    if sid not in self.known and not _of_param(t):
                        try:
                            nb = t.untyped_storage().nbytes()
                        except Exception:  # noqa: BLE001
                            nb = t.numel() * t.element_size()
                        self.refs.append((sid, nb, weakref.ref(t)))
            self.peak = max(self.peak, self.now())
            return out

    return LiveBytes


_LIVE = None


def _LiveBytes(torch, known):  # noqa: N802 - a class built on first use (torch is imported lazily)
    global _LIVE
    if _LIVE is None:
        _LIVE = _live_bytes_mode(torch)
    return _LIVE(torch, known)


_EVAL_ARGS = {"dropout_p": 0.0, "training": False, "train": False}


def _arg_names(target) -> list:
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return [a.name for a in schema.arguments]
    import inspect

    try:
        return list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        pass
    try:  # a torch builtin (F.scaled_dot_product_attention): the aten op of that name
        import torch

        return [a.name for a in getattr(torch.ops.aten, target.__name__).default._schema.arguments]
    except Exception:  # noqa: BLE001
        return []


def _as_in_eval(n, args, kwargs):
    """The call as module.eval() would make it: torch.fx baked ``self.training`` into constants
    (F.dropout(x, p, True), sdpa(..., dropout_p=0.1), stochastic_depth(..., training=True))."""
    if n.op != "call_function":
        return args, kwargs
    names = _arg_names(n.target)
    args = list(args)
    kwargs = dict(kwargs)
    for i, name in enumerate(names):
        if name in _EVAL_ARGS:
            if i < len(args):
                args[i] = _EVAL_ARGS[name]
            elif name in kwargs:
                kwargs[name] = _EVAL_ARGS[name]
    return tuple(args), kwargs


def _run(torch, gm, x, targets: set, evaluate: bool = False) -> dict:
    """{fx node: (input tensors by fx node, output, saved tensors)} for the nodes in targets."""
    from torch.fx import Interpreter

    rec: dict = {}

    class _Rec(Interpreter):
        def run_node(self, n):
            if n not in targets:
                return super().run_node(n)
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            if evaluate:
                args, kwargs = _as_in_eval(n, args, kwargs)
            saved: list = []

            def pack(t):
                saved.append(t)
                return t

            # parameters and buffers are alive anyway: below autograd a view of one (weight.reshape
            # in a module that standardises its weight) has no ``_base`` to tell
            mod = self.fetch_attr(n.target) if n.op == "call_module" else None
            own = [*mod.parameters(), *mod.buffers()] if mod is not None else []
            live = _LiveBytes(torch, [v for v in self.env.values() if isinstance(v, torch.Tensor)] + own)
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), live:
                out = getattr(self, n.op)(n.target, args, kwargs)
            ins = {a: self.env[a] for a in n.all_input_nodes if a in self.env}
            bwd = None if evaluate else _backward_transient(
                torch, lambda: getattr(self, n.op)(n.target, args, kwargs), ins, self.env)
            rec[n] = (ins, out, saved, max(live.peak - live.now(), 0), bwd)
            return out

    was = gm.training
    try:
        _set_mode(gm, not evaluate)
        with torch.set_grad_enabled(not evaluate):
            _Rec(gm).run(x)
    finally:
        _set_mode(gm, was)
    return rec


def _backward_transient(torch, call, ins, env) -> int:
    """What the op's backward holds beyond the gradients it returns, for an op that is a whole
    call (a function fx keeps whole: torchvision's shifted_window_attention): autograd runs the
    backward of every op inside it, whose intermediate gradients live and die there while the
    tensors they saved are released one by one. The call runs once more here (its graph only),
    then its backward with a ones seed held all along (as the engine holds the incoming gradient
    to the op's end), under the live-bytes mode: the backward's peak above what was alive when it
    began, less the gradients it returns (the engine makes those itself)."""
    need = [v for v in ins.values() if isinstance(v, torch.Tensor) and v.requires_grad]
    if not need:
        return None
    live = _LiveBytes(torch, [v for v in env.values() if isinstance(v, torch.Tensor)])
    try:
        with live:
            out = call()
        if not isinstance(out, torch.Tensor) or not out.requires_grad or not _composite(torch, out, need):
            return None
        # the incoming gradient is made inside the backward (MulBackward0 of out * ones), so
        # that autograd drops it once the first op inside has read it, as it does in a real run
        loss = (out * torch.ones_like(out)).sum()
        seed = torch.ones_like(loss)
        with live:
            live.peak = before = live.now()
            grads = torch.autograd.grad(loss, need, seed, allow_unused=True)
    except Exception:  # noqa: BLE001 - a backward that cannot run on these tensors: no figure
        return None
    returned = {_sid(g): _storage_bytes(g) for g in grads if isinstance(g, torch.Tensor)}
    # the engine holds the incoming gradient (out's shape, dense) and makes the returned ones itself
    return live.peak - before - sum(returned.values()) - out.numel() * out.element_size()


def _composite(torch, out, need) -> bool:
    """Whether the call's backward is more than one op's: its forward recorded several autograd
    nodes, or one whose backward is Python code (a custom Function). One aten op's backward is one
    kernel whose transients the op's own rule covers."""
    from torch.autograd.function import BackwardCFunction

    stop = {t.grad_fn for t in need if t.grad_fn is not None}
    seen, todo = set(), [out.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in stop or fn in seen or type(fn).__name__ == "AccumulateGrad":
            continue
        seen.add(fn)
        if isinstance(fn, BackwardCFunction) or len(seen) > 1:
            return True
        todo.extend(f for f, _ in fn.next_functions)
    return False


def _set_mode(gm, train: bool) -> None:
    try:
        gm.train(train)
    except NotImplementedError:  # torch.export's module: the mode is baked into its ops
        pass


def _meta_to_cpu(torch, gm) -> None:
    """A graph traced on the meta device names it in factory calls (torch.ones(..., device=meta)):
    point those at the CPU, where the fake run happens. The subgraphs of higher-order ops too
    (transformers 4.57 builds its causal mask under torch.vmap: torch.export keeps that as a
    flat_apply of a submodule whose arange(..., device=meta) met CPU tensors: "Tensor device
    mismatch! Expected: meta, Got: cpu", and no Generic op was characterised)."""
    for sub in list(gm.modules()):
        if isinstance(sub, torch.fx.GraphModule):
            _graph_meta_to_cpu(torch, sub)


def _graph_meta_to_cpu(torch, gm) -> None:
    meta = torch.device("meta")

    def fix(a):
        if isinstance(a, torch.device) and a == meta:
            return torch.device("cpu")
        if isinstance(a, str) and a == "meta":
            return "cpu"
        if isinstance(a, (list, tuple)):
            return type(a)(fix(x) for x in a)
        return a

    changed = False
    for n in gm.graph.nodes:
        args, kwargs = fix(n.args), {k: fix(v) for k, v in n.kwargs.items()}
        if args != n.args or kwargs != n.kwargs:
            n.args, n.kwargs = args, kwargs
            changed = True
    if changed:
        gm.recompile()


def _meta_run(torch, gm, x_of_batch, b, targets, evaluate=False):
    return _run(torch, gm, x_of_batch(b, "meta"), targets, evaluate)


def _fake_cpu_run(torch, gm, x_of_batch, b, targets, evaluate=False):
    """Run on fake CPU tensors (no memory): kernels are chosen as on the real CPU (a meta tensor
    would take other paths, e.g. scaled_dot_product_attention's math path)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.utils.stateless import _reparametrize_module

    _meta_to_cpu(torch, gm)
    with FakeTensorMode(allow_non_fake_inputs=True):
        memo, swap = {}, {}
        for name, t in list(gm.named_parameters(remove_duplicate=False)) + \
                list(gm.named_buffers(remove_duplicate=False)):
            if id(t) not in memo:
                memo[id(t)] = torch.empty(t.shape, dtype=t.dtype, device="cpu",
                                          requires_grad=bool(t.requires_grad and t.is_floating_point()))
            swap[name] = memo[id(t)]
        x = x_of_batch(b, "cpu")
        with _reparametrize_module(gm, swap), _meta_constants_on_cpu(torch, gm):
            return _run(torch, gm, x, targets, evaluate)


@contextlib.contextmanager
def _meta_constants_on_cpu(torch, gm):
    """Tensor constants torch.export lifted onto the graph (Gemma's ``torch.tensor(hidden **
    0.5)`` built on meta) are neither parameters nor buffers: swapped for CPU fake tensors too,
    else the fake run met a meta tensor ("found at least two devices, cpu and meta") and no
    Generic op of the model was characterised (a 4.57 Gemma: SGD +14 %)."""
    params = {id(t) for t in gm.parameters()} | {id(t) for t in gm.buffers()}
    saved = []
    for n in gm.graph.nodes:
        if n.op != "get_attr":
            continue
        path, _, attr = str(n.target).rpartition(".")
        try:
            owner = gm.get_submodule(path) if path else gm
        except AttributeError:
            continue
        t = getattr(owner, attr, None)
        if isinstance(t, torch.Tensor) and id(t) not in params and t.device.type == "meta":
            saved.append((owner, attr, t))
            owner.__dict__[attr] = torch.empty(t.shape, dtype=t.dtype, device="cpu")
    try:
        yield
    finally:
        for owner, attr, t in saved:
            owner.__dict__[attr] = t


def characterise(torch, gm, x_of_batch, targets: dict) -> dict:
    """``targets``: {fx node: [fx input node of each design input, in order]}. Returns
    {fx node: props} for the nodes PyTorch could run; {} when the graph cannot run again."""
    if not targets:
        return {}
    train = _runs(torch, gm, x_of_batch, set(targets), False)
    if train is None:
        return {}
    ev = _runs(torch, gm, x_of_batch, set(targets), True)
    out = {}
    for n, in_nodes in targets.items():
        props = _describe_runs(torch, n, in_nodes, train)
        if props is None:
            continue
        e = _describe_runs(torch, n, in_nodes, ev) if ev is not None else None
        # module.eval() under no_grad: a view there (stochastic depth), and its own transients
        props["eval_alias_input"] = e["alias_input"] if e else props["alias_input"]
        # and its output's layout there (SDPA with dropout_p baked in: the math path's contiguous
        # output in training, the flash kernel's (B, T, H, D) memory in eval)
        props["eval_out_strides"] = e["out_strides"] if e else props["out_strides"]
        src = e if e else props
        props["eval_temp_bytes_per_sample"] = src["temp_bytes_per_sample"] + (0 if e else src["saved_bytes_per_sample"])
        props["eval_temp_bytes_fixed"] = src["temp_bytes_fixed"] + (0 if e else src["saved_bytes_fixed"])
        out[n] = props
    return out


def _runs(torch, gm, x_of_batch, targets, evaluate):
    runs = {}
    for b in (2, 3):
        try:
            try:
                runs[b] = _fake_cpu_run(torch, gm, x_of_batch, b, targets, evaluate)
            except Exception:  # noqa: BLE001 - fake tensors refused: meta tensors (other kernels)
                runs[b] = _meta_run(torch, gm, x_of_batch, b, targets, evaluate)
        except Exception:  # noqa: BLE001 - data-dependent graphs; torch.export bakes the batch in
            if b == 2:
                return None
            runs[3] = None  # one batch size only: a tensor whose first dim is the batch scales with it
    return runs


def _describe_runs(torch, n, in_nodes, runs):
    r2 = runs[2].get(n)
    r3 = runs[3].get(n) if runs[3] is not None else _scaled(torch, r2)
    if r2 is None or r3 is None:
        return None
    return _describe(torch, in_nodes, r2, r3)


def _scaled(torch, r2):
    """What batch 3 would give, when only batch 2 could run: tensors led by a dim of 2 scale."""
    if r2 is None:
        return None

    def grow(t):
        if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == 2:
            return torch.empty((3, *t.shape[1:]), dtype=t.dtype, device="meta")
        return t

    ins, out, saved, temp, bwd = r2
    k = 3 if grow(out) is not out else 2
    return ins, grow(out), [grow(t) for t in saved], temp * k // 2, None if bwd is None else bwd * k // 2


def _fixed_temp(temp2: int, temp3: int) -> int:
    """The batch-free part of a transient seen at batch 2 and 3. A transient does not shrink as
    the batch grows: a smaller one at batch 3 means batch 2's also held a storage that was not
    the op's (a weak reference not yet cleared), so batch 3's is the fixed part."""
    if temp3 < temp2:
        return temp3
    return max(temp2 - 2 * (temp3 - temp2), 0)


def _describe(torch, in_nodes, r2, r3):
    ins2, out2, saved2, temp2, bwd2 = r2
    _, out3, saved3, temp3, bwd3 = r3
    if not isinstance(out2, torch.Tensor) or not isinstance(out3, torch.Tensor):
        return None
    in_sids = [(_sid(ins2[a]) if isinstance(ins2.get(a), torch.Tensor) else None) for a in in_nodes]
    out_sid = _sid(out2)
    # the op's other arguments (parameters, buffers: get_attr values) are alive anyway
    arg_sids = {_sid(v) for v in ins2.values() if isinstance(v, torch.Tensor)}
    saved_inputs, per, fixed = [], 0, 0
    counted: set = set()
    for k, t in enumerate(saved2):
        if not isinstance(t, torch.Tensor):
            continue
        s = _sid(t)
        if s in in_sids:
            i = in_sids.index(s)
            if i not in saved_inputs:
                saved_inputs.append(i)
        elif s == out_sid:
            if -1 not in saved_inputs:
                saved_inputs.append(-1)  # the output itself
        elif _of_param(t) or s in arg_sids:
            continue  # a parameter (or a view of one): alive anyway
        elif s not in counted:
            # memory is per storage: one kept by several ops (softmax's output saved by it and by
            # the product after it) or behind several saved views (q, k, v of one qkv) is one block
            counted.add(s)
            b2 = _storage_bytes(t)
            t3 = saved3[k] if k < len(saved3) and isinstance(saved3[k], torch.Tensor) else t
            b3 = _storage_bytes(t3)
            per += b3 - b2
            fixed += b2 - 2 * (b3 - b2)
    alias = in_sids.index(out_sid) if out_sid in in_sids else -1
    strides = ()
    # flash attention writes (B, L, H, D) behind a (B, H, L, D) view; an expand is a view with
    # stride 0 (repeat_kv's k[:, :, None].expand(...)), which the reshape after it must copy
    if not out2.is_contiguous():
        strides = tuple(int(x) for x in out2.stride())
    return {"out_strides": strides, "temp_bytes_per_sample": max(temp3 - temp2, 0),
            "temp_bytes_fixed": _fixed_temp(temp2, temp3), "traced": True, "saved_inputs": ",".join(str(i) for i in saved_inputs),
            "saved_bytes_per_sample": max(per, 0), "saved_bytes_fixed": max(fixed, 0),
            # a + b * batch may be negative at batch 1 (a fixed-size weight gradient among them)
            "bwd_traced": bwd2 is not None and bwd3 is not None,
            "bwd_temp_bytes_per_sample": bwd3 - bwd2 if bwd2 is not None and bwd3 is not None else 0,
            "bwd_temp_bytes_fixed": bwd2 - 2 * (bwd3 - bwd2) if bwd2 is not None and bwd3 is not None else 0,
            "alias_input": alias, "batch_free": out2.numel() == out3.numel()}

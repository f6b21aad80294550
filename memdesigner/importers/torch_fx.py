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

This module builds the design; its parts live beside it: _torch_factory (loading the factory),
_torch_trace (tracing, shapes), _torch_values (what the graph carries), _torch_nodes (adding
nodes), _torch_map_ops / _torch_map_modules (ops and module calls onto layers), _torch_locals
(Python's references: keep_until).
"""

from __future__ import annotations

from memdesigner.importers._torch_factory import (
    _all_on_meta,
    _check_shape,
    build_module,
    load_factory,
    load_factory_module,
)
from memdesigner.importers._torch_frozen import mark_frozen
from memdesigner.importers._torch_held import drop_unbound
from memdesigner.importers._torch_locals import _python_locals
from memdesigner.importers._torch_map import map_node
from memdesigner.importers._torch_no_grad import mark_no_grad
from memdesigner.importers._torch_nodes import _flat_vals, _generic, _get_attr, _op_name, _single
from memdesigner.importers._torch_param_order import param_order
from memdesigner.importers._torch_trace import (
    _feeds_embedding,
    _guess_vocab,
    _has_embedding,
    _meta_input,
    _propagate,
    _tmeta,
    _trace,
)
from memdesigner.importers._torch_values import (
    META_BATCH,
    NeedsInputShape,
    Other,
    ParamVal,
    TorchImportError,
    Val,
    _State,
)
from memdesigner.importers._torch_versions import versions_ran_under
from memdesigner.model.block_fold import fold_repeats
from memdesigner.model.design import Design
from memdesigner.model.registry import LayerError


def from_module(module, input_shape, input_dtype: str = "float", name: str | None = None,
                rebuild=None) -> Design:
    """Trace ``module`` on an input of per-sample ``input_shape`` and build a design.

    input_dtype: "float" (the run's dtype), "int64" (token ids) or "auto"/None: int64 when the
    input goes straight into an embedding (a token model traced on floats fails inside
    F.embedding), float otherwise. A module with ``truth_input = ("tokens", vocab)`` gets int64
    ids whatever input_dtype says. Where neither torch.fx nor torch.export can trace the module,
    one forward is recorded at the dispatch level (_torch_dispatch); ``rebuild`` (optional: a
    callable that builds the module again on the CPU) gives it real weights when fake tensors
    cannot run it.
    """
    import torch

    input_shape = tuple(int(d) for d in input_shape)
    _all_on_meta(torch, module)
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
    dispatched = None
    try:
        gm = _trace(torch, module, _meta_input(torch, input_shape, input_dtype, max(_guess_vocab(module), 1)))
    except TorchImportError as trace_err:
        first_dtype = input_dtype
        try:
            if not (auto and _has_embedding(torch, module)):
                raise
            input_dtype = "int64"  # torch.export ran the forward on floats: retry on token ids
            gm = _trace(torch, module, _meta_input(torch, input_shape, input_dtype, max(_guess_vocab(module), 1)))
        except TorchImportError:
            # (from the first dtype again: an embedding of learned queries, Mask2Former's, does not
            # make the input token ids, so the fallback tries floats before ids)
            gm, input_dtype, dispatched = _dispatch_fallback(torch, module, input_shape, first_dtype, auto, vocab,
                                                             rebuild, trace_err)
    if auto and input_dtype == "float" and _feeds_embedding(torch, gm):
        input_dtype = "int64"
    if not vocab and input_dtype == "int64":
        vocab = _guess_vocab(module)

    x = _meta_input(torch, input_shape, input_dtype, max(vocab, 1))
    _check_returns_tensors(torch, gm, module)
    if dispatched is None:  # (the dispatch trace recorded each node's tensor_meta as it ran)
        try:
            _propagate(torch, gm, x)
        except Exception as prop_err:  # noqa: BLE001 - a meta-only failure (.item() on meta, a device mismatch)
            gm, input_dtype, dispatched = _dispatch_fallback(
                torch, module, input_shape, input_dtype, auto, vocab, rebuild,
                TorchImportError(f"shape propagation on meta tensors: {_first_line(prop_err)}"))

    from memdesigner.importers._torch_casts import unmerge_noop_upcasts

    unmerge_noop_upcasts(torch, gm)  # (torch.export: x.to(torch.float32) was x itself)
    design = Design(name=name or type(module).__name__)
    st = _State(design, torch, module, gm=gm)
    _build(st, gm, input_shape, input_dtype, vocab)
    mark_frozen(design, module, gm, st.param_owner, st.warnings)  # requires_grad=False parameters
    mark_no_grad(design, gm, lambda f: getattr(st.vals.get(f), "nid", None), st.warnings)  # torch.no_grad()
    if dispatched is None:
        _trace_generics(st, gm, input_shape, input_dtype, max(vocab, 1))
    else:
        from memdesigner.importers._torch_dispatch import apply_recorded_aliases, quiet_meta_failures

        with quiet_meta_failures():
            _trace_generics(st, gm, input_shape, input_dtype, max(vocab, 1))
        apply_recorded_aliases(st)
    _python_locals(st, gm)
    drop_unbound(st)
    from memdesigner.importers._torch_unread import add_unread_params

    add_unread_params(st, gm)  # (fx and export too: a vision tower a text-only forward skips still holds memory)
    _layout(st)
    _check_params(st)
    if dispatched is not None:
        st.warnings.insert(0, dispatched)
    design.import_warnings = st.warnings
    design.param_order = param_order(module, st.param_owner, design.nodes)
    design.library_versions = versions_ran_under(torch)
    return fold_repeats(design)  # repeated identical children open as one block ×N


def _dispatch_fallback(torch, module, input_shape, input_dtype, auto, vocab, rebuild, trace_err):
    """(graph module, input dtype, the warning that says which path ran) from a dispatch-level
    trace; token ids where the float run fails on a model with an embedding."""
    from memdesigner.importers._torch_dispatch import dispatch_graph_module

    dtypes = [input_dtype] + (["int64"] if auto and input_dtype == "float" and _has_embedding(torch, module) else [])
    for k, dt in enumerate(dtypes):
        try:
            gm, how = dispatch_graph_module(torch, module, input_shape, dt, max(vocab or _guess_vocab(module), 1),
                                            META_BATCH, rebuild)
            break
        except TorchImportError as err:
            if k == len(dtypes) - 1:
                raise TorchImportError(f"{trace_err}; {err}") from None
    why = str(trace_err)
    if len(why) > 240:
        why = why[:240] + "..."
    return gm, dt, (f"imported through a dispatch-level trace of one forward on {how}: the graph is the "
                    f"branch that ran ({why})")


def _first_line(err) -> str:
    err = err.__cause__ or err  # ShapeProp wraps the op's own error in a page about the node
    lines = [ln for ln in str(err).splitlines() if ln.strip()]
    return (lines[-1] if lines else type(err).__name__)[:200]


def import_file(target: str, input_shape=None, input_dtype=None, name: str | None = None,
                check=False) -> Design:
    """``"FILE.py:FACTORY"``: FACTORY() returns an nn.Module or ``(module, input_shape)``.

    The module is built on the meta device, so importing a model with gigabytes of weights
    costs no memory. ``check``: also run one step of the module itself on fake tensors and keep
    what PyTorch measured beside the estimate (``design.verified``, _torch_check.py); True: at
    the defaults, or a list of Settings to check at.
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
    design = from_module(module, shape, input_dtype, name=name or factory_name,
                         rebuild=lambda: load_factory_module(target, meta=False)[0])
    if check:
        from memdesigner.importers._torch_check import check_design

        design.verified = check_design(torch, design, module, shape,
                                       rebuild=lambda: load_factory_module(target, meta=False)[0],
                                       at=None if check is True else list(check))
    return design


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
            st.vals[fxn] = map_node(st, gm, fxn)
        except LayerError as err:
            ins = [v for v in _flat_vals(st, (fxn.args, fxn.kwargs)) if isinstance(v, Val)]
            st.vals[fxn] = _generic(st, fxn, _op_name(fxn), ins, f"{err.field}: {err.message}")
        except (TypeError, ValueError, IndexError, KeyError) as err:
            # e.g. a size computed from a traced value (F.max_pool1d(c, c.shape[2])): keep the op
            # as a Generic node with its traced output rather than fail the whole import
            ins = [v for v in _flat_vals(st, (fxn.args, fxn.kwargs)) if isinstance(v, Val)]
            st.vals[fxn] = _generic(st, fxn, _op_name(fxn), ins, f"could not map: {err}")


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


__all__ = [
    "META_BATCH",
    "NeedsInputShape",
    "TorchImportError",
    "build_module",
    "from_module",
    "import_file",
    "load_factory",
    "load_factory_module",
]

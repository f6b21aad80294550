"""Design -> readable PyTorch code: an ``nn.Module`` with named submodules and a forward, plus a
``make()`` factory returning ``(module, input_shape)`` (the shape of shared/truth/zoo.py).

    from memdesigner.exporters.torch_code import to_python
    code = to_python(design)

The generated file imports torch; this module does not.
"""

from __future__ import annotations

import keyword
import math
import re
import sys

from memdesigner.model.analysis import analyze
from memdesigner.model.blocks import expand
from memdesigner.model.design import Design, is_held
from memdesigner.model.exportspec import ExportCtx
from memdesigner.text import one_line

_RESERVED = {
    "forward", "training", "train", "eval", "to", "cuda", "cpu", "float", "half", "double", "type", "apply",
    "parameters", "buffers", "children", "modules", "state_dict", "zero_grad", "register_buffer", "add_module",
    "get_submodule", "extra_repr", "named_modules", "requires_grad_", "share_memory", "bfloat16", "ipu", "xpu",
    "mps", "load_state_dict", "register_parameter", "named_parameters", "named_buffers", "named_children",
    "get_parameter", "get_buffer", "dump_patches", "call_super_init", "compile", "truth_input", "self", "x",
    "torch", "nn", "F", "make", "Model",
}


class ExportError(ValueError):
    """The design cannot be written as PyTorch (a node in error, an unknown type, a value that is
    no Python literal). The message is kept to one printable line: it names user-chosen names."""

    def __init__(self, message: str):
        super().__init__(one_line(message))


def _ident(name: str, used: set, reserved=_RESERVED) -> str:
    s = re.sub(r"[^0-9a-zA-Z_]", "_", name).strip("_") or "layer"
    if s[0].isdigit():
        s = "l" + s
    if keyword.iskeyword(s) or s in reserved:
        s = s + "_"
    base, k = s, 1
    while s in used:
        k += 1
        s = f"{base}_{k}"
    used.add(s)
    return s


def _class_name(name: str) -> str:
    parts = re.split(r"[^0-9a-zA-Z]+", name or "")
    s = "".join(p[:1].upper() + p[1:] for p in parts if p) or "Model"
    if s[0].isdigit():
        s = "M" + s
    if keyword.iskeyword(s) or s in ("Model", "make", "torch", "nn", "F"):
        s = s + "Net"
    return s


def _lit(v, where: str = "a value"):
    """``v`` as Python source that evaluates back to it, and to nothing else: only bools, ints,
    finite floats, strings (through repr, which escapes quotes, backslashes and newlines), None and
    tuples of those. Anything else (NaN and inf have no literal) is an ExportError naming ``where``."""
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(_lit(x, where) for x in v) + ("," if len(v) == 1 else "") + ")"
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ExportError(f"{where}: {v!r} is not a finite number; PyTorch code cannot hold it")
        return repr(float(v))
    if isinstance(v, str):
        return repr(str(v))
    raise ExportError(f"{where}: {type(v).__name__} value {v!r} cannot be written as PyTorch code")


def _check_class_name(name: str) -> str:
    if not (isinstance(name, str) and name.isidentifier() and name.isascii()) or keyword.iskeyword(name) \
            or name in ("make", "torch", "nn", "F"):
        raise ExportError(f"class name {name!r} is not a Python class name")
    return name


def _pair_tuple(v, n):
    if isinstance(v, (tuple, list)):
        return tuple(v) if len(v) == n else tuple(v) * n
    return (v,) * n


def _conv_padding(props, in_shape, n):
    """PyTorch padding for a SAME/VALID design (symmetric; SAME with an odd total pads one less on
    the left, which PyTorch cannot express without F.pad: we pad the larger half symmetrically)."""
    pad = props["padding"]
    if pad == "VALID":
        return 0
    if pad != "SAME":
        return pad
    import math

    k = _pair_tuple(props["kernel"], n)
    s = _pair_tuple(props.get("stride", 1) or 1, n)
    d = _pair_tuple(props.get("dilation", 1), n)
    out = []
    for i in range(n):
        o = math.ceil(in_shape[i] / s[i])
        total = max((o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in_shape[i], 0)
        out.append(total // 2 + (total % 2))
    if all(p == out[0] for p in out):
        return out[0]
    return tuple(out)


def _simplify(v):
    if isinstance(v, (tuple, list)) and len(set(v)) == 1:
        return v[0]
    return v


def _base(v: str) -> str:
    return v.split("[", 1)[0]


def _insert_dels(fwd, marks, ins, var, keep, extra_reads=None):
    """``del`` each local after its last use, so tensors die when they would in the design
    (a forward's locals otherwise stay alive until it returns)."""
    bounds = [m[0] for m in marks] + [len(fwd)]
    reads_at: dict = {}
    for k, (_start, nid) in enumerate(marks):
        for e in ins[nid]:
            reads_at[_base(var[(e.src, e.src_port)])] = k
        for name in (extra_reads or {}).get(nid, ()):
            reads_at[_base(name)] = k
    writes = {k: {_base(var[(nid, j)]) for (n2, j) in var if n2 == nid} for k, (_s, nid) in enumerate(marks)}
    dels: dict = {}
    for name, k in reads_at.items():
        if name in keep or name in writes.get(k, set()):
            continue
        dels.setdefault(k, []).append(name)
    out = []
    for k in range(len(marks)):
        out += fwd[bounds[k]:bounds[k + 1]]
        if dels.get(k):
            out.append("del " + ", ".join(sorted(dels[k])))
    return out


from memdesigner.exporters import _fused_encoder, _generic_call, _llm_export  # noqa: E402


def _generic_call_code(nid, node, p, a, refs, ranks, model_input, tensor_attr, warnings):
    """A Generic node's recorded call as code, or None (no call, or one that cannot be written:
    the caller writes the zeros placeholder, with a warning)."""
    if not p.get("call"):
        return None
    try:
        call = _generic_call.parse(p["call"])
        done = _generic_call.render(call, a, refs, ranks, model_input, lambda o, j: tensor_attr(o, j, nid), _lit)
        for spec_j in range(len(call.get("tensors") or [])):  # owned tensors exist even when unread
            tensor_attr(None, spec_j, nid)
        return done
    except (_generic_call.CallError, ExportError) as err:
        warnings.append(one_line(f"{node.name}: its recorded call cannot be written ({err})"))
        return None


def _registered_export(type_name: str):
    from memdesigner.model import registry

    return registry.get(type_name).to_torch if registry.has(type_name) else None


def _no_export_reason(type_name: str) -> str:
    from memdesigner.model import registry

    return registry.get(type_name).no_torch_export if registry.has(type_name) else ""


def _run_export(node, hook, ctx):
    from memdesigner.model.exportspec import ExportUnsupported

    try:
        return hook(ctx)
    except ExportUnsupported as err:
        raise ExportError(f"{node.id}: {node.type} has no PyTorch export here: {err}") from None


def _registration_order(init: list, design: Design, attr: dict, holders: dict) -> list:
    """``__init__``'s lines in the design's recorded parameter order (``Design.param_order``, an
    imported model's registration order): ``model.parameters()`` follows ``__init__``, and the
    CPU's for-loop Adam steps parameters in that order (engine/param_order.py), so the exported
    model keeps the peak its design estimates. Lines of layers without recorded parameters stay
    beside the line before them; lines on a submodule (tying ``self.a.w = self.b.w``, a holder's
    tensors) stay last: a child's parameters keep the child's place."""
    keys = getattr(design, "param_order", None)
    if not keys:
        return init
    by_name = {design.nodes[nid].name: nid for nid in attr}
    rank: dict = {}
    for i, k in enumerate(keys):
        parts = k.split(".")
        for cut in range(len(parts) - 1, 0, -1):  # node names and parameter names both hold dots
            nid = by_name.get(".".join(parts[:cut]))
            if nid is not None:
                rank.setdefault(nid, i)
                break
    owner = {a: nid for nid, a in attr.items()}
    owner.update({a: nid for nid, a in holders.items()})
    ranked, last = [], -1
    for j, ln in enumerate(init):
        name = ln[5:].split(" ", 1)[0] if ln.startswith("self.") else ""
        if "." in name or name.startswith("register_"):  # on a submodule: after every definition
            last = len(keys)
        else:
            last = rank.get(owner.get(name), last)
        ranked.append((last, j, ln))
    return [ln for _, _, ln in sorted(ranked)]


def to_python(design: Design, class_name: str | None = None, layers: dict | None = None) -> str:
    """The design as a Python module: ``class <Name>(nn.Module)`` and ``def make()``. ``layers``
    (a dict, filled in): module attribute -> the (expanded) design's node ids it runs, so a
    measurement can say which layer each moment of the step belongs to."""
    design = expand(design)  # blocks become the flat network they stand for
    an = analyze(design)
    bad = [i for i in an.issues]
    if bad:
        raise ExportError("the design has errors: " + "; ".join(str(i) for i in bad[:5]))
    order = an.order
    nodes = design.nodes
    ins = {nid: design.inputs_of(nid) for nid in order}
    consumers = {nid: 0 for nid in order}
    for e in design.edges:
        consumers[e.src] += 1
    used: set = set()
    attr = {nid: _ident(nodes[nid].name or nid, used) for nid in order}
    var_used: set = set()
    var: dict = {}
    init: list[str] = []
    fwd: list[str] = []
    warnings: list[str] = []
    inputs = [nid for nid in order if nodes[nid].type == "Input"]
    if not inputs:
        raise ExportError("the design has no Input node")
    input_shape = None
    token_vocab = None
    args = []

    def in_spec(nid, k=0):
        e = ins[nid][k]
        return an.nodes[e.src].outputs[e.src_port]

    def ref(nid, k=0):
        e = ins[nid][k]
        return var[(e.src, e.src_port)]

    n_edges: dict = {}
    for e in design.edges:
        n_edges[(e.src, e.src_port)] = n_edges.get((e.src, e.src_port), 0) + 1
    for nid in order:  # a Generic reading the model's input itself (x.size(1)): x keeps its name
        if nodes[nid].type == "Generic" and ('"input"' in str(nodes[nid].props.get("call", "")) or not ins[nid]):
            n_edges[(inputs[0], 0)] = n_edges.get((inputs[0], 0), 0) + 1

    def new_var(nid, port=0, base=None):
        # a chain reuses its input's name (x = self.conv(x)): the old value dies as it would in
        # hand-written code; otherwise a fresh name, deleted after its last use (see below)
        if ins[nid] and base is None:
            e = ins[nid][0]
            src_var = var[(e.src, e.src_port)]
            if n_edges.get((e.src, e.src_port)) == 1 and src_var.isidentifier() and nodes[e.src].type != "Split":
                var[(nid, port)] = src_var
                return src_var
        v = _ident((base or attr[nid]), var_used, {"self", "torch", "nn", "F"})
        var[(nid, port)] = v
        return v

    helpers: dict = {}  # helper class name -> source (registrations' exports)
    extra_reads: dict = {}  # node id -> variables it reads that are no design input (the model's input)
    tensor_names: dict = {}  # (Generic node id, j) -> attribute of the tensor its recorded call owns
    holders: dict = {}  # Generic node id -> the attribute of the nn.Module holding its tensors

    def tensor_attr(owner, j, nid_now):
        key = (owner or nid_now, j)
        if key not in tensor_names:
            own = nodes.get(key[0])
            specs = _generic_call.parse(own.props.get("call", "")).get("tensors", []) \
                if own is not None and own.type == "Generic" and key[0] in attr else []
            if not isinstance(specs, list) or not 0 <= j < len(specs):
                raise _generic_call.CallError(f"tensor {j} of {key[0]!r} does not exist")
            # a holder module per node, as the traced model had its tensors inside a submodule:
            # a root-level Parameter would come first in model.parameters() (own before children)
            holder = holders.get(key[0])
            if holder is None:
                holder = holders[key[0]] = _ident(f"{attr[key[0]]}_tensors", used)
                init.append(f"self.{holder} = nn.Module()")
            name = f"{holder}.t{j}"
            init.append(_generic_call.tensor_init(specs[j], name, _lit))
            tensor_names[key] = name
        return tensor_names[key]

    marks: list = []  # (index into fwd where the node's lines start, node id)
    fused = _fused_encoder.find(design, order, ins, _lit)  # fused TransformerEncoderLayers: one module each
    fused_rest = {m for g in fused.values() for m in g.members[1:]}
    for nid in order:
        marks.append((len(fwd), nid))
        if nid in fused_rest:
            marks.pop()  # written with the group's first node
            continue
        if nid in fused:
            g = fused[nid]
            a = _ident(nodes[nid].fused, used)
            if layers is not None:
                layers[a] = list(g.members)
            init.append(f"self.{a} = nn.TransformerEncoderLayer({an.nodes[g.src[0]].outputs[g.src[1]].shape[-1]}, "
                        f"{g.ctor})")
            v = _ident(a, var_used, {"self", "torch", "nn", "F"})
            for m in g.members:
                var[(m, 0)] = v
            fwd.append(f"{v} = self.{a}({var[g.src]})")
            continue
        node = nodes[nid]
        info = an.nodes[nid]
        p = info.props
        t = node.type

        def L(field, p=p, where=f"node {node.name!r} ({node.type})"):  # noqa: N802 - reads as a literal
            return _lit(p[field], f"{where}: {field}")
        a = attr[nid]
        out_spec = info.outputs[0] if info.outputs else None
        if t == "Input":
            v = _ident(attr[nid] if len(inputs) > 1 else "x", var_used, {"self", "torch", "nn", "F"})
            var[(nid, 0)] = v
            args.append(v)
            if input_shape is None:
                input_shape = tuple(p["shape"])
                if p["dtype"] == "int64":
                    token_vocab = max(int(p.get("vocab") or 0), 2)
            continue
        x = ref(nid) if ins[nid] else None
        xs = in_spec(nid) if ins[nid] else None
        line = None
        mod = None
        if t in ("Conv1d", "Conv2d", "Conv3d"):
            n = int(t[-2])
            pad = _conv_padding(p, xs.shape[1:], n)
            mod = (f"nn.{t}({xs.shape[0]}, {L('out_channels')}, kernel_size={L('kernel')}, "
                   f"stride={L('stride')}, padding={_lit(pad)}, dilation={L('dilation')}, "
                   f"groups={L('groups')}, bias={L('bias')})")
        elif t == "ConvTranspose2d":
            mod = (f"nn.ConvTranspose2d({xs.shape[0]}, {L('out_channels')}, kernel_size={L('kernel')}, "
                   f"stride={L('stride')}, padding={L('padding')}, "
                   f"output_padding={L('output_padding')}, groups={L('groups')}, bias={L('bias')}, "
                   f"dilation={L('dilation')})")
        elif t == "Linear":
            mod = f"nn.Linear({xs.shape[-1]}, {L('out_features')}, bias={L('bias')})"
        elif t in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d"):
            mod = (f"nn.{t}({xs.shape[0]}, eps={L('eps')}, momentum={L('momentum')}, affine={L('affine')}, "
                   f"track_running_stats={L('track_running_stats')})")
        elif t == "LayerNorm":
            ns = tuple(p["normalized_shape"]) or (xs.shape[-1],)
            mod = f"nn.LayerNorm({_lit(_simplify(ns) if len(ns) == 1 else ns)}, eps={L('eps')}, " \
                  f"elementwise_affine={L('elementwise_affine')})"
        elif t == "GroupNorm":
            mod = f"nn.GroupNorm({L('num_groups')}, {xs.shape[0]}, eps={L('eps')}, affine={L('affine')})"
        elif t == "Dropout":
            mod = f"nn.Dropout(p={L('p')}" + (", inplace=True)" if p["inplace"] else ")")
        elif t in ("ReLU", "ReLU6", "SiLU"):
            mod = f"nn.{t}(" + ("inplace=True)" if p.get("inplace") else ")")
        elif t == "LeakyReLU":
            mod = f"nn.LeakyReLU({L('negative_slope')}" + (", inplace=True)" if p.get("inplace") else ")")
        elif t == "GELU":
            mod = "nn.GELU(" + (f"approximate={L('approximate')})" if p["approximate"] != "none" else ")")
        elif t in ("Sigmoid", "Tanh"):
            mod = f"nn.{t}()"
        elif t == "Softmax":
            mod = f"nn.Softmax(dim={L('dim')})"
        elif t in ("MaxPool1d", "MaxPool2d", "AvgPool2d", "MaxPool3d", "AvgPool3d"):
            n = int(t[-2])
            pad = p["padding"]
            if pad in ("SAME", "VALID"):
                cfg = dict(p, stride=p["stride"] or p["kernel"], dilation=1)
                pad = _conv_padding(cfg, xs.shape[1:], n)
            mod = (f"nn.{t}(kernel_size={L('kernel')}, stride={_lit(p['stride'] or p['kernel'], node.name)}, "
                   f"padding={_lit(pad)}, ceil_mode={L('ceil_mode')})")
        elif t == "AdaptiveAvgPool2d":
            mod = f"nn.AdaptiveAvgPool2d({L('output_size')})"
        elif t == "Upsample":
            mod = f"nn.Upsample(scale_factor={L('scale_factor')}, mode={L('mode')})"
        elif t == "Embedding":
            mod = f"nn.Embedding({L('num_embeddings')}, {L('embedding_dim')})"
        elif t in ("LSTM", "GRU"):
            mod = (f"nn.{t}({xs.shape[-1]}, {L('hidden_size')}, num_layers={L('num_layers')}, bias={L('bias')}, "
                   f"batch_first=True, bidirectional={L('bidirectional')})")
            v = new_var(nid)
            if any(e.src == nid and e.src_port == 1 for e in design.edges):
                # h_n is used: PyTorch's is (layers * directions, batch, hidden), the design's batch first
                hv = _ident(a + "_h_n", var_used, {"self", "torch", "nn", "F"})
                fwd.append(f"{v}, {'(' + hv + ', _)' if t == 'LSTM' else hv} = self.{a}({x})")
                fwd.append(f"{hv} = {hv}.transpose(0, 1)")
                var[(nid, 1)] = hv
            else:
                fwd.append(f"{v}, _ = self.{a}({x})")
            if not p["return_sequences"]:
                fwd.append(f"{v} = {v}[:, -1]")
            init.append(f"self.{a} = {mod}")
            continue
        elif t == "MultiHeadAttention":
            init.append(f"self.{a} = nn.MultiheadAttention({xs.shape[-1]}, {L('num_heads')}, dropout={L('dropout')}, "
                        f"bias={L('bias')}, batch_first=True)")
            v = new_var(nid)
            call = f"self.{a}({x}, {x}, {x}, need_weights={L('need_weights')})"
            held = next((e.dst for e in design.edges if e.src == nid and is_held(nodes[e.dst])), None)
            if held is None:  # the weights die with the call, as the design has it
                fwd.append(f"{v} = {call}[0]")
            else:  # an imported ``a, _ = self.attn(...)``: a name holds them to the end
                w = var[(held, 0)] = _ident(attr[held], var_used, {"self", "torch", "nn", "F"})
                fwd.append(f"{v}, {w} = {call}")
            continue
        elif t == "Flatten":
            line = f"torch.flatten({x}, {L('start_dim')})"
        elif t == "Reshape":
            line = f"{x}.reshape({x}.shape[0], {', '.join(str(d) for d in out_spec.shape)})"
        elif t == "Add":
            others = [ref(nid, k) for k in range(1, len(ins[nid]))]
            if p["inplace"] and len(others) == 1:
                v = new_var(nid)
                if v != x:
                    fwd.append(f"{v} = {x}")
                fwd.append(f"{v} += {others[0]}")
                continue
            line = " + ".join([x] + others)
        elif t == "Multiply":
            line = f"{x} * {ref(nid, 1)}"
        elif t == "Concat":
            line = f"torch.cat([{', '.join(ref(nid, k) for k in range(len(ins[nid])))}], dim={L('dim')})"
        elif t == "Transpose":
            line = f"{x}.transpose({L('dim0')}, {L('dim1')})"
        elif t == "Permute":
            line = f"{x}.permute({', '.join(str(d) for d in p['dims'])})"
        elif t == "Split":
            v = _ident("v_" + a, var_used)
            fwd.append(f"{v} = torch.chunk({x}, {L('chunks')}, dim={L('dim')})")
            for j in range(p["chunks"]):
                var[(nid, j)] = f"{v}[{j}]"
            continue
        elif t == "Select":
            line = f"{x}[{', '.join([':'] * p['dim'] + [str(p['index'])])}]"
        elif t == "Scale":
            line = f"{x} * {L('factor')}"
        elif t == "MatMul":
            line = f"{x} @ {ref(nid, 1)}"
        elif t == "Mean":
            line = f"{x}.mean(dim={L('dim')}" + (", keepdim=True)" if p["keepdim"] else ")")
        elif t == "ClassToken":
            init.append(f"self.{a} = nn.Parameter(torch.zeros(1, {L('tokens')}, {xs.shape[-1]}))")
            line = f"torch.cat([self.{a}.expand({x}.shape[0], -1, -1), {x}], dim=1)"
        elif t == "PositionEmbedding":
            init.append(f"self.{a} = nn.Parameter(torch.zeros(1, {', '.join(str(d) for d in xs.shape)}))")
            line = f"{x} + self.{a}"
        elif t == "ScaledDotProductAttention":
            extra = (f", attn_mask={ref(nid, 3)}" if len(ins[nid]) > 3 else "") + \
                (", is_causal=True" if p["causal"] else "") + (", enable_gqa=True" if p["enable_gqa"] else "") + \
                (f", dropout_p={L('dropout')} if self.training else 0.0" if p.get("dropout") else "")
            line = f"F.scaled_dot_product_attention({x}, {ref(nid, 1)}, {ref(nid, 2)}{extra})"
        elif t == "Contiguous":
            line = f"{x}.clone()" if p["always_copy"] else f"{x}.contiguous()"
        elif t == "Slice":
            rng = f"{p['start']}:{'' if p['end'] is None else p['end']}"
            lead = [":"] * p["dim"] if p["dim"] >= 0 else ["..."]
            trail = [] if p["dim"] >= 0 else [":"] * (-p["dim"] - 1)
            line = f"{x}[{', '.join(lead + [rng] + trail)}]"
        elif t == "NewGELU":  # transformers' gelu_new, as its Python writes it
            line = (f"0.5 * {x} * (1.0 + torch.tanh(0.7978845608028654 * ({x} + 0.044715 * torch.pow({x}, 3.0))))")
        elif t == "AbsolutePositions":  # GPT-2's wpe(arange(tokens)): one row per position, broadcast
            init.append(f"self.{a} = nn.Embedding({L('num_embeddings')}, {L('embedding_dim')})")
            line = (f"self.{a}(torch.arange({L('offset')}, {L('offset')} + {x}.shape[1], "
                    f"device={x}.device))[None]")
        elif t == "KVCache":
            # a design's cache is "none" (a forward with use_cache=False): keys and values pass
            # through; generate mode (engine/generate.py) fills the cache, the module does not
            var[(nid, 0)], var[(nid, 1)] = ref(nid, 0), ref(nid, 1)
            continue
        elif t in _llm_export.TYPES:
            v = new_var(nid)
            outs = [v] + [_ident(f"{v}_{j}", var_used) for j in range(1, len(info.outputs))]
            for j, o in enumerate(outs):
                var[(nid, j)] = o
            code = _llm_export.export(t, p, a, [ref(nid, k) for k in range(len(ins[nid]))],
                                      [s_.shape for s_ in (in_spec(nid, k) for k in range(len(ins[nid])))], outs)
            init.extend(code.init)
            fwd.extend(code.forward)
            continue
        elif t == "Loss":
            if p["kind"] == "cross_entropy":
                line = f"F.cross_entropy({x}, torch.zeros({x}.shape[0], dtype=torch.long, device={x}.device))"
            else:
                line = f"F.mse_loss({x}, torch.zeros_like({x}))"
        elif t == "Generic" and (nid, 0) in var and is_held(node):
            continue  # bound where its call is written
        elif t == "Generic":
            n_init, names_before = len(init), dict(tensor_names)
            done = _generic_call_code(nid, node, p, a, [ref(nid, k) for k in range(len(ins[nid]))],
                                      [len(in_spec(nid, k).shape) + 1 for k in range(len(ins[nid]))], args[0],
                                      tensor_attr, warnings)
            if done is not None:
                init.extend(done.init)
                line = done.expr
                if done.reads_input:
                    extra_reads[nid] = {args[0]}
            else:
                del init[n_init:]  # tensors a call that could not be written had created
                tensor_names.clear()
                tensor_names.update(names_before)
                dt = {"float": "", "int64": ", dtype=torch.long", "bool": ", dtype=torch.bool"}[p["dtype"]]
                src = x or args[0]
                if not x:
                    extra_reads[nid] = {args[0]}  # read here: not deleted before
                shape = ", ".join(str(d) for d in p["out_shape"])
                warnings.append(one_line(f"{node.name}: Generic op {L('op')} is written as a zeros placeholder"))
                line = f"{src}.new_zeros(({src}.shape[0], {shape}){dt})  # TODO: Generic op {L('op')}"
        elif _registered_export(t) is not None:
            ex = _run_export(node, _registered_export(t), ExportCtx(
                a, [ref(nid, k) for k in range(len(ins[nid]))], [in_spec(nid, k).shape for k in range(len(ins[nid]))],
                [o.shape for o in info.outputs], p, L))
            init.extend(ex.init)
            helpers.update(ex.helpers)
            if ex.outputs > 1:
                v = _ident("v_" + a, var_used)
                fwd.append(f"{v} = {ex.forward}")
                for j in range(ex.outputs):
                    var[(nid, j)] = f"{v}[{j}]"
                continue
            line = ex.forward
        else:
            why = _no_export_reason(t)
            raise ExportError(f"{nid}: no PyTorch export for layer type {t}" + (f": {why}" if why else ""))
        if mod is not None and t in ("Conv1d", "Conv2d", "Conv3d", "Linear") and p.get("weight_norm") is not None:
            wn = "nn.utils.weight_norm" if p.get("weight_norm_hook") else "nn.utils.parametrizations.weight_norm"
            dim = int(p["weight_norm"])
            mod = f"{wn}({mod}, dim={dim if dim >= 0 else None})"
        if mod is not None:
            init.append(f"self.{a} = {mod}")
            line = f"self.{a}({x})"
        v = new_var(nid)
        fwd.append(f"{v} = {line}")

    # shared parameters (Node.tied: lm_head.weight = wte.weight): one tensor, as the design counts it
    for nid in order:
        for pname, target in sorted(nodes[nid].tied.items()):
            parts = target.split(".")
            src = next((".".join(parts[:k]) for k in range(len(parts) - 1, 0, -1) if ".".join(parts[:k]) in attr), "")
            sparam = target[len(src) + 1:]
            if src in attr and sparam and all(part.isidentifier() for part in (pname + "." + sparam).split(".")):
                init.append(f"self.{attr[nid]}.{pname} = self.{attr[src]}.{sparam}")
    sinks = [var[(nid, 0)] for nid in order if consumers[nid] == 0 and nodes[nid].type != "Input"
             and not is_held(nodes[nid])]
    fwd = _insert_dels(fwd, marks, ins, var, set(sinks), extra_reads)
    ret = sinks[0] if len(sinks) == 1 else "(" + ", ".join(sinks) + ("," if len(sinks) == 1 else "") + ")"
    if not sinks:
        ret = args[0]
    init = _registration_order(init, design, attr, holders)
    cname = _check_class_name(class_name) if class_name else _class_name(design.name)
    out = []
    # the design's name is the author's text: a repr'd literal, never pasted between quotes
    out.append(repr(f"{design.name}: exported by memdesigner (PyTorch {_lit(input_shape)} input per sample)."))
    out.append("")
    out.append("import torch")
    out.append("import torch.nn as nn")
    out.append("import torch.nn.functional as F")
    out.append("")
    out.append("")
    for src in helpers.values():
        out.extend(src.strip("\n").splitlines())
        out.append("")
        out.append("")
    out.append(f"class {cname}(nn.Module):")
    out.append("    def __init__(self):")
    out.append("        super().__init__()")
    if token_vocab:
        out.append(f"        self.truth_input = (\"tokens\", {token_vocab})")
    for ln in init:
        out.append("        " + ln)
    out.append("")
    out.append(f"    def forward(self, {', '.join(args)}):")
    for ln in fwd:
        out.append("        " + ln)
    out.append(f"        return {ret}")
    out.append("")
    out.append("")
    out.append("def make():")
    out.append(f"    return {cname}(), {_lit(input_shape)}")
    out.append("")
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if layers is not None:
        for nid in order:
            layers.setdefault(attr[nid], [nid])
    return "\n".join(out)


def add_torch_export_parser(subparsers):
    p = subparsers.add_parser("torch", help="write a design as PyTorch code",
                              description="Write DESIGN.json as a Python file with an nn.Module and make().")
    p.add_argument("design", help="design file")
    p.add_argument("-o", "--output", required=True, help="Python file to write")
    p.add_argument("--class-name", default=None)
    p.set_defaults(func=cli_export_torch)
    return p


def cli_export_torch(args) -> int:
    from memdesigner.io.design_file import DesignFileError, load_design

    try:
        d = load_design(args.design)
        code = to_python(d, getattr(args, "class_name", None))
    except (DesignFileError, ExportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from memdesigner.io.atomic_write import cannot_write, write_atomic

    try:
        write_atomic(args.output, code)
    except OSError as err:
        print(f"error: {cannot_write(args.output, err)}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


__all__ = ["ExportError", "add_torch_export_parser", "cli_export_torch", "one_line", "to_python"]

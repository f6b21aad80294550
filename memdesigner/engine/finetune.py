"""Fine-tuning as an estimate-time transform of the design: frozen layers and LoRA adapters.

The design itself is never edited: ``prepare`` returns a transformed copy (and its analysis)
that the engine simulates. Frozen parameters (``Node.trainable = False``, ``--freeze PREFIX``,
every base parameter under LoRA) get no gradient and no optimizer state; autograd's own rule
(an op records only if an input requires grad or it has a parameter that does) then decides
where backward stops and what each op keeps (engine/simulate.py, the layers' memory rules).

LoRA follows peft 0.21 (``peft/tuners/lora/layer.py``, ``Linear.forward``)::

    result = self.base_layer(x)
    result = result + lora_B(lora_A(dropout(x))) * scaling      # scaling = alpha / r

with ``dropout`` an ``nn.Identity`` when p == 0, lora_A ``Linear(in, r, bias=False)``, lora_B
``Linear(r, out, bias=False)``, and every other parameter of the model frozen (``bias="none"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memdesigner.model import registry
from memdesigner.model.analysis import Analysis, analyze
from memdesigner.model.design import Design, Node

PEFT_DEFAULT_ALPHA = 8  # peft.LoraConfig.lora_alpha
ADAPTER = "default"  # peft's adapter name


def active(s) -> bool:
    return bool(s.freeze or s.lora_r or s.base_bits)


@dataclass
class FinetunePlan:
    """What the transform did, for the report."""

    adapters: list = field(default_factory=list)  # module paths that got LoRA adapters
    frozen: list = field(default_factory=list)  # node names frozen by --freeze
    quantised: list = field(default_factory=list)  # module paths whose base weight bitsandbytes stores
    trainable_params: int = 0
    all_params: int = 0


def module_path(node: Node) -> str:
    """The module a parameterised op belongs to: the innermost module call of its scope
    (torch import: ``L__self__model.layers.0.self_attn.q_proj``), else the node's own name."""
    if node.scope:
        last = node.scope.rsplit("/", 1)[-1]
        if last.startswith("L__self__"):
            last = last[len("L__self__"):]
        if last and (node.name == last or node.name.startswith(last + ".")):
            return last
    return node.name


def _matches_prefix(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix if prefix.endswith(".") else prefix + ".")


def _matches_target(path: str, target: str) -> bool:
    """peft's rule: the module's name is the target or ends with ``.target``."""
    return path == target or path.endswith("." + target)


def _linear_modules(design: Design, an: Analysis) -> dict[str, list[str]]:
    """module path -> the node ids of its call, for modules whose one parameterised op is a
    Linear (nn.Linear, transformers' Conv1D as addmm)."""
    groups: dict[str, list[str]] = {}
    drawn = getattr(design, "node_rep", None) or {}
    for nid in an.order:
        node = design.nodes[nid]
        if not an.nodes[nid].ok:
            continue
        # a layer drawn inside a block is a module of its own (its scope is the block instance's)
        groups.setdefault(node.name if nid in drawn else module_path(node), []).append(nid)
    out = {}
    for path, nids in groups.items():
        lin = [n for n in nids if design.nodes[n].type == "Linear"]
        others = [n for n in nids if design.nodes[n].type != "Linear" and an.nodes[n].params]
        if len(lin) == 1 and not others:
            out[path] = nids
    return out


def _output_head(design: Design, an: Analysis, linears: dict) -> str | None:
    """peft's "all-linear" leaves out the output layer (``get_output_embeddings()``): the last
    Linear module, when it is outside the repeated layers (no ``.<k>.`` in its path)."""
    if not linears:
        return None
    pos = {n: i for i, n in enumerate(an.order)}
    last = max(linears, key=lambda p: pos[linears[p][-1]])
    return None if any(part.isdigit() for part in last.split(".")) else last


def _key(s) -> tuple:
    """The settings the transform reads (nothing else changes the rewritten design)."""
    return (s.lora_r, s.lora_alpha, s.lora_dropout, tuple(s.lora_targets), s.base_bits, tuple(s.freeze))


def prepare(design: Design, settings, analysis: Analysis | None = None) -> tuple[Design, Analysis, FinetunePlan | None]:
    """The design the engine simulates under ``settings`` (unchanged without fine-tuning). The
    result is kept on the analysis (as the simulation keeps its graph structure there), so the
    estimates of one analysis that share the fine-tuning settings (make-it-fit's candidates and
    checkpoint plans, the window's settings-only re-estimates) rewrite and re-analyse the design
    once, and their runs then hit the rule cache of the same analysed nodes."""
    an = analysis or analyze(design)
    if not active(settings) or not an.ok:
        return design, an, None
    memo = an.__dict__.get("_finetune_prepared")
    if memo is None or memo[0] is not design or memo[1] != len(design.edges):
        memo = (design, len(design.edges), {})
        an.__dict__["_finetune_prepared"] = memo
    key = _key(settings)
    hit = memo[2].get(key)
    if hit is None:
        if len(memo[2]) >= 8:
            memo[2].clear()
        hit = memo[2][key] = _prepare(design, settings, an)
    return hit


def _prepare(design: Design, settings, an: Analysis) -> tuple[Design, Analysis, FinetunePlan]:
    d = _copy(design)
    plan = FinetunePlan()
    linears = _linear_modules(d, an)
    head = _output_head(d, an, linears)
    if settings.lora_r:
        _add_lora(d, an, settings, plan, linears, head)
    if settings.base_bits:
        _quantise_base(d, an, settings.base_bits, linears, head, plan)
    for node in d.nodes.values():
        if settings.freeze and any(_matches_prefix(node.name, p) for p in settings.freeze) and node.trainable:
            node.trainable = False
            plan.frozen.append(node.name)
    an2 = analyze(d)
    for nid in an2.order:
        info = an2.nodes[nid]
        tied = d.nodes[nid].tied
        for p in info.params:
            if p.trainable and p.name not in tied:
                plan.all_params += p.numel
                if p.requires_grad:
                    plan.trainable_params += p.numel
    return d, an2, plan


def _copy(design: Design) -> Design:
    """A detached copy (no JSON round trip: this runs for every estimate). A design drawn with
    blocks keeps its expansion's node -> instance map (FSDP units of drawn designs, engine/fsdp.py);
    ``unit_joins`` will map each adapter op to the Linear it wraps."""
    d = design.detached_copy()
    rep = getattr(design, "node_rep", None)
    if rep:
        d.node_rep = dict(rep)
    d.unit_joins = dict(getattr(design, "unit_joins", None) or {})
    return d


def _new_node(new: list, kind: str, nid: str, path: str, sub: str, props: dict, base: Node, own_call: bool) -> str:
    """An adapter op named after its peft module (``...q_proj.lora_A.default``), in the wrapper's
    module call (and its own, for lora_A / lora_B / the dropout)."""
    lt = registry.get(kind)
    values = lt.defaults()
    values.update(props)
    scope = base.scope
    if own_call:
        torch_style = scope.rsplit("/", 1)[-1].startswith("L__self__")
        scope = scope + "/" + (f"L__self__{path}.{sub}" if torch_style else f"{path}.{sub}")
    new.append(Node(nid, lt.name, f"{path}.{sub}", values, base.pos, scope=scope))
    return nid


def _quantise_base(d: Design, an: Analysis, bits: int, linears: dict, head, plan: FinetunePlan) -> None:
    """QLoRA's base: transformers' bitsandbytes integration replaces every nn.Linear / Conv1D but
    the output head (``llm_int8_skip_modules`` defaults to it) with Linear4bit / Linear8bitLt."""
    for path, nids in linears.items():
        if path == head:
            continue
        lin = next(n for n in nids if d.nodes[n].type == "Linear")
        node = d.nodes[lin]
        node.type = "QuantLinear"
        node.props = {"out_features": an.nodes[lin].params[0].shape[0], "bias": len(an.nodes[lin].params) > 1,
                      "bits": bits}
        node.bits = bits
        node.trainable = False
        node.rev += 1
        plan.quantised.append(path)


def _add_lora(d: Design, an: Analysis, s, plan: FinetunePlan, linears: dict, head) -> None:
    if s.lora_targets:
        targets = [p for p in linears if any(_matches_target(p, t) for t in s.lora_targets)]
    else:
        targets = [p for p in linears if p != head]
    r = s.lora_r
    alpha = s.lora_alpha if s.lora_alpha is not None else PEFT_DEFAULT_ALPHA
    scaling = alpha / r
    for node in d.nodes.values():  # peft freezes the whole base model
        node.trainable = False
    after: dict[str, list[Node]] = {}
    into: dict[str, list] = {}
    out_of: dict[tuple, list] = {}
    for e in d.edges:
        into.setdefault(e.dst, []).append(e)
        out_of.setdefault((e.src, e.src_port), []).append(e)
    for path in targets:
        nids = linears[path]
        lin = next(n for n in nids if d.nodes[n].type == "Linear")
        members = set(nids)
        in_edge = next((e for n in nids for e in into.get(n, ()) if e.src not in members), None)
        if in_edge is None:
            continue
        last = nids[-1]
        base = d.nodes[last]
        out_features = an.nodes[lin].params[0].shape[0]
        new: list[Node] = []

        def node(kind, suffix, props, sub=None, lin=lin, path=path, base=base, new=new):
            return _new_node(new, kind, f"{lin}.lora.{suffix}", path, sub or suffix, props, base, sub is not None)

        # peft's _cast_input_dtype: x.to(lora_A.weight.dtype), a copy when they differ (a bf16
        # input under autocast, fp32 adapters on a bf16 base); held until the wrapper returns
        cast = node("ToDtype", "cast", {"to": "params"})
        edges = [((in_edge.src, in_edge.src_port), (cast, 0))]
        src = (cast, 0)
        if s.lora_dropout > 0:
            drop = node("Dropout", "dropout", {"p": float(s.lora_dropout), "inplace": False},
                        f"lora_dropout.{ADAPTER}")
            edges.append((src, (drop, 0)))
            src = (drop, 0)
        a = node("Linear", "A", {"out_features": r, "bias": False}, f"lora_A.{ADAPTER}")
        b = node("Linear", "B", {"out_features": out_features, "bias": False}, f"lora_B.{ADAPTER}")
        sc_ = node("Scale", "scaling", {"factor": float(scaling)})
        add = node("Add", "add", {"inplace": False})
        new[0].keep_until = add  # the forward's local ``x`` is the cast copy
        edges += [(src, (a, 0)), ((a, 0), (b, 0)), ((b, 0), (sc_, 0)), ((last, 0), (add, 0)), ((sc_, 0), (add, 1))]
        consumers = list(out_of.get((last, 0), ()))
        after[last] = new
        rep = getattr(d, "node_rep", None)
        for n in new:
            d.nodes[n.id] = n
            d.unit_joins[n.id] = lin  # peft's LoraLayer: lora_A / lora_B are the Linear's submodules
            if rep and lin in rep:
                rep[n.id] = rep[lin]
        for e in consumers:
            i = d.remove_edge(e)
            ne = d.add_edge(add, e.dst, 0, e.dst_port, index=i, check_cycle=False)
            lst = into[e.dst]
            lst[lst.index(e)] = ne
        for (s0, p0), (s1, p1) in edges:
            d.add_edge(s0, s1, p0, p1, check_cycle=False)
        if base.output:
            base.output = False
            d.nodes[add].output = True
        plan.adapters.append(path)
    # the adapter's ops run right after the base layer, inside the wrapper's forward
    order = []
    added = {n.id for lst in after.values() for n in lst}
    for nid, n in d.nodes.items():
        if nid in added:
            continue
        order.append((nid, n))
        for extra in after.get(nid, ()):
            order.append((extra.id, extra))
    d.nodes.clear()
    d.nodes.update(order)


def annotate(rep, plan: FinetunePlan | None, s) -> None:
    """Put what the transform did into the report (peft's print_trainable_parameters line)."""
    if s.grad_accum > 1 and s.training:
        rep.settings["global_batch"] = s.batch * s.grad_accum * s.gpus
    if plan is None:
        return
    pct = 100 * plan.trainable_params / plan.all_params if plan.all_params else 0.0
    rep.finetune = {
        "lora_r": s.lora_r, "lora_alpha": s.lora_alpha if s.lora_alpha is not None else PEFT_DEFAULT_ALPHA,
        "lora_dropout": s.lora_dropout, "lora_targets": list(s.lora_targets) or "all-linear",
        "adapters": list(plan.adapters), "frozen_by_prefix": len(plan.frozen),
        "base_bits": s.base_bits, "quantised": len(plan.quantised),
        "trainable_params": plan.trainable_params, "all_params": plan.all_params,
        "summary": f"trainable params: {plan.trainable_params:,} || all params: {plan.all_params:,} || "
                   f"trainable%: {pct:.4f}",
    }
    rep.trainable_params = plan.trainable_params


_LAYER = re.compile(r"^(.*)\.(\d+)$")


def layer_of(node: Node) -> str | None:
    """The repeated layer a node runs in: the outermost module call of its scope named
    ``<prefix>.<k>`` (``model.layers.3``), the way HF checkpoints each decoder layer."""
    for part in node.scope.split("/") if node.scope else ():
        if part.startswith("L__self__"):
            part = part[len("L__self__"):]
        if _LAYER.match(part):
            return part
    m = None
    parts = node.name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].isdigit() and i + 1 < len(parts):
            m = ".".join(parts[:i + 1])
    return m


def layer_segments(order: list, nodes: dict) -> list[list[str]]:
    """Consecutive runs of nodes in the same repeated layer, in execution order."""
    segments: list[list[str]] = []
    current = None
    for nid in order:
        lay = layer_of(nodes[nid])
        if lay is None:
            current = None
            continue
        if lay != current:
            segments.append([])
            current = lay
        segments[-1].append(nid)
    return segments

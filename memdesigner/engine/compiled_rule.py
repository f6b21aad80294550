"""A layer's memory rule answered once per (layer, inputs, settings) and turned into plain byte
counts and small tuples, so that a run walks numbers instead of re-reading rule objects."""

from __future__ import annotations

import itertools
from itertools import compress, count
from operator import ne
from types import MappingProxyType

from memdesigner.engine.live_set import A, G
from memdesigner.engine.ops_in_order import TYPE, node_column, ops_in_order
from memdesigner.model.layout import contiguous_strides, dense_like
from memdesigner.model.oprules import In, MemCtx, OpMem, Out, Param, T
from memdesigner.units import DTYPE_BYTES

FLOATS = ("float32", "float16", "bfloat16", "float64")

NONE = MappingProxyType({})  # an empty, read-only stand-in for per-op lists and dicts most ops leave empty


# memoised memory rules: (settings id, op id, input spec id or ids) -> CompiledRule (its .op: the OpMem)
RULES: dict = {}

# saved-entry kinds of CompiledRule.saved
S_EXTRA, S_IN, S_OUT, S_PARAM, S_NONE = range(5)
# input-gradient kinds of CompiledRule.grads_in
G_ALIAS, G_STAGE, G_T, G_NEW = range(4)


_SPEC_IDS: dict = {}
_SETTINGS_IDS: dict = {}
_next_id = itertools.count().__next__  # never reused: a cleared table only costs cache misses


def spec_id(spec: tuple) -> int:
    """A number per distinct value spec (shape, dtype, requires grad, strides), so that a rule's
    cache key holds small ints instead of nested tuples hashed again for every op."""
    n = _SPEC_IDS.get(spec)
    if n is None:
        if len(_SPEC_IDS) > 200000:
            _SPEC_IDS.clear()
        n = _SPEC_IDS[spec] = _next_id()
    return n


_OP_IDS: dict = {}  # (type, id(props), id(outputs), id(params)) -> (op id, props, outputs, params)


def op_ids(design, an, order: list) -> list:
    """Per op of ``order``: a number for what its memory rule reads beside its inputs and the
    settings (its type, and its coerced props, output specs and parameters by identity), kept
    on the analysis. The rule cache's key is then three small ints for a one-input op, not a
    tuple of six rebuilt and hashed for every op of every estimate. The table keeps the objects
    alive, so while a number is in it no other object can take their ids; a cleared table
    hands out new numbers (never reused). After an edit that left the graph alone (the analyses
    share a graph memo) the numbers of the ops whose NodeInfo and type are as they were are the
    previous estimate's (the memo holds those NodeInfos: their numbers stay theirs)."""
    memo = an.__dict__.get("_op_ids")
    if memo is not None and memo[0] is design and memo[1] is order:
        return memo[2]
    if len(_OP_IDS) > 200000:
        _OP_IDS.clear()
    infos_l, nodes_l, read_only = ops_in_order(design, an, order)
    types = node_column(nodes_l, read_only, TYPE)
    kept = an.graph_memo.get("op_ids")
    if kept is not None and kept[0] == order:
        out = list(kept[3])
        todo = compress(count(), map(ne, zip(infos_l, types), zip(kept[1], kept[2])))
    else:
        out = [0] * len(order)
        todo = range(len(order))
    get = _OP_IDS.get
    for i in todo:
        info = infos_l[i]
        props, outputs, params = info.props, info.outputs, info.params
        key = (nodes_l[i].type, id(props), id(outputs), id(params))
        hit = get(key)
        if hit is None:
            hit = _OP_IDS[key] = (_next_id(), props, outputs, params)
        out[i] = hit[0]
    an.graph_memo["op_ids"] = (order, infos_l, types, out)
    an.__dict__["_op_ids"] = (design, order, out)
    return out


def op_table(st) -> tuple:
    """Per op of ``st.order``, in order: the values it reads, its first value's number and its
    output count, as three lists kept on the (memoised, never changed) Structure. The passes
    walk these beside the order instead of looking the node up in three dicts per op."""
    memo = st.__dict__.get("_op_table")
    if memo is None:
        order = st.order
        memo = st.__dict__["_op_table"] = ([st.ins[n] for n in order], [st.base[n] for n in order],
                                           [st.n_out[n] for n in order])
    return memo


def settings_id(key: tuple) -> int:
    """The same for the settings a memory rule reads (dtype, training, backend, autocast, batch)."""
    n = _SETTINGS_IDS.get(key)
    if n is None:
        if len(_SETTINGS_IDS) > 20000:
            _SETTINGS_IDS.clear()
        n = _SETTINGS_IDS[key] = _next_id()
    return n


def nbytes(t: T) -> int:
    return t.elems * DTYPE_BYTES[t.dtype]


class CompiledRule:
    """One memory rule's answer turned into byte counts and small tuples, once per cached rule:
    a run then walks plain numbers instead of re-reading T/In/Out objects and recomputing
    sizes, strides and dtypes for every op of every estimate (the same rule serves every
    repetition of a layer and every re-estimate after an edit elsewhere)."""

    __slots__ = ("op", "records", "temps", "outs", "extras", "kept", "saved", "vals", "bwd_temps", "grads_in",
                 "casts", "pgrads", "stages", "specs", "spec_ids", "affine", "late",
                 "plain", "new_bytes", "makes_pgrads", "pgrad_bytes", "blocks",
                 "grad_blocks")

    def __init__(self, m: MemCtx, op: OpMem, outputs, params, pitem: int):
        self.op = op  # the rule's answer (each cached answer has its own CompiledRule)
        self.records = m.records
        self.temps = [(nbytes(t), t.what) for t in op.temps]
        # per output: (nbytes, what) for a new storage, or the input index it shares
        self.outs = [(nbytes(o), o.what) if isinstance(o, T) else o.i for o in op.outputs]
        self.extras = [(id(t), nbytes(t), t.what) for t in op.saved if isinstance(t, T)]
        self.kept = sum(nb for _, nb, _ in self.extras)
        saved = []
        for t in op.saved:
            if isinstance(t, T):
                saved.append((S_EXTRA, id(t)))
            elif isinstance(t, In):
                saved.append((S_IN, t.i))
            elif isinstance(t, Out):
                saved.append((S_OUT, t.j))
            elif isinstance(t, Param):
                saved.append((S_PARAM, t.k))
            else:
                saved.append((S_NONE, None))
        self.saved = saved
        # per output: (dtype, full shape, strides, is a float)
        batch = m.batch
        in_shapes, in_strides = m.in_shapes, m.in_strides
        ostr = op.out_strides
        vals = []
        for j in range(len(op.outputs)):
            dt = op.out_dtypes[min(j, len(op.out_dtypes) - 1)]
            oshape = (batch,) + outputs[j].shape
            if ostr is not None and ostr[j] is not None:
                st = ostr[j]
            else:
                o = op.outputs[j]
                if isinstance(o, T):
                    if op.elementwise and in_strides and in_shapes[0] == oshape:
                        st = dense_like(oshape, in_strides[0])
                    else:
                        st = contiguous_strides(oshape)
                else:
                    src = in_strides[o.i]
                    st = src if in_shapes[o.i] == oshape else contiguous_strides(oshape)
            vals.append((dt, oshape, st, dt in FLOATS))
        self.vals = vals
        # the value each output becomes, (shape, dtype, requires grad, strides): [without grad, with]
        self.specs = [((oshape, dt, False, st), (oshape, dt, flt, st)) for dt, oshape, st, flt in vals]
        self.spec_ids = [(spec_id(a), spec_id(b)) for a, b in self.specs]
        self.affine = op.affine
        self.late = op.late_outputs
        self.bwd_temps = [(nbytes(t), t.what) for t in op.bwd_temps]
        # per input that requires grad: (index, kind, bytes, what)
        gi = []
        for i in range(len(m.in_shapes)):
            if not m.in_rg[i]:
                continue
            how = op.grad_in[i] if op.grad_in and i < len(op.grad_in) else "new"
            if how is None:
                continue
            new_nb = m.in_elems(i) * DTYPE_BYTES[m.in_dtypes[i]]
            if how == "alias":
                gi.append((i, G_ALIAS, new_nb, None))  # nb: the input's own size (a sum of views is that big)
            elif how == "stage":
                gi.append((i, G_STAGE, new_nb, None))  # a new gradient when no stage made it
            elif isinstance(how, T):
                gi.append((i, G_T, nbytes(how), how.what))
            else:
                gi.append((i, G_NEW, new_nb, None))
        self.grads_in = gi
        self.casts = [(k, nbytes(t), t.what) for k, t in op.casts]
        # parameters that get gradients: (index, name, bytes at the parameter dtype)
        self.pgrads = [(k, p.name, p.numel * pitem, p.numel) for k, p in enumerate(params) if p.requires_grad]
        # the backward's fast path: the parameter gradients as one aggregate (AccumulateGrad), its bytes
        self.makes_pgrads = bool(op.param_grads and self.pgrads)
        self.pgrad_bytes = sum(e[2] for e in self.pgrads)
        self.blocks: dict[int, NewBlock] = {}  # allocator rounding -> the forward's new storages (block())
        self.grad_blocks: dict[int, GradBlock] = {}  # the same for the backward's input gradients
        self.stages = [([(nbytes(t), t.what) for t in temps_], pidx, release)
                       for temps_, pidx, release in op.bwd_stages]
        # an op the forward's fast path runs: no autocast copies, no outputs made late, nothing that
        # outlives the step or frees an earlier step's storage
        self.plain = not self.casts and not self.late and not op.persists and not op.releases_carried
        self.new_bytes = sum(o[0] for o in self.outs if o.__class__ is tuple)

    def block(self, rnd: int) -> NewBlock:
        """The forward fast path's new storages of this op under allocator rounding ``rnd`` (memoised)."""
        b = self.blocks[rnd] = NewBlock(self, rnd)
        return b

    def grad_block(self, rnd: int) -> GradBlock:
        """The backward fast path's new input gradients under allocator rounding ``rnd`` (memoised)."""
        b = self.grad_blocks[rnd] = GradBlock(self, rnd)
        return b


class Block:
    """Storages an op makes together, numbered base, base + 1, ... in the live set: their sizes,
    rounded sizes, category and labels under one allocator rounding. A lean run extends the live
    set's lists with these (one call per list, not five appends and a rounding per storage) and
    adds the sums once; a run with the calls allocates them one by one in the same order
    (tests/engine/test_live_set_inline.py: both agree to the byte)."""

    __slots__ = ("nbs", "rns", "cats", "ones", "nb_sum", "rn_sum", "slack", "labels")

    def __init__(self, new: list, cat: int, rnd: int):
        self.nbs = [nb for nb, _ in new]
        self.rns = [nb if rnd <= 1 else -(-nb // rnd) * rnd for nb in self.nbs]
        self.cats = [cat] * len(new)
        self.ones = [1] * len(new)
        self.nb_sum, self.rn_sum = sum(self.nbs), sum(self.rns)
        self.slack = (rnd - 1) * sum(1 for nb in self.nbs if nb) if rnd > 1 else 0  # as alloc() counts it
        self.labels = [what for _, what in new]


class NewBlock(Block):
    """What an op makes in the forward's fast path beside its transients: each new output (in
    output order), then each saved extra."""

    __slots__ = ("outs", "one", "n_outs", "saved")

    def __init__(self, c: CompiledRule, rnd: int):
        super().__init__([o for o in c.outs if o.__class__ is tuple] + [(nb, what) for _, nb, what in c.extras], A,
                         rnd)
        # per output: its place in the block, or ~i for one that shares input i's storage
        outs, k = [], 0
        for o in c.outs:
            if o.__class__ is tuple:
                outs.append(k)
                k += 1
            else:
                outs.append(~o)
        self.outs, self.n_outs = outs, k
        self.one = outs == [0]  # one output, a new one: [base]
        at = {tid: self.n_outs + i for i, (tid, _, _) in enumerate(c.extras)}
        # CompiledRule.saved with a saved extra as its place in the block
        self.saved = [(kind, at[x] if kind == S_EXTRA else x) for kind, x in c.saved]


class GradBlock(Block):
    """What an op's backward makes in the fast path: its new input gradients (a label of None:
    the input's "gradient"), then its parameters' gradients as one aggregate with its own rounded
    size (alloc_exact: each parameter's .grad rounded). ``grads``: per input that gets one,
    (input index, place in the block or None for the outgoing gradient itself (an alias),
    bytes); ``inputs``: per input gradient of the block, its input; ``n_alias``: how many inputs
    get the outgoing gradient itself; ``pgrad_at``: the aggregate's place (None: no parameter
    gradients)."""

    __slots__ = ("grads", "inputs", "pgrad_at", "pgrad_rounded", "n_alias")

    def __init__(self, c: CompiledRule, rnd: int):
        new, grads = [], []
        for i, kind, nb, what in c.grads_in:
            if kind == G_ALIAS:
                grads.append((i, None, nb))
            else:  # (a "stage" gradient without stages is a new one too)
                grads.append((i, len(new), 0))
                new.append((nb, what if kind == G_T else None))
        self.grads = grads
        self.inputs = [i for i, at, _ in grads if at is not None]
        self.n_alias = len(grads) - len(self.inputs)  # the references the outgoing gradient gains
        super().__init__(new, G, rnd)
        self.pgrad_at = self.pgrad_rounded = None
        raw = c.pgrad_bytes
        if c.makes_pgrads and raw:
            rsum = sum(e[2] if rnd <= 1 else -(-e[2] // rnd) * rnd for e in c.pgrads)
            self.pgrad_at, self.pgrad_rounded = len(new), rsum
            self.nbs.append(raw)
            self.rns.append(rsum)
            self.cats.append(G)
            self.ones.append(1)
            self.labels.append("parameter gradients")
            self.nb_sum += raw
            self.rn_sum += rsum
            self.slack += rsum - raw  # (alloc_exact's slack: its rounding, not one rounding's worst)

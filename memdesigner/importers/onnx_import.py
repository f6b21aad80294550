"""Import an ONNX model as a design (the ``onnx`` package; no onnxruntime).

    from memdesigner.importers.onnx_import import load_onnx
    design = load_onnx("model.onnx")                       # input shape from the graph
    design = load_onnx("model.onnx", input_shape=(3, 224, 224))

Steps: load the file (weights stay on disk: only their shapes are read), fix the first graph
input's shape (a dynamic batch dim becomes a batch of 2, so that reshapes show which dim is the
batch, as the PyTorch importer's meta run does), run ONNX shape inference, evaluate the shape
subgraphs (Constant / Shape / Gather / Unsqueeze / Concat / Cast / ... on constants) into
constants with onnx's reference evaluator, fuse the patterns in which ONNX splits one layer
(MatMul + bias Add, x * Sigmoid(x), the Erf form of GELU, GroupNorm through InstanceNormalization,
stacked LSTM / GRU layers), and map every remaining node through the layer registrations: each
layer type names its ONNX ops and turns a node into its props (``onnx_ops`` / ``from_onnx``,
model/onnxmap.py). Initializers are the parameters; one initializer read by two layers is one
tensor (the second layer's parameter is tied to the first). An op no type takes becomes a
``Generic`` node with its inferred output shape, named in ``design.import_warnings``.

ONNX describes the computation, not how eager PyTorch ran it: it has no in-place ops and no
Python variables, so ``ReLU(inplace=True)`` imports as an out-of-place ReLU and a tensor that a
model's local variable kept alive is freed after its last use. docs/onnx-import.md lists the
ops mapped and what this changes.
"""

from __future__ import annotations

import re
from pathlib import Path

from memdesigner.importers._onnx_fold_size import fold_size_bound
from memdesigner.importers._onnx_fusions import Fusions
from memdesigner.importers._onnx_values import _FLOAT, Const, PVal, RnnSeq, Unknown, Val, _kind
from memdesigner.model import registry
from memdesigner.model.design import Design
from memdesigner.model.onnxmap import Alias, OnnxCtx, OnnxIn
from memdesigner.model.registry import LayerError, ShapeCtx, TensorSpec

BATCH = 2
PREFOLD_MAX = 1_000_000  # elements of a constant kept from the shape-folding passes
FOLD_MAX = 1 << 24  # elements a node on constants may make while the graph is walked (64 MB of fp32)
# ops that only re-lay out a parameter (the exporter's Transpose of a weight, its LSTM gate
# reordering, an Expand over the batch): the result is still that parameter
_PARAM_LAYOUT = {"Identity", "Transpose", "Reshape", "Unsqueeze", "Squeeze", "Slice", "Gather", "Concat",
                 "Expand", "Cast", "Flatten", "Split"}


class OnnxImportError(ValueError):
    """The file is not a readable ONNX model, or its input shape cannot be fixed."""


def _array(t):
    """An initializer's values, None where onnx cannot read them (an UNDEFINED element type, data
    that does not match the dims: a damaged file)."""
    from onnx import numpy_helper

    try:
        return numpy_helper.to_array(t)
    except Exception:  # noqa: BLE001 - onnx raises TypeError, ValueError, ...
        return None


def _sanitize(name: str) -> str:
    return "".join(c if (c.isalnum() or c in "._-") else "_" for c in name).strip("._") or "node"


# ----------------------------------------------------------------------------------------------
# public entry points
# ----------------------------------------------------------------------------------------------
def read_model(path):
    """The ModelProto in ``path``, read within MEMDESIGNER_MAX_ONNX_MB (a regular file only) and
    refused past MEMDESIGNER_MAX_ONNX_NODES nodes, before anything walks the graph."""
    import onnx

    from memdesigner.io.input_limits import InputLimitError, limit, over, read_limited

    p = Path(path)
    if not p.exists():
        raise OnnxImportError(f"{path}: no such file")
    try:
        data = read_limited(p, "MAX_ONNX_MB")
    except InputLimitError as err:
        raise OnnxImportError(str(err)) from None
    try:
        model = onnx.load_model_from_string(data)
    except Exception as err:  # noqa: BLE001 - protobuf raises DecodeError, RuntimeWarning, ...
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise OnnxImportError(f"{path}: not a readable ONNX model ({first})") from None
    n = len(model.graph.node)
    if n > limit("MAX_ONNX_NODES"):
        raise OnnxImportError(f"{path}: " + over("MAX_ONNX_NODES", f"{n:,} nodes in the graph"))
    g = model.graph  # a string field that is not UTF-8 comes back as bytes
    names = [*(v.name for v in g.input), *(v.name for v in g.output), *(t.name for t in g.initializer)]
    for nd in g.node:
        names += [nd.name, nd.op_type, nd.domain, *nd.input, *nd.output]
    if any(isinstance(x, bytes) for x in names):
        raise OnnxImportError(f"{path}: not a readable ONNX model (a name is not UTF-8 text)")
    return model


def load_onnx(path, input_shape=None, name: str | None = None) -> Design:
    """Read an ONNX file (external weight files are not needed: only shapes are read)."""
    p = Path(path)
    model = read_model(p)
    if not model.graph.node:
        raise OnnxImportError(f"{path}: not an ONNX model (the graph has no nodes)")
    try:
        return from_model(model, input_shape, name or p.stem)
    except OnnxImportError as err:
        raise OnnxImportError(f"{path}: {err}") from None


def dynamic_input(path) -> str | None:
    """The first input's dims, e.g. "(batch, 3, H, W)", when dims other than the batch are dynamic
    (the import then needs an input shape); None when the graph fixes them."""
    try:
        model = read_model(path)
    except OnnxImportError:  # load_onnx reports unreadable files
        return None
    inits = {t.name for t in model.graph.initializer}
    data = [i for i in model.graph.input if i.name not in inits]
    if not data:
        return None
    tt = data[0].type.tensor_type
    dims = list(tt.shape.dim)[1:]
    if any(not d.HasField("dim_value") or d.dim_value <= 0 for d in dims):
        return _Importer._dims_text(tt)
    return None


def from_model(model, input_shape=None, name: str = "model") -> Design:
    """Build a design from an ``onnx.ModelProto``."""
    st = _Importer(model, input_shape, name)
    st.run()
    return st.design


# ----------------------------------------------------------------------------------------------
# the importer
# ----------------------------------------------------------------------------------------------
class _Importer(Fusions):
    def __init__(self, model, input_shape, name):
        import onnx

        self.onnx = onnx
        self.model = model
        self.g = model.graph
        self.design = Design(name=name)
        self.warnings: list[str] = []
        self.vals: dict[str, object] = {}
        self.depth: dict[str, int] = {}
        self.owner: dict[str, str] = {}  # initializer -> "node.param" that holds it
        self.claimed: set = set()
        self._next_suffix: dict[str, int] = {}  # id base -> the suffix _new_id tries first
        self.scope_seen: dict = {}
        self.input_shape = tuple(int(d) for d in input_shape) if input_shape else None
        self.index = registry.onnx_index()
        self._rnn_out: dict = {}  # (node, port) of a recurrent node's sequence -> the node
        self._rnn_single: set = set()  # sequence values read by one node only
        self._fused_attrs = None
        self.done: set = set()
        self.attention: dict = {}
        self.mha: dict = {}
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)

    # -- setup ------------------------------------------------------------------------------
    def run(self):
        self._check_defined()
        self._fix_input()
        self.data_prop = self._data_prop_is_bounded()
        self._infer({})
        # fold the shape subgraphs into constants, then infer again with them: reshape targets
        # computed from Shape / Gather / Div / Cast chains become known shapes
        self.folded: dict = {}
        for _ in range(4):
            more = self._prefold()
            if len(more) == len(self.folded):
                break
            self.folded = more
            self._infer(self.folded)
        self._consumers()
        self._find_mha()
        self._find_attention()
        self._build()
        self._finish()

    def _check_defined(self):
        known = {i.name for i in self.g.input} | {t.name for t in self.g.initializer} | {""}
        for n in self.g.node:
            for i in n.input:
                if i not in known:
                    raise OnnxImportError(f"node {n.name or n.op_type} reads {i!r}, which nothing defines "
                                          "(a truncated or damaged file?)")
            known.update(n.output)

    def _data_prop_is_bounded(self) -> bool:
        """ONNX's data propagation (shape inference with data_prop) computes a Range on constants
        element by element as shape dims, ~150 B each: Range(0, 5 * 10^7) in a 300-byte file
        took 7 GB and 80 s. Such a graph is inferred without data propagation (a warning)."""
        from onnx import numpy_helper

        consts = {t.name: t for t in self.g.initializer if t.data_type in (6, 7) and len(t.dims) <= 1}
        values = {}
        for n in self.g.node:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
                values[n.output[0]] = n.attribute[0].t
        for n in self.g.node:
            if n.op_type != "Range" or len(n.input) < 3:
                continue
            try:
                arrs = [numpy_helper.to_array(values.get(i) or consts[i]) for i in n.input[:3]]
            except Exception:  # noqa: BLE001 - not three readable direct constants
                continue
            if fold_size_bound("Range", arrs, {}) > PREFOLD_MAX:
                self.warnings.append(f"{n.name or 'Range'}: Range on constants of more than {PREFOLD_MAX:,} elements: "
                                     "shapes inferred without ONNX's data propagation")
                return False
        return True

    def _fix_input(self):
        inits = {t.name for t in self.g.initializer}
        data = [i for i in self.g.input if i.name not in inits]
        if not data:
            raise OnnxImportError("the graph has no input")
        self.first = data[0]
        tt = self.first.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim]
        if not dims:
            raise OnnxImportError(f"input {self.first.name!r} has no shape")
        self.batch = dims[0] or BATCH
        per = self.input_shape if self.input_shape is not None else tuple(dims[1:])
        if any(d is None for d in per):
            raise OnnxImportError(f"input {self.first.name!r} has dynamic dims {self._dims_text(tt)}; "
                                  "pass --input-shape")
        if any(not isinstance(d, int) or d < 1 for d in per):
            raise OnnxImportError(f"input {self.first.name!r}: the shape {tuple(per)} needs positive sizes")
        self.per_sample = tuple(per)
        self.in_kind = _kind(tt.elem_type)
        # other graph inputs: weights exported as inputs (export_params=False) are parameters
        self.extra_params = {}
        for i in data[1:]:
            t = i.type.tensor_type
            ds = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in t.shape.dim]
            if t.elem_type in _FLOAT and ds and all(d is not None for d in ds):
                self.extra_params[i.name] = tuple(ds)
            else:
                self.warnings.append(f"{i.name}: only the first input is imported")

    @staticmethod
    def _dims_text(tt):
        return "(" + ", ".join(d.dim_param or str(d.dim_value) for d in tt.shape.dim) + ")"

    def _prefold(self) -> dict:
        """Evaluate every node that computes from constants and known shapes only."""
        import numpy as np
        from onnx.reference import ReferenceEvaluator

        consts = dict(self.folded)
        for t in self.small_inits.values():
            if self.init_kind[t.name] != "float":
                a = _array(t)
                if a is not None:
                    consts.setdefault(t.name, a)
        for n in self.g.node:
            if n.domain not in ("", "ai.onnx") or all(o in consts for o in n.output):
                continue
            if n.op_type in ("Shape", "Size"):
                shp = self.shapes.get(n.input[0], (None,))[0]
                if shp is None and n.input[0] in self.init_shapes:
                    shp = self.init_shapes[n.input[0]]
                if shp is None or any(d < 0 for d in shp):
                    continue
                if n.op_type == "Size":
                    consts[n.output[0]] = np.array(self._numel(shp), dtype=np.int64)
                else:
                    a = self._attrs(n)
                    consts[n.output[0]] = np.array(shp[a.get("start", 0):a.get("end", None)], dtype=np.int64)
                continue
            if not all(i == "" or i in consts for i in n.input):
                continue
            if fold_size_bound(n.op_type, [consts[i] if i else None for i in n.input], self._attrs(n)) > PREFOLD_MAX:
                continue  # its result would be dropped below: not evaluated at all
            try:
                outs = ReferenceEvaluator(n).run(None, {i: consts[i] for i in n.input if i})
            except Exception:  # noqa: BLE001 - an op the evaluator lacks stays a node
                continue
            for o, v in zip(n.output, outs):
                v = np.asarray(v)
                if v.size <= PREFOLD_MAX and v.dtype != object:  # strings / None: no tensor to fold into
                    consts[o] = v
        return consts

    def _infer(self, folded: dict):
        """ONNX shape inference on a copy without the weights' data (only their shapes), with the
        folded shape subgraphs as initializers."""
        onnx = self.onnx
        helper = onnx.helper
        g = self.g
        inputs = []
        for i in g.input:
            vi = onnx.ValueInfoProto()
            vi.CopyFrom(i)
            if i.name == self.first.name:
                shape = (self.batch,) + self.per_sample
                vi.type.tensor_type.shape.Clear()
                for d in shape:
                    vi.type.tensor_type.shape.dim.add().dim_value = int(d)
            else:
                for d in vi.type.tensor_type.shape.dim:
                    if not d.HasField("dim_value") or d.dim_value <= 0:
                        d.Clear()
                        d.dim_value = self.batch
            inputs.append(vi)
        listed = {i.name for i in g.input}
        small = []
        self.init_shapes = {}
        self.init_kind = {}
        for t in g.initializer:
            self.init_shapes[t.name] = tuple(int(d) for d in t.dims)
            self.init_kind[t.name] = _kind(t.data_type)
            numel = 1
            for d in t.dims:
                numel *= int(d)
            external = t.data_location == onnx.TensorProto.EXTERNAL
            if (t.data_type in _FLOAT and numel > 64) or external:
                if t.name not in listed:
                    inputs.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
            else:
                small.append(t)
        from onnx import numpy_helper

        keep = [n for n in g.node if not (n.output and all(o in folded for o in n.output))]
        names = {t.name for t in small}
        for o, v in folded.items():
            if o not in names and o not in self.init_shapes:
                small.append(numpy_helper.from_array(v, o))
        g2 = helper.make_graph(keep, g.name or "graph", inputs, list(g.output), small)
        m2 = helper.make_model(g2, opset_imports=list(self.model.opset_import))
        m2.ir_version = self.model.ir_version
        m2.functions.extend(self.model.functions)
        try:
            inf = onnx.shape_inference.infer_shapes(m2, strict_mode=False, data_prop=self.data_prop)
        except Exception as err:  # noqa: BLE001
            raise OnnxImportError(f"ONNX shape inference failed: {str(err).splitlines()[0]}") from None
        self.shapes: dict[str, tuple] = {}
        for vi in list(inf.graph.value_info) + list(inf.graph.output) + list(inf.graph.input):
            t = vi.type.tensor_type
            if not t.HasField("shape"):
                continue
            dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim)
            self.shapes[vi.name] = (dims, t.elem_type)
        self.small_inits = {t.name: t for t in small if t.name in self.init_shapes}

    def _consumers(self):
        """Who reads each value, among the nodes that reach a graph output (a dead node, such as
        the exporter's unused transpose of k, would otherwise be an output the design keeps)."""
        nodes = self.g.node
        needed = {o.name for o in self.g.output}
        self.live: set = set()
        folded = {k for k, n in enumerate(nodes) if n.output and all(o in self.folded for o in n.output)}
        for k in reversed(range(len(nodes))):
            if any(o in needed for o in nodes[k].output):
                self.live.add(k)
                if k not in folded:  # a Shape read for a folded size does not need its tensor
                    needed.update(i for i in nodes[k].input if i)
        self.cons: dict[str, list] = {}
        for k, n in enumerate(nodes):
            if k not in self.live or k in folded:
                continue
            for i in n.input:
                if i:
                    self.cons.setdefault(i, []).append(k)
        for o in self.g.output:
            self.cons.setdefault(o.name, []).append(-1)

    # -- values -----------------------------------------------------------------------------
    def _init_value(self, name):

        if name in self.vals:
            return self.vals[name]
        if name in self.small_inits and self.init_kind[name] != "float" and _array(self.small_inits[name]) is not None:
            v = Const(_array(self.small_inits[name]))
        elif name in self.init_shapes:
            v = PVal(self.init_shapes[name], frozenset([name]))
        elif name in self.extra_params:
            v = PVal(self.extra_params[name], frozenset([name]))
        else:
            return None
        self.vals[name] = v
        return v

    def _val(self, name):
        if not name:
            return None
        if name in self.vals:
            return self.vals[name]
        v = self._init_value(name)
        return v if v is not None else Unknown()

    def _shape(self, name):
        s = self.shapes.get(name)
        if s is not None and all(d >= 0 for d in s[0]):
            return s[0]
        v = self.vals.get(name)
        if isinstance(v, Const):
            return tuple(v.value.shape)
        if isinstance(v, PVal):
            return v.shape
        return None

    def _elem(self, name) -> str:
        s = self.shapes.get(name)
        return _kind(s[1]) if s else "float"

    # -- the walk ---------------------------------------------------------------------------
    def _build(self):
        self._add_input()
        nodes = list(self.g.node)
        for k, n in enumerate(nodes):
            if k in self.done:
                continue
            if k not in self.live:
                self._set_unknown(n)
                continue
            if k in self.attention:
                self._attention(n, *self.attention[k])
                continue
            if k in self.mha:
                self._mha(n, *self.mha[k])
                continue
            ins = [self._val(i) for i in n.input]
            try:
                self._node(k, n, ins)
            except LayerError as err:
                self._generic(n, ins, f"{err.field}: {err.message}")
            except (TypeError, ValueError, IndexError, KeyError, AttributeError) as err:
                self._generic(n, ins, f"could not map: {err}")

    def _add_input(self):
        props = {"shape": self.per_sample, "dtype": "int64" if self.in_kind != "float" else "float"}
        nid = self._new_id(_sanitize(self.first.name))
        self.design.add_node("Input", props, id=nid, name=self.first.name)
        self.depth[nid] = 0
        spec = registry.get("Input").shape(ShapeCtx(registry.get("Input").coerce_props(props), []))[0]
        self.vals[self.first.name] = Val(nid, 0, spec, tuple(range(len(self.per_sample) + 1)))

    def _node(self, k, n, ins):
        op = n.op_type
        tensors = [v for v in ins if isinstance(v, (Val, RnnSeq))]
        if n.domain not in ("", "ai.onnx"):
            if tensors:
                return self._generic(n, ins, f"custom domain {n.domain!r}")
            return self._set_unknown(n)
        if n.output and all(o in self.folded for o in n.output):
            for o in n.output:
                self.vals[o] = Const(self.folded[o])
            return None
        if op in ("Shape", "Size") and tensors:
            return self._shape_of(n)
        if not tensors:
            return self._fold(n, ins)
        if any(isinstance(v, Unknown) for v in ins):
            return self._generic(n, ins, "an input comes from an op that was not mapped")
        if op == "Identity" or (op == "Dropout" and self._eval_dropout(n, ins)):
            self.vals[n.output[0]] = ins[0]
            return None
        if op == "Cast":
            x = ins[0]
            if isinstance(x, Val) and _kind(self._attrs(n).get("to", 1)) == x.spec.kind:
                self.vals[n.output[0]] = x
                return None
            return self._generic(n, ins, "dtype conversion", saves_input=False)
        if any(isinstance(v, RnnSeq) for v in ins):
            return self._rnn_output(n, ins)
        fused = self._fuse(k, n, ins)
        if fused is not None:
            op, ins, outs, name = fused
        else:
            outs, name = list(n.output), n.name
        if op in ("LSTM", "GRU") and self._stack_rnn(n, ins):
            return None
        return self._map(n, op, ins, outs, name)

    def _shape_of(self, n):
        import numpy as np

        shp = self._shape(n.input[0])
        if shp is None:
            return self._set_unknown(n)
        if n.op_type == "Size":
            self.vals[n.output[0]] = Const(np.array(self._numel(shp), dtype=np.int64))
            return None
        a = self._attrs(n)
        start, end = a.get("start", 0), a.get("end", None)
        self.vals[n.output[0]] = Const(np.array(shp[start:end], dtype=np.int64))
        return None

    def _eval_dropout(self, n, ins) -> bool:
        """Dropout in an inference graph (no training_mode input, or false) is the identity."""
        if len(ins) < 3 or ins[2] is None:
            return True
        t = ins[2]
        return isinstance(t, Const) and not bool(t.value)

    def _attrs(self, n) -> dict:
        from onnx import helper

        return {a.name: helper.get_attribute_value(a) for a in n.attribute}

    def _set_unknown(self, n):
        for o in n.output:
            self.vals[o] = Unknown()

    def _fold(self, n, ins):
        """A node on constants and parameters only: evaluate it (shape arithmetic) or carry the
        parameters through it (a Transpose of a weight, the exporter's gate reordering)."""
        op = n.op_type
        if any(isinstance(v, Unknown) for v in ins):
            return self._set_unknown(n)
        params = [v for v in ins if isinstance(v, PVal)]
        if params and op not in _PARAM_LAYOUT:
            # arithmetic on a parameter (LayerNorm of learned latents broadcast over the batch)
            # makes an activation: a node with the inferred shape that holds the parameter
            return self._generic(n, ins, "computes from parameters alone")
        if params:
            if op == "Identity" and (n.input[0] in self.init_shapes or n.input[0] in self.extra_params):
                # the exporter deduplicates initializers of equal value through Identity nodes: in
                # the source model these were separate tensors
                src = frozenset([n.output[0]])
            else:
                src = frozenset().union(*(p.sources for p in params))
            for o in n.output:
                shp = self._shape(o)
                self.vals[o] = PVal(shp if shp is not None else params[0].shape, src)
            return None
        try:
            from onnx.reference import ReferenceEvaluator

            feeds = {i: v.value for i, v in zip(n.input, ins) if isinstance(v, Const)}
            if fold_size_bound(op, [feeds.get(i) for i in n.input], self._attrs(n)) > FOLD_MAX:
                self.warnings.append(f"{n.name or op}: {op} on constants would make more than {FOLD_MAX:,} "
                                     "elements; not evaluated (its output is unknown)")
                return self._set_unknown(n)
            outs = ReferenceEvaluator(n).run(None, feeds)
        except Exception:  # noqa: BLE001 - an op the evaluator lacks: its outputs stay unknown
            return self._set_unknown(n)
        import numpy as np

        for o, v in zip(n.output, outs):
            self.vals[o] = Const(np.asarray(v))
        return None

    # -- mapping through the registry -------------------------------------------------------
    def _in(self, name, v) -> OnnxIn:
        if v is None:
            return OnnxIn("none")
        if isinstance(v, Val):
            shp = self._shape(name) or ((self.batch,) + v.spec.shape)
            return OnnxIn("tensor", tuple(shp), dmap=v.dmap, elem=v.spec.kind, drank=v.drank)
        if isinstance(v, PVal):
            return OnnxIn("param", tuple(v.shape), src_numel=sum(self._src_numel(s) for s in v.sources))
        if isinstance(v, Const):
            return OnnxIn("const", tuple(v.value.shape), v.value)
        return OnnxIn("none")

    def _map(self, n, op, ins, outs, name, names=None):
        attrs = self._attrs(n)
        if self._fused_attrs and op != n.op_type:
            attrs = dict(attrs, **self._fused_attrs)
            self._fused_attrs = None
        if names is None:
            names = list(n.input) if op == n.op_type else [None] * len(ins)
            if op == "MatMul+Add":
                names = [n.input[0], None, None]
            elif names[0] is None:
                names[0] = n.input[0]
        ctx = OnnxCtx(op, name, attrs, [self._in(nm, v) for nm, v in zip(names, ins)],
                      [self._shape(o) or () for o in outs], self.batch)
        reason = ""
        for lt in self.index.get(op, []):
            ctx.out_dmap = None
            ctx.tensor_inputs = None
            try:
                res = lt.from_onnx(ctx)
            except LayerError as err:
                reason = f"{lt.name}: {err.field}: {err.message}"
                break
            if res is None:
                continue
            if isinstance(res, Alias):
                x = next(v for v in ins if isinstance(v, Val))
                self.vals[outs[0]] = Val(x.nid, x.port, x.spec, tuple(res.dmap))
                return None
            try:
                return self._add(n, lt, res, ctx, ins, outs, name)
            except LayerError as err:
                reason = f"{lt.name}: {err.field}: {err.message}"
                break
        if not reason and op not in self.index:
            reason = ""
        return self._generic(n, ins, reason, outs=outs)

    def _add(self, n, lt, props, ctx, ins, outs, name):
        idx = ctx.tensor_inputs if ctx.tensor_inputs is not None else \
            [i for i, v in enumerate(ins) if isinstance(v, Val)]
        tin = [ins[i] for i in idx]
        values = lt.coerce_props(props)
        specs = lt.shape(ShapeCtx(values, [v.spec for v in tin], name)) if lt.shape else []
        pspecs = lt.params(ShapeCtx(values, [v.spec for v in tin], name))
        nid = self._node_id(name, n.op_type)
        node = self.design.add_node(lt.name, props, id=nid, name=nid, scope=self._scope(name))
        for port, v in enumerate(tin):
            self.design.add_edge(v.nid, nid, v.port, port)
        self.depth[nid] = 1 + max((self.depth.get(v.nid, 0) for v in tin), default=-1)
        self._claim(node, pspecs, [v for v in ins if isinstance(v, PVal)])
        first = tin[0] if tin else None
        for j, o in enumerate(outs):
            if j >= len(specs):
                self.vals[o] = Unknown()
                continue
            if lt.name in ("LSTM", "GRU") and j == 0:
                self.vals[o] = RnnSeq(nid, specs[0], 2 if props.get("bidirectional") else 1)
                continue
            if lt.name in ("LSTM", "GRU"):
                self.vals[o] = Val(nid, j, specs[j], (1, 0, 2)) if j == 1 else Unknown()
                continue
            real = self._shape(o)
            if ctx.out_dmap is not None:
                dmap = tuple(ctx.out_dmap)
            elif first is not None and real is not None and len(real) == len(first.dmap) \
                    and len(specs[j].shape) + 1 == first.drank:
                dmap = first.dmap
            else:
                dmap = tuple(range(len(specs[j].shape) + 1))
            self._check_shape(nid, specs[j], real, dmap)
            self.vals[o] = Val(nid, j, specs[j], dmap)
        return None

    def _check_shape(self, nid, spec, real, dmap):
        """The design's shape seen through dmap must be ONNX's inferred one."""
        if real is None or len(real) != len(dmap) or max(dmap, default=0) > len(spec.shape):
            return
        want = [1] * (len(spec.shape) + 1)
        for i, d in enumerate(dmap):
            want[d] = real[i]
        if tuple(want[1:]) != tuple(spec.shape):
            self.warnings.append(f"{nid}: the design's shape {spec.shape} differs from ONNX's {tuple(real)}")

    def _claim(self, node, pspecs, pvals):
        """Give the node's parameters their initializers; one already held by another layer makes
        this one a tie to it (a weight shared by two layers is one tensor)."""
        if len(pvals) == len([p for p in pspecs if p.dtype is None]):
            pairs = list(zip([p for p in pspecs if p.dtype is None], pvals))
        else:
            pairs = []
        for p, v in pairs:
            owners = {self.owner.get(s) for s in v.sources}
            if None not in owners and len(owners) == 1:
                node.tied[p.name] = owners.pop()
            else:
                for s in v.sources:
                    self.owner.setdefault(s, f"{node.id}.{p.name}")
        for v in pvals:
            self.claimed.update(v.sources)

    def _generic(self, n, ins, why="", saves_input=True, outs=None):
        """An op with no rule: its inferred output shape and dtype count; its initializers not
        held by another layer count as its parameters."""
        outs = list(outs or n.output)
        tin = [v if isinstance(v, Val) else Val(v.nid, 0, v.spec, (1, 0, 2)) for v in ins
               if isinstance(v, (Val, RnnSeq))]
        params = 0
        for v in ins:
            if isinstance(v, PVal):
                params += sum(self._src_numel(s) for s in v.sources if s not in self.claimed)
                self.claimed.update(v.sources)
        first = True
        for o in outs:
            real = self._shape(o)
            if real is None:
                self.vals[o] = Unknown()
                if first:
                    self.warnings.append(f"{n.name or n.op_type}: {n.op_type} has no rule and ONNX could not infer "
                                         f"its output shape; its output is not counted ({why})")
                    first = False
                continue
            per = tuple(real[1:]) if real and real[0] == self.batch else tuple(real)
            per = tuple(d for d in per if d > 0) or (1,)
            props = {"op": n.op_type, "out_shape": per, "dtype": self._elem(o), "saves_input": saves_input}
            if params and first:
                props["params"] = int(params)
            name = n.name or n.op_type
            nid = self._node_id(name, n.op_type)
            self.design.add_node("Generic", props, id=nid, name=nid, scope=self._scope(name))
            for port, v in enumerate(tin):
                self.design.add_edge(v.nid, nid, v.port, port)
            self.depth[nid] = 1 + max((self.depth.get(v.nid, 0) for v in tin), default=-1)
            spec = TensorSpec(per, self._elem(o))
            self.vals[o] = Val(nid, 0, spec, tuple(range(len(per) + 1)))
            msg = f"{name}: {n.op_type} has no memdesigner rule; imported as a Generic node (output {tuple(real)})"
            if why:
                msg += f" ({why})"
            if first:
                self.warnings.append(msg)
            first = False
        return None

    def _src_numel(self, s) -> int:
        """Elements of a parameter source: an initializer, a weight input or an Identity alias."""
        if s in self.init_shapes:
            return self._numel(self.init_shapes[s]) if self.init_kind[s] == "float" else 0
        if s in self.extra_params:
            return self._numel(self.extra_params[s])
        v = self.vals.get(s)
        return self._numel(v.shape) if isinstance(v, PVal) else 0

    @staticmethod
    def _numel(shape) -> int:
        k = 1
        for d in shape:
            k *= int(d)
        return k

    # -- names and scopes -------------------------------------------------------------------
    def _chain(self, name: str) -> list:
        """torch.onnx names nodes "/layer1/layer1.0/conv1/Conv": the module calls, then the op.
        Rebuild the modules' full paths (layer1, layer1.0, layer1.0.conv1)."""
        parts = [p for p in (name or "").split("/") if p]
        if len(parts) < 2 or not (name or "").startswith("/"):
            return []
        full, prev_local, prev_full = [], None, None
        for c in parts[:-1]:
            if prev_local is not None and c.startswith(prev_local + "."):
                f = prev_full + c[len(prev_local):]
            elif prev_full is not None:
                f = f"{prev_full}.{c}"
            else:
                f = c
            full.append(f)
            prev_local, prev_full = c, f
        return full

    def _scope(self, name: str) -> str:
        return "/".join(self._chain(name))

    def _node_id(self, name: str, op: str) -> str:
        chain = self._chain(name)
        if chain:
            last = (name.split("/")[-1] or op).lower()
            base = f"{chain[-1]}.{last}"
        else:
            base = (name or op).strip("/").replace("/", ".") or op.lower()
        return self._new_id(_sanitize(base))

    def _new_id(self, base: str) -> str:
        """``base``, else the first free ``base_2``, ``base_3``, ...: the search goes on from
        where the last one for this base stopped (ids are never freed), so 100,000 unnamed Relu
        nodes take linear time, not the 5 * 10^9 membership tests of starting at 2 each time."""
        k = self._next_suffix.get(base, 1)
        cand = base if k == 1 else f"{base}_{k}"
        while cand in self.design.nodes:
            k += 1
            cand = f"{base}_{k}"
        self._next_suffix[base] = k
        return cand

    # -- finish -----------------------------------------------------------------------------

    def _finish(self):
        self._fast_path_layers()
        d = self.design
        rows: dict[int, int] = {}
        for nid, node in d.nodes.items():
            dep = self.depth.get(nid, 0)
            k = rows.get(dep, 0)
            rows[dep] = k + 1
            node.pos = (float(k * 220), float(dep * 90))
        emb = next((nd for nd in d.nodes.values() if nd.type == "Embedding"), None)
        inp = next(nd for nd in d.nodes.values() if nd.type == "Input")
        if emb is not None and inp.props.get("dtype") == "int64":
            inp.props["vocab"] = int(emb.props["num_embeddings"])
        from memdesigner.model.analysis import analyze

        an = analyze(d)
        for iss in an.issues:
            self.warnings.append(str(iss))
        params = sum(p.numel for nid, info in an.nodes.items() if info.ok for p in info.params
                     if p.trainable and p.name not in d.nodes[nid].tied)
        onnx_total = sum(self._src_numel(s) for s in self.claimed)
        buffers = sum(p.numel for nid, info in an.nodes.items() if info.ok for p in info.params
                      if not p.trainable and p.dtype is None and p.name not in d.nodes[nid].tied)
        if params + buffers != onnx_total:
            self.warnings.append(f"parameter count: the design has {params:,} (+{buffers:,} buffer values), "
                                 f"the ONNX initializers {onnx_total:,}")
        generic = [nd.props["op"] for nd in d.nodes.values() if nd.type == "Generic"]
        if generic:
            kinds = sorted(set(generic), key=generic.count, reverse=True)
            self.warnings.append(f"{len(generic)} of {len(d.nodes)} nodes are Generic (no memdesigner rule; their "
                                 f"outputs count, their memory rule is a guess): {', '.join(kinds[:10])}")
        d.import_params = params
        d.import_warnings = self.warnings


# ----------------------------------------------------------------------------------------------
# the docs' table (tools/make_onnx_docs.py writes it into docs/onnx-import.md)
# ----------------------------------------------------------------------------------------------
def ops_table() -> str:
    """Markdown: every ONNX op or fused pattern the registrations map, and onto which type."""
    rows = []
    for op, types in sorted(registry.onnx_index().items(), key=lambda kv: kv[0].lower()):
        rows.append(f"| `{op}` | {', '.join(lt.name for lt in types)} |")
    return "| ONNX op (or fused pattern) | memdesigner layer type |\n|---|---|\n" + "\n".join(rows) + "\n"


def _parse_shape(text):
    if not text:
        return None
    try:
        return tuple(int(p) for p in re.split(r"[,x×]", str(text)) if p.strip())
    except ValueError:
        raise OnnxImportError(f"--input-shape: {text!r} is not a list of integers") from None


def import_for_cli(args) -> Design:
    """`memdesigner import onnx MODEL.onnx -o DESIGN.json [--input-shape 3,224,224]`."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise OnnxImportError("ONNX import needs the onnx package (pip install 'memdesigner[onnx]')") from None
    out_dir = Path(args.output).resolve().parent
    if not out_dir.is_dir():
        raise OnnxImportError(f"{args.output}: the folder {out_dir} does not exist")
    return load_onnx(args.model, _parse_shape(getattr(args, "input_shape", None)))


__all__ = ["OnnxImportError", "dynamic_input", "from_model", "import_for_cli", "load_onnx", "ops_table"]

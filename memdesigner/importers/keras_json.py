"""Import a Keras model from the JSON that ``model.to_json()`` writes. No TensorFlow or Keras needed.

    from memdesigner.importers.keras_json import load_keras_json
    design = load_keras_json("model.json")        # a path, a JSON string or an already parsed dict
    design.import_warnings                          # what could not be mapped exactly
    design.keras_layers                             # Keras layer name -> node id holding its output

Both layouts are read:

* Keras 2 / tf.keras: ``{"class_name": "Sequential" | "Functional" | "Model", "config": {"layers":
  [...]}, "keras_version": ..., "backend": ...}``; the input shape is ``batch_input_shape`` (on an
  InputLayer or the first layer); a Functional layer's ``inbound_nodes`` is a list of calls, each a
  list of ``[layer_name, node_index, tensor_index, kwargs]``.
* Keras 3: the same plus ``"module"`` / ``"registered_name"``; InputLayer has ``batch_shape``,
  layers carry ``build_config.input_shape``, and each call in ``inbound_nodes`` is a dict
  ``{"args": [...], "kwargs": {...}}`` whose tensors are ``__keras_tensor__`` objects with a
  ``keras_history`` of ``[layer_name, node_index, tensor_index]``.

A ``.keras`` archive (a zip holding ``config.json``) is read too.

**Channels.** Keras lays images out channels-last, (H, W, C); memdesigner's layer rules are
channels-first, as PyTorch's. The importer converts every image tensor (3 or more dimensions per
sample) to channels-first internally: a Keras Input (1491, 257, 1) becomes an Input (1, 1491, 257),
Conv2D maps onto Conv2d, and ``Concatenate(axis=-1)`` onto ``Concat(dim=1)``. Element counts,
parameters and FLOPs are identical either way; ``design.channels_last`` is set to True and shapes
are shown the Keras way (below). Where a Keras layer works on the last axis of
an image tensor (Dense or LayerNormalization on (H, W, C)), the op is wrapped in two Permute views so
that it sees channels last, as in Keras. Sequences (2 dimensions per sample: steps, features) keep
the Keras layout, which is also PyTorch's batch-first layout. A model whose layers say
``data_format: "channels_first"`` is taken as it is.

**Parameters** are Keras's: ``Report.total_params`` is model.summary()'s "Total params",
``.params`` the trainable ones and ``.non_trainable_params`` BatchNormalization's moving mean and
variance (buffers: no gradient, no optimizer state; Keras has no ``num_batches_tracked``). Keras's
LSTM and GRU(reset_after=False) keep one bias vector per layer (``rnn_bias = "single"``); a GRU
with reset_after=True (Keras 3's default) keeps a (2, 3 x units) bias, PyTorch's bias_ih + bias_hh.

**Shapes** are shown as Keras shows them: each node records its layout (``Node.layout``), so the
report's ``output_shape`` of a Conv2D is (batch, H, W, C) and a Conv1D's (batch, steps, channels)
although the nodes hold them channels-first (memdesigner/model/shown_layout.py).

**Memory** follows Keras 3 on the PyTorch backend: nodes get ``impl = "keras_torch"`` (a separate
bias add, layout copies around convolutions and pooling, Keras's BatchNormalization ops and RNN
loop), and every Keras layer's output is held until the model's last op (``keep_until``): Keras's
``Function._run_through_graph`` keeps them all in a dict until the forward pass returns. A merge
layer's inputs live on to the end of the step (``keep_until = GC_HELD``): Keras leaves the list in
a reference cycle that only Python's garbage collector frees.

**Unknown layers** become Generic nodes (their output is counted, their inputs are assumed kept for
backward) and add a line to ``design.import_warnings``. Their output shape is taken from the Keras 3
file where a consumer's input tensor records it, computed for a few layers with simple shape rules,
else assumed equal to the input shape (with a warning).

Malformed files raise :class:`KerasImportError` (a ValueError) naming the layer and the problem.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from memdesigner.io.bounded_read import BoundedReadError, max_bytes, parse_json, read_bytes
from memdesigner.limits import raise_hint
from memdesigner.model import registry
from memdesigner.model.design import GC_HELD, Design
from memdesigner.model.registry import LayerError, ShapeCtx, TensorSpec
from memdesigner.model.torchmap import KerasCall
from memdesigner.text import first_line, one_line

DX, DY = 220.0, 150.0

# Keras layers called on a list of tensors that keeps the list in a reference cycle (measured)
MERGE_CLASSES = {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate", "Dot"}


def keras_shape(shape, channels_last: bool = True) -> tuple:
    """An internal per-sample shape as Keras shows it: channels last for images (3+ dimensions)."""
    shape = tuple(shape)
    if channels_last and len(shape) >= 3:
        return shape[1:] + shape[:1]
    return shape


class KerasImportError(ValueError):
    """A Keras JSON file that cannot be imported; the message names the layer and the problem, on
    one printable line (layer names are the file's text)."""

    def __init__(self, message: str):
        super().__init__(first_line(message))


# What a malformed config makes the mapping code raise (a list where a number belongs, inf as a
# size, a missing entry, nesting deeper than Python recurses): each becomes a KerasImportError.
_MALFORMED = (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, ZeroDivisionError,
              RecursionError)


@dataclass
class _Ref:
    """A tensor in the design: node output port, its per-sample spec (internal layout) and whether
    the internal layout moved the channels first (Keras layout differs)."""

    node: str
    port: int
    spec: TensorSpec
    moved: bool = False


# Keras activations memdesigner has no rule for (imported as Generic with a calmer warning than an
# unknown name); a type that declares one in keras_activations wins (it is looked up first)
_ELEMENTWISE_UNKNOWN = {"elu", "selu", "softplus", "hard_sigmoid", "hard_silu", "hard_swish",
                        "exponential", "mish", "celu", "glu", "sparse_plus", "squareplus",
                        "tanh_shrink", "hard_tanh", "soft_shrink", "hard_shrink", "threshold", "log_sigmoid"}
# types whose Keras implementation differs from PyTorch's whatever the data format (the bias add,
# BatchNormalization's ops); the rest (layout copies) only for channels-last models
_KERAS_OPS_ANY_LAYOUT = {"Linear", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d"}
_IDENTITY_LAYERS = {"Masking", "ActivityRegularization", "GaussianNoise", "GaussianDropout", "AlphaDropout",
                    "SpatialDropout3D"}


def load_keras_json(source, *, unknown_dim: int | None = None, name: str | None = None) -> Design:
    """Build a Design from Keras ``model.to_json()`` output.

    ``source``: a path (str or Path) to a .json or .keras file, a JSON string, or a parsed dict.
    ``unknown_dim``: a size to use for dimensions Keras leaves open (None), e.g. a variable sequence
    length; without it such a model raises KerasImportError.
    """
    data, where = _read(source)
    imp = _Importer(data, where, unknown_dim, name)
    try:
        return imp.run()
    except KerasImportError:
        raise
    except _MALFORMED as err:
        loc = f"layer {imp.current!r}: " if imp.current else ""
        raise KerasImportError(f"{where}: {loc}malformed Keras config ({type(err).__name__}: {err})") from None


# -- reading ------------------------------------------------------------------------------------
def _read(source):
    if isinstance(source, dict):
        return source, "keras model"
    if isinstance(source, (bytes, bytearray)):
        source = bytes(source).decode("utf-8", errors="replace")
    if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith(("{", "["))):
        path = Path(source)
        where = str(path)
        try:  # bounded: a FIFO, a device or an endless file is refused before zipfile or json sees it
            raw = read_bytes(path, "Keras model file")
            text = _zip_config(raw, path) if zipfile.is_zipfile(io.BytesIO(raw)) else raw.decode("utf-8")
        except BoundedReadError as err:
            raise KerasImportError(str(err)) from None
        except UnicodeDecodeError as err:
            raise KerasImportError(f"{path}: not UTF-8 text (byte {err.start}): not a Keras JSON file") from None
    elif isinstance(source, str):
        text, where = source, "keras JSON"
    else:
        raise KerasImportError(f"expected a path, a JSON string or a dict, got {type(source).__name__}")
    try:
        data = parse_json(text, where)
    except BoundedReadError as err:
        raise KerasImportError(str(err)) from None
    return data, where


def _zip_config(raw: bytes, path: Path) -> str:
    """config.json of a .keras archive, inflated to at most MEMDESIGNER_MAX_FILE_MB (a zip bomb
    of a few kB would otherwise inflate to gigabytes)."""
    cap = max_bytes()
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            if "config.json" not in z.namelist():
                raise KerasImportError(f"{path}: a zip file without config.json is not a .keras model")
            if z.getinfo("config.json").file_size > cap:
                raise KerasImportError(f"{path}: config.json inflates to more than the {cap // 1_000_000:,} MB limit "
                                       f"({raise_hint('FILE_MB')})")
            with z.open("config.json") as f:
                data = f.read(cap + 1)  # the declared size may lie
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError, ValueError) as err:
        if isinstance(err, KerasImportError):
            raise
        raise KerasImportError(f"{path}: a damaged .keras archive: {one_line(str(err))}") from None
    if len(data) > cap:
        raise KerasImportError(f"{path}: config.json inflates to more than the {cap // 1_000_000:,} MB limit "
                               f"({raise_hint('FILE_MB')})")
    return data.decode("utf-8")


def _cfg_name(layer: dict) -> str:
    cfg = layer.get("config") if isinstance(layer.get("config"), dict) else {}
    return str(layer.get("name") or cfg.get("name") or layer.get("class_name") or "layer")


def _safe_id(s: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_")
    return s or "layer"


def _pair(v, n=2):
    if isinstance(v, (list, tuple)):
        v = [int(x) for x in v]
        if len(v) == 1:
            return v[0]
        return v[0] if len(set(v)) == 1 else list(v)
    return int(v)


def _tuple(v, n):
    if isinstance(v, (list, tuple)):
        v = tuple(int(x) for x in v)
        return v * n if len(v) == 1 else v
    return (int(v),) * n


def _act_name(act):
    if act is None:
        return "linear"
    if isinstance(act, dict):  # Keras 3 serialised function / layer
        cfg = act.get("config")
        if isinstance(cfg, str):
            return cfg
        if isinstance(cfg, dict) and cfg.get("name"):
            return str(cfg["name"])
        return str(act.get("class_name", "unknown")).lower()
    return str(act)


class _Importer:
    def __init__(self, data, where, unknown_dim, name):
        self.data = data
        self.where = where
        self.unknown_dim = unknown_dim
        self.name = name
        self.d: Design | None = None
        self.specs: dict[str, list] = {}  # node id -> output TensorSpecs
        self.warnings: list[str] = []
        self.lane: dict[str, int] = {}
        self.channels_last = True
        self.k3_shapes: dict[tuple, list] = {}  # (layer, node_index, tensor_index) -> Keras shape
        self.keras_layers: dict[str, str] = {}  # Keras layer name -> the node that holds its output
        self.gc_held: set[str] = set()  # nodes whose output a merge layer left in a reference cycle
        self.refs: dict[str, _Ref] = {}  # node id -> its output (whose .moved handlers may still set)
        self.current: str | None = None  # the layer being mapped, for errors

    # -- errors and helpers ---------------------------------------------------------------------
    def fail(self, msg: str, layer: str | None = None):
        loc = f"layer {layer!r}: " if layer else ""
        raise KerasImportError(f"{self.where}: {loc}{msg}")

    def warn(self, msg: str):
        self.warnings.append(one_line(msg))

    def new_id(self, base: str) -> str:
        base = _safe_id(base)
        nid, i = base, 1
        while nid in self.d.nodes:
            i += 1
            nid = f"{base}_{i}"
        return nid

    def node(self, type_name: str, inputs: list, props: dict, base_id: str, keras_name: str,
             lane: int = 0) -> _Ref:
        """Add a node, connect its inputs, compute its output with the registry's shape rule."""
        lt = registry.get(type_name)
        nid = self.new_id(base_id)
        if any(p.name == "impl" for p in lt.props) and (self.channels_last or lt.name in _KERAS_OPS_ANY_LAYOUT):
            props = {**props, "impl": "keras_torch"}  # memory as the Keras layer runs on the torch backend
        try:
            coerced = lt.coerce_props(props)
        except LayerError as err:
            self.fail(f"{lt.name}.{err.field}: {err.message}", keras_name)
        self.d.add_node(lt.name, props, id=nid, name=nid)
        for port, r in enumerate(inputs):
            self.d.add_edge(r.node, nid, r.port, port)
        try:
            outs = list(lt.shape(ShapeCtx(coerced, [r.spec for r in inputs], nid)))
        except LayerError as err:
            self.fail(f"{lt.name}.{err.field}: {err.message}", keras_name)
        except (ValueError, TypeError, IndexError, ZeroDivisionError) as err:
            self.fail(f"{lt.name}: invalid configuration: {err}", keras_name)
        self.specs[nid] = outs
        self.lane[nid] = lane
        moved = bool(inputs) and inputs[0].moved and len(outs[0].shape) >= 3
        ref = self.refs[nid] = _Ref(nid, 0, outs[0], moved)
        return ref

    def to_internal(self, shape: tuple) -> tuple[tuple, bool]:
        """A Keras per-sample shape -> the internal (channels-first) one, and whether it moved."""
        if self.channels_last and len(shape) >= 3:
            return (shape[-1],) + tuple(shape[:-1]), True
        return tuple(shape), False

    def axis(self, a: int, r: _Ref) -> int:
        """A Keras axis (batch = 0) -> the internal dimension (batch = 0)."""
        rank = len(r.spec.shape) + 1
        a = int(a)
        if not -rank <= a < rank:
            self.fail(f"axis {a} is out of range for a {rank}-D tensor")
        a %= rank
        if r.moved and a >= 1:
            return 1 if a == rank - 1 else a + 1
        return a

    def last_axis(self, r: _Ref, build, keras_name: str, base: str) -> _Ref:
        """Apply ``build(ref) -> ref`` to a tensor whose channels Keras keeps last: wrap in Permutes."""
        if not r.moved:
            return build(r)
        rank = len(r.spec.shape) + 1
        to_last = [0] + list(range(2, rank)) + [1]
        back = [0, rank - 1] + list(range(1, rank - 1))
        p = self.node("Permute", [r], {"dims": to_last}, base + "_to_channels_last", keras_name)
        p.moved = False
        y = build(p)
        out = self.node("Permute", [y], {"dims": back}, base + "_to_channels_first", keras_name)
        out.moved = True
        return out

    def activation(self, r: _Ref, act, keras_name: str, base: str) -> _Ref:
        a = _act_name(act).lower()
        if a in ("linear", "none", ""):
            return r
        lt = registry.keras_activation_index().get(a)
        if lt is not None:  # the type's own file names its Keras activations
            call = KerasCall(a, axis=lambda ax: self.axis(ax, r))
            props = lt.from_keras(call) if lt.from_keras else {}
            return self.node(lt.name, [r], props, f"{base}_{a}", keras_name)
        if a in _ELEMENTWISE_UNKNOWN:
            self.warn(f"{keras_name}: activation {a!r} has no memdesigner rule; imported as a Generic "
                      "element-wise op")
        else:
            self.warn(f"{keras_name}: unknown activation {a!r}; imported as a Generic element-wise op")
        return self.generic([r], a, r.spec.shape, keras_name, f"{base}_{a}", moved=r.moved)

    def generic(self, inputs, op: str, shape, keras_name: str, base: str, moved=False) -> _Ref:
        dtype = inputs[0].spec.kind if inputs and inputs[0].spec.kind in ("int64", "bool") else "float"
        ref = self.node("Generic", inputs, {"op": op, "out_shape": list(shape), "dtype": dtype}, base, keras_name)
        ref.moved = moved
        return ref

    def dim(self, v, what: str, keras_name: str) -> int:
        if v is None:
            if self.unknown_dim is None:
                self.fail(f"{what} has an open dimension (None); memdesigner needs fixed sizes: give the "
                          "Keras Input a fixed shape or pass unknown_dim=...", keras_name)
            self.warn(f"{keras_name}: open dimension in {what} set to {self.unknown_dim}")
            return int(self.unknown_dim)
        try:
            v = int(v)
        except (TypeError, ValueError):
            self.fail(f"{what}: {v!r} is not a dimension size", keras_name)
        if v <= 0:
            self.fail(f"{what}: dimension {v} must be positive", keras_name)
        return v

    # -- top level ------------------------------------------------------------------------------
    def run(self) -> Design:
        data = self.data
        if not isinstance(data, dict):
            self.fail(f"expected a JSON object (Keras model config), got {type(data).__name__}")
        if "class_name" not in data and "config" in data and isinstance(data.get("config"), dict) \
                and "class_name" in data["config"]:
            data = data["config"]  # {"config": {...model...}} wrappers
        if "model_config" in data and isinstance(data["model_config"], dict):
            data = data["model_config"]
        cls = data.get("class_name")
        if not isinstance(cls, str):
            self.fail("no 'class_name': this is not a Keras model config (expected what model.to_json() writes)")
        cfg = data.get("config")
        if cls == "Sequential":
            layers = cfg if isinstance(cfg, list) else (cfg or {}).get("layers") if isinstance(cfg, dict) else None
        elif cls in ("Functional", "Model"):
            layers = cfg.get("layers") if isinstance(cfg, dict) else None
        else:
            self.fail(f"model class {cls!r} is not supported (Sequential, Functional or Model)")
        if not isinstance(layers, list) or not layers:
            self.fail(f"{cls}: 'config.layers' must be a non-empty list of layers")
        for i, layer in enumerate(layers):
            if not isinstance(layer, dict) or not isinstance(layer.get("class_name"), str) \
                    or not isinstance(layer.get("config", {}), dict):
                self.fail(f"{cls}: config.layers[{i}] is not a layer object with 'class_name' and 'config'")
        mname = self.name or (cfg.get("name") if isinstance(cfg, dict) else None) or cls.lower()
        self.channels_last = not any(
            (lay.get("config") or {}).get("data_format") == "channels_first" for lay in layers)
        self.d = Design(name=str(mname), channels_last=self.channels_last)
        self.d.description = f"Imported from Keras ({cls}, {len(layers)} layers)."
        if cls == "Sequential":
            self.sequential(layers, cfg if isinstance(cfg, dict) else {})
        else:
            self.functional(layers, cfg)
        self.layout()
        self.record_layouts()
        self.hold_layer_outputs()
        self.d.import_warnings = list(self.warnings)
        self.d.keras_layers = dict(self.keras_layers)
        return self.d

    def input_node(self, shape, dtype, keras_name: str, feeds_embedding: bool) -> _Ref:
        if not isinstance(shape, (list, tuple)) or len(shape) < 2:
            self.fail(f"input shape {shape!r} must list the batch and at least one dimension", keras_name)
        per = tuple(self.dim(v, "the input shape", keras_name) for v in shape[1:])
        internal, moved = self.to_internal(per)
        is_int = str(dtype or "float32").startswith(("int", "uint")) or feeds_embedding
        props = {"shape": list(internal), "dtype": "int64" if is_int else "float"}
        ref = self.node("Input", [], props, keras_name, keras_name)
        ref.moved = moved
        return ref

    @staticmethod
    def layer_input_shape(layer: dict):
        cfg = layer.get("config") or {}
        for key in ("batch_input_shape", "batch_shape"):
            if cfg.get(key) is not None:
                return cfg[key]
        bc = layer.get("build_config") or {}
        if isinstance(bc, dict) and bc.get("input_shape") is not None:
            return bc["input_shape"]
        return None

    def sequential(self, layers: list, cfg: dict):
        first = layers[0]
        feeds_emb = any(lay["class_name"] == "Embedding" for lay in layers[:2])
        if first["class_name"] == "InputLayer":
            c = first.get("config") or {}
            x = self.input_node(self.layer_input_shape(first), c.get("dtype"), _cfg_name(first), feeds_emb)
            self.keras_layers[_cfg_name(first)] = x.node
            rest = layers[1:]
        else:
            shape = self.layer_input_shape(first) or cfg.get("build_input_shape")
            if shape is None:
                self.fail("the model has no input shape (no InputLayer, batch_input_shape or build_config); "
                          "build the model or give its first layer input_shape=...", _cfg_name(first))
            dtype = (first.get("config") or {}).get("dtype")
            if isinstance(dtype, dict):
                dtype = None
            x = self.input_node(shape, dtype, "input", feeds_emb)
            rest = layers
        for layer in rest:
            outs = self.layer(layer, [x], _cfg_name(layer))
            x = outs[0]
            self.keras_layers[_cfg_name(layer)] = x.node

    def functional(self, layers: list, cfg: dict):
        by_name = {}
        for layer in layers:
            by_name[_cfg_name(layer)] = layer
        consumers_of: dict[str, set] = {}
        calls_of: dict[str, list] = {}
        for layer in layers:
            lname = _cfg_name(layer)
            calls = []
            nodes = layer.get("inbound_nodes", [])
            if not isinstance(nodes, list):
                self.fail("'inbound_nodes' must be a list", lname)
            for ci, call in enumerate(nodes):
                refs = self.call_refs(call, lname, ci)
                calls.append(refs)
                for (src, _, _, _) in refs:
                    consumers_of.setdefault(src, set()).add(layer["class_name"])
            calls_of[lname] = calls
        produced: dict[tuple, _Ref] = {}  # (layer, node_index, tensor_index) -> ref
        pending = list(layers)
        progress = True
        while pending and progress:
            progress = False
            for layer in list(pending):
                lname = _cfg_name(layer)
                if layer["class_name"] == "InputLayer":
                    c = layer.get("config") or {}
                    shape = self.layer_input_shape(layer)
                    if shape is None:
                        self.fail("InputLayer without batch_shape / batch_input_shape", lname)
                    ref = self.input_node(shape, c.get("dtype"), lname, "Embedding" in consumers_of.get(lname, ()))
                    produced[(lname, 0, 0)] = ref
                    self.keras_layers[lname] = ref.node
                    pending.remove(layer)
                    progress = True
                    continue
                calls = calls_of[lname]
                if not calls:
                    self.warn(f"{lname}: layer is never called in the graph; skipped")
                    pending.remove(layer)
                    progress = True
                    continue
                if not all((s, n, t) in produced for refs in calls for (s, n, t, _) in refs):
                    continue
                if len(calls) > 1:
                    self.warn(f"{lname}: layer is called {len(calls)} times (shared weights); each call is a "
                              "separate node, so its parameters are counted once per call")
                for ci, refs in enumerate(calls):
                    ins = [produced[(s, n, t)] for (s, n, t, _) in refs]
                    if not ins:
                        self.fail("a call without input tensors", lname)
                    if layer["class_name"] in MERGE_CLASSES:
                        self.gc_held.update(r.node for r in ins)
                    outs = self.layer(layer, ins, lname if ci == 0 else f"{lname}_call{ci}",
                                      k3_out=self.k3_out_shape(lname, ci, 0))
                    for t, r in enumerate(outs):
                        produced[(lname, ci, t)] = r
                    self.keras_layers[lname if ci == 0 else f"{lname}_call{ci}"] = outs[0].node
                pending.remove(layer)
                progress = True
        if pending:
            names = {_cfg_name(lay) for lay in layers}
            pending_names = {_cfg_name(p) for p in pending}
            problems = []
            for layer in pending:
                for refs in calls_of.get(_cfg_name(layer), []):
                    for (s, n, t, _) in refs:
                        if (s, n, t) in produced:
                            continue
                        if s not in names:
                            problems.append(f"{_cfg_name(layer)} <- {s} (no such layer in the model)")
                        elif s not in pending_names:
                            problems.append(f"{_cfg_name(layer)} <- {s} (it has no output [{n}, {t}])")
            if problems:
                self.fail("inbound_nodes refer to tensors that do not exist: " + ", ".join(problems))
            self.fail("the layer graph has a cycle through " + ", ".join(sorted(pending_names)))

    def call_refs(self, call, lname: str, ci: int) -> list:
        """One inbound node -> [(layer, node_index, tensor_index, keras_shape_or_None), ...]."""
        out = []
        if isinstance(call, dict):  # Keras 3: {"args": [...], "kwargs": {...}}
            def walk(obj):
                if isinstance(obj, dict):
                    if obj.get("class_name") == "__keras_tensor__":
                        c = obj.get("config") or {}
                        hist = c.get("keras_history")
                        if not (isinstance(hist, list) and len(hist) == 3):
                            self.fail(f"inbound_nodes[{ci}]: a keras tensor without a valid keras_history", lname)
                        key = (str(hist[0]), int(hist[1]), int(hist[2]))
                        shape = c.get("shape")
                        if isinstance(shape, list):
                            self.k3_shapes[key] = shape
                        out.append(key + (shape,))
                        return
                    for v in obj.values():
                        walk(v)
                elif isinstance(obj, list):
                    for v in obj:
                        walk(v)
            walk(call.get("args", []))
            walk(call.get("kwargs", {}))
            return out
        if isinstance(call, list):  # Keras 2: [[name, node_index, tensor_index, kwargs], ...]
            for entry in call:
                if not (isinstance(entry, list) and len(entry) >= 3 and isinstance(entry[0], str)):
                    self.fail(f"inbound_nodes[{ci}]: {entry!r} is not [layer_name, node_index, tensor_index, "
                              "kwargs]", lname)
                out.append((entry[0], int(entry[1]), int(entry[2]), None))
            return out
        self.fail(f"inbound_nodes[{ci}] is neither a list (Keras 2) nor a dict with 'args' (Keras 3)", lname)

    def k3_out_shape(self, lname: str, ci: int, t: int):
        shape = self.k3_shapes.get((lname, ci, t))
        if isinstance(shape, list) and len(shape) >= 2 and all(isinstance(v, int) for v in shape[1:]):
            return tuple(shape[1:])
        return None

    # -- one Keras layer ------------------------------------------------------------------------
    def layer(self, layer: dict, ins: list, lname: str, k3_out=None) -> list:
        cls = layer["class_name"]
        self.current = lname
        c = layer.get("config") or {}
        x = ins[0]
        rank = len(x.spec.shape)
        try:
            fn = getattr(self, "_l_" + cls, None)
            if fn is not None:
                out = fn(c, ins, lname)
                if out is not None:
                    return out if isinstance(out, list) else [out]
        except KerasImportError:
            raise
        except _MALFORMED as err:
            self.fail(f"{cls}: bad config: {type(err).__name__}: {err}", lname)
        if cls in _IDENTITY_LAYERS:
            return [x]
        # unknown: a Generic node
        shape, moved = None, False
        if k3_out is not None:
            shape, moved = self.to_internal(k3_out)
        if shape is None:
            shape = self.simple_shape(cls, c, x)
            moved = x.moved and shape is not None and len(shape) == rank
        if shape is None:
            shape, moved = x.spec.shape, x.moved
            self.warn(f"{lname}: Keras layer {cls!r} is not supported; imported as a Generic node, output shape "
                      "assumed equal to its input; its parameters (if any) are not counted")
        else:
            self.warn(f"{lname}: Keras layer {cls!r} is not supported; imported as a Generic node: its "
                      "parameters (if any) are not counted")
        return [self.generic(ins, cls, shape, lname, lname, moved=moved)]

    def simple_shape(self, cls, c, x: _Ref):
        """Output shapes (internal layout) of a few unsupported layers."""
        s = x.spec.shape
        if cls == "ZeroPadding2D" and x.moved and len(s) == 3:
            p = c.get("padding", 1)
            if isinstance(p, int):
                (t, b), (lft, r) = (p, p), (p, p)
            elif isinstance(p[0], int):
                (t, b), (lft, r) = (p[0], p[0]), (p[1], p[1])
            else:
                (t, b), (lft, r) = p
            return (s[0], s[1] + t + b, s[2] + lft + r)
        if cls == "Cropping2D" and x.moved and len(s) == 3:
            p = c.get("cropping", 0)
            if isinstance(p, int):
                (t, b), (lft, r) = (p, p), (p, p)
            elif isinstance(p[0], int):
                (t, b), (lft, r) = (p[0], p[0]), (p[1], p[1])
            else:
                (t, b), (lft, r) = p
            return (s[0], s[1] - t - b, s[2] - lft - r)
        if cls == "RepeatVector" and len(s) == 1:
            return (int(c["n"]), s[0])
        return None

    # Each _l_<ClassName>(config, inputs, keras_name) returns a _Ref, a list of _Ref, or None
    # (None: not handled, becomes Generic).
    def _l_InputLayer(self, c, ins, n):
        return ins[0]

    def _conv(self, c, x, n, dims):
        if len(x.spec.shape) != dims + 1:
            self.fail(f"expects a {dims + 1}-D input per sample, got {x.spec.shape}", n)
        props = {
            "out_channels": int(c["filters"]), "kernel": _pair(c["kernel_size"]),
            "stride": _pair(c.get("strides", 1)), "padding": str(c.get("padding", "valid")).upper(),
            "dilation": _pair(c.get("dilation_rate", 1)), "groups": int(c.get("groups", 1) or 1),
            "bias": bool(c.get("use_bias", True)),
        }
        if props["padding"] == "CAUSAL":
            self.warn(f"{n}: causal padding imported as SAME (same output length and memory)")
            props["padding"] = "SAME"
        return props

    def _l_Conv2D(self, c, ins, n):
        x = ins[0]
        y = self.node("Conv2d", [x], self._conv(c, x, n, 2), n, n)
        y.moved = x.moved
        return self.activation(y, c.get("activation"), n, n)

    _l_Convolution2D = _l_Conv2D

    def _l_Conv3D(self, c, ins, n):
        x = ins[0]
        y = self.node("Conv3d", [x], self._conv(c, x, n, 3), n, n)
        y.moved = x.moved
        return self.activation(y, c.get("activation"), n, n)

    def _l_Conv1D(self, c, ins, n):
        x = ins[0]
        if len(x.spec.shape) != 2:
            self.fail(f"expects a (steps, channels) input per sample, got {x.spec.shape}", n)
        props = self._conv(c, x, n, 1)
        if self.channels_last:  # Keras (steps, channels) -> Conv1d wants (channels, steps)
            t = self.node("Permute", [x], {"dims": [0, 2, 1]}, n + "_to_channels_first", n)
            t.moved = True
            y = self.node("Conv1d", [t], props, n, n)
            y.moved = True
            y = self.node("Permute", [y], {"dims": [0, 2, 1]}, n + "_to_channels_last", n)
        else:
            y = self.node("Conv1d", [x], props, n, n)
        return self.activation(y, c.get("activation"), n, n)

    def _l_Conv2DTranspose(self, c, ins, n):
        x = ins[0]
        pad = str(c.get("padding", "valid")).lower()
        k = _tuple(c["kernel_size"], 2)
        s = _tuple(c.get("strides", 1), 2)
        if pad == "same":
            # Keras 'same': output = input * stride; PyTorch padding (k - s) / 2 with output_padding
            p = [max(kk - ss, 0) for kk, ss in zip(k, s)]
            padding = [(pp + 1) // 2 for pp in p]
            out_pad = [2 * pq - pp for pq, pp in zip(padding, p)]
        else:
            padding, out_pad = [0, 0], [max(ss - kk, 0) for kk, ss in zip(k, s)]
        props = {"out_channels": int(c["filters"]), "kernel": _pair(list(k)), "stride": _pair(list(s)),
                 "padding": _pair(padding), "output_padding": _pair(out_pad),
                 "dilation": _pair(c.get("dilation_rate", 1)), "bias": bool(c.get("use_bias", True))}
        y = self.node("ConvTranspose2d", [x], props, n, n)
        y.moved = x.moved
        return self.activation(y, c.get("activation"), n, n)

    def _l_DepthwiseConv2D(self, c, ins, n):
        x = ins[0]
        if len(x.spec.shape) != 3:
            self.fail(f"expects a 3-D input per sample, got {x.spec.shape}", n)
        cin = x.spec.shape[0]
        m = int(c.get("depth_multiplier", 1))
        props = {"out_channels": cin * m, "kernel": _pair(c["kernel_size"]), "stride": _pair(c.get("strides", 1)),
                 "padding": str(c.get("padding", "valid")).upper(), "dilation": _pair(c.get("dilation_rate", 1)),
                 "groups": cin, "bias": bool(c.get("use_bias", True))}
        y = self.node("Conv2d", [x], props, n, n)
        y.moved = x.moved
        return self.activation(y, c.get("activation"), n, n)

    def _l_SeparableConv2D(self, c, ins, n):
        x = ins[0]
        if len(x.spec.shape) != 3:
            self.fail(f"expects a 3-D input per sample, got {x.spec.shape}", n)
        cin = x.spec.shape[0]
        m = int(c.get("depth_multiplier", 1))
        dw = {"out_channels": cin * m, "kernel": _pair(c["kernel_size"]), "stride": _pair(c.get("strides", 1)),
              "padding": str(c.get("padding", "valid")).upper(), "dilation": _pair(c.get("dilation_rate", 1)),
              "groups": cin, "bias": False}
        y = self.node("Conv2d", [x], dw, n + "_depthwise", n)
        y = self.node("Conv2d", [y], {"out_channels": int(c["filters"]), "kernel": 1, "padding": "VALID",
                                      "bias": bool(c.get("use_bias", True))}, n + "_pointwise", n)
        y.moved = x.moved
        return self.activation(y, c.get("activation"), n, n)

    def _l_Dense(self, c, ins, n):
        x = ins[0]
        units = int(c["units"])
        bias = bool(c.get("use_bias", True))
        y = self.last_axis(x, lambda r: self.node("Linear", [r], {"out_features": units, "bias": bias}, n, n), n, n)
        return self.activation(y, c.get("activation"), n, n)

    def _l_Flatten(self, c, ins, n):
        x = ins[0]
        if len(x.spec.shape) == 1:
            return x
        return self.node("Flatten", [x], {}, n, n)

    def _pool(self, c, ins, n, type_name, dims):
        x = ins[0]
        if len(x.spec.shape) != dims + 1:
            self.fail(f"expects a {dims + 1}-D input per sample, got {x.spec.shape}", n)
        k = c.get("pool_size", 2)
        strides = c.get("strides") or k
        props = {"kernel": _pair(k), "stride": _pair(strides), "padding": str(c.get("padding", "valid")).upper()}
        y = self.node(type_name, [x], props, n, n)
        y.moved = x.moved
        return y

    def _l_MaxPooling2D(self, c, ins, n):
        return self._pool(c, ins, n, "MaxPool2d", 2)

    _l_MaxPool2D = _l_MaxPooling2D

    def _l_AveragePooling2D(self, c, ins, n):
        return self._pool(c, ins, n, "AvgPool2d", 2)

    _l_AvgPool2D = _l_AveragePooling2D

    def _l_MaxPooling3D(self, c, ins, n):
        return self._pool(c, ins, n, "MaxPool3d", 3)

    _l_MaxPool3D = _l_MaxPooling3D

    def _l_AveragePooling3D(self, c, ins, n):
        return self._pool(c, ins, n, "AvgPool3d", 3)

    _l_AvgPool3D = _l_AveragePooling3D

    def _l_MaxPooling1D(self, c, ins, n):
        x = ins[0]
        if not self.channels_last:
            return self._pool(c, ins, n, "MaxPool1d", 1)
        t = self.node("Permute", [x], {"dims": [0, 2, 1]}, n + "_to_channels_first", n)
        t.moved = True
        y = self._pool(c, [t], n, "MaxPool1d", 1)
        y.moved = True
        return self.node("Permute", [y], {"dims": [0, 2, 1]}, n + "_to_channels_last", n)

    _l_MaxPool1D = _l_MaxPooling1D

    def _global_pool(self, c, ins, n, kind):
        x = ins[0]
        if len(x.spec.shape) != 3:
            self.fail(f"expects a 3-D input per sample, got {x.spec.shape}", n)
        if kind == "avg":
            y = self.node("AdaptiveAvgPool2d", [x], {"output_size": 1}, n, n)
        else:
            h, w = x.spec.shape[1:]
            y = self.node("MaxPool2d", [x], {"kernel": [h, w], "stride": [h, w]}, n, n)
        if c.get("keepdims", False):
            y.moved = x.moved
            return y
        return self.node("Flatten", [y], {}, n + "_flatten", n)

    def _l_GlobalAveragePooling2D(self, c, ins, n):
        return self._global_pool(c, ins, n, "avg")

    _l_GlobalAvgPool2D = _l_GlobalAveragePooling2D

    def _l_GlobalMaxPooling2D(self, c, ins, n):
        return self._global_pool(c, ins, n, "max")

    _l_GlobalMaxPool2D = _l_GlobalMaxPooling2D

    def _l_GlobalAveragePooling1D(self, c, ins, n):
        x = ins[0]
        if len(x.spec.shape) != 2:
            self.fail(f"expects a (steps, features) input per sample, got {x.spec.shape}", n)
        step_axis = 1 if self.channels_last else 2
        return self.node("Mean", [x], {"dim": step_axis, "keepdim": bool(c.get("keepdims", False))}, n, n)

    _l_GlobalAvgPool1D = _l_GlobalAveragePooling1D

    def _l_BatchNormalization(self, c, ins, n):
        x = ins[0]
        axis = c.get("axis", -1)
        if isinstance(axis, list):
            if len(axis) != 1:
                return None
            axis = axis[0]
        a = self.axis(axis, x)
        rank = len(x.spec.shape)
        center, scale = bool(c.get("center", True)), bool(c.get("scale", True))
        if center != scale:
            self.warn(f"{n}: center={center}, scale={scale}: memdesigner's BatchNorm has both affine "
                      "parameters or none; imported with both")
        props = {"eps": float(c.get("epsilon", 1e-3)), "momentum": round(1.0 - float(c.get("momentum", 0.99)), 6),
                 "affine": center or scale}
        if a == 1 and rank in (3, 4):  # images, volumes / video
            y = self.node("BatchNorm2d" if rank == 3 else "BatchNorm3d", [x], props, n, n)
            y.moved = x.moved
            return y
        if a == 1 and rank in (1, 2):
            return self.node("BatchNorm1d", [x], props, n, n)
        if rank == 2 and a == 2:  # (steps, features) normalised over features: BatchNorm1d wants (C, L)
            t = self.node("Permute", [x], {"dims": [0, 2, 1]}, n + "_to_channels_first", n)
            t.moved = True
            y = self.node("BatchNorm1d", [t], props, n, n)
            y.moved = True
            return self.node("Permute", [y], {"dims": [0, 2, 1]}, n + "_to_channels_last", n)
        return None

    def _l_LayerNormalization(self, c, ins, n):
        x = ins[0]
        axis = c.get("axis", -1)
        if isinstance(axis, list):
            if len(axis) != 1:
                return None
            axis = axis[0]
        rank = len(x.spec.shape) + 1
        if int(axis) % rank != rank - 1:
            return None
        props = {"eps": float(c.get("epsilon", 1e-3)),
                 "elementwise_affine": bool(c.get("center", True) or c.get("scale", True))}
        return self.last_axis(x, lambda r: self.node("LayerNorm", [r], props, n, n), n, n)

    def _l_Dropout(self, c, ins, n):
        y = self.node("Dropout", [ins[0]], {"p": float(c.get("rate", 0.5))}, n, n)
        y.moved = ins[0].moved
        return y

    _l_SpatialDropout2D = _l_Dropout
    _l_SpatialDropout1D = _l_Dropout

    def _l_Activation(self, c, ins, n):
        return self.activation(ins[0], c.get("activation"), n, n)

    def _l_ReLU(self, c, ins, n):
        x = ins[0]
        mv = c.get("max_value")
        slope = float(c.get("negative_slope", 0.0) or 0.0)
        thr = float(c.get("threshold", 0.0) or 0.0)
        if thr:
            self.warn(f"{n}: ReLU threshold {thr} ignored (same memory)")
        if mv is not None and float(mv) == 6.0 and slope == 0.0:
            return self.node("ReLU6", [x], {}, n, n)
        if mv is not None:
            self.warn(f"{n}: ReLU max_value {mv} imported as ReLU6-like clamp (same memory)")
            return self.node("ReLU6", [x], {}, n, n)
        if slope:
            return self.node("LeakyReLU", [x], {"negative_slope": slope}, n, n)
        return self.node("ReLU", [x], {}, n, n)

    def _l_LeakyReLU(self, c, ins, n):
        slope = c.get("negative_slope", c.get("alpha", 0.3))
        return self.node("LeakyReLU", [ins[0]], {"negative_slope": float(slope)}, n, n)

    def _l_Softmax(self, c, ins, n):
        axis = c.get("axis", -1)
        if isinstance(axis, list):
            axis = axis[0] if len(axis) == 1 else -1
        return self.node("Softmax", [ins[0]], {"dim": self.axis(axis, ins[0])}, n, n)

    def _l_ELU(self, c, ins, n):
        return self.activation(ins[0], "elu", n, n)

    def _l_Add(self, c, ins, n):
        if len(ins) < 2:
            self.fail("Add needs at least two inputs", n)
        y = self.node("Add", ins, {}, n, n)
        y.moved = ins[0].moved
        return y

    def _l_Multiply(self, c, ins, n):
        if len(ins) != 2:
            return None
        y = self.node("Multiply", ins, {}, n, n)
        y.moved = ins[0].moved
        return y

    def _l_Concatenate(self, c, ins, n):
        if len(ins) < 2:
            self.fail("Concatenate needs at least two inputs", n)
        if len({r.moved for r in ins}) > 1:
            self.fail("Concatenate of tensors with different layouts", n)
        y = self.node("Concat", ins, {"dim": self.axis(c.get("axis", -1), ins[0])}, n, n)
        y.moved = ins[0].moved
        return y

    def _l_Embedding(self, c, ins, n):
        x = ins[0]
        if x.spec.kind != "int64":
            self.fail("Embedding needs integer token ids; its input is float", n)
        if c.get("input_length") is not None and x.spec.shape and x.spec.shape[-1] != c["input_length"]:
            self.warn(f"{n}: input_length {c['input_length']} differs from the input shape {x.spec.shape}")
        vocab = int(c["input_dim"])
        src = self.d.nodes[x.node]
        if src.type == "Input" and not src.props.get("vocab"):
            src.props["vocab"] = vocab
        return self.node("Embedding", [x], {"num_embeddings": vocab, "embedding_dim": int(c["output_dim"])}, n, n)

    def _rnn(self, c, x, n, type_name, bidirectional=False, merge_mode="concat"):
        if len(x.spec.shape) != 2:
            self.fail(f"expects a (steps, features) input per sample, got {x.spec.shape}", n)
        units = int(c["units"])
        props = {"hidden_size": units, "num_layers": 1, "bias": bool(c.get("use_bias", True)),
                 "bidirectional": bidirectional, "return_sequences": bool(c.get("return_sequences", False))}
        # Keras's bias layout: LSTM and GRU(reset_after=False) keep one bias vector, GRU with
        # reset_after=True (Keras 3's default) a (2, 3 x units) one, as PyTorch's bias_ih + bias_hh
        single = type_name == "LSTM" or not c.get("reset_after", True)
        props["rnn_bias"] = "single" if single else "double"
        if c.get("return_state"):
            self.warn(f"{n}: return_state: the extra state outputs are not imported")
        y = self.node(type_name, [x], props, n, n)
        if bidirectional and merge_mode in ("sum", "mul", "ave"):
            # Keras merges the two directions' outputs: split the (.., 2H) output back (views),
            # then add / multiply (and halve for ave)
            halves = self.node("Split", [y], {"chunks": 2, "dim": -1}, n + "_directions", n)
            second = _Ref(halves.node, 1, self.specs[halves.node][1])
            op = "Multiply" if merge_mode == "mul" else "Add"
            y = self.node(op, [halves, second], {}, n + "_" + merge_mode, n)
            if merge_mode == "ave":
                y = self.node("Scale", [y], {"factor": 0.5}, n + "_ave", n)
        elif bidirectional and merge_mode != "concat":
            self.warn(f"{n}: Bidirectional merge_mode {merge_mode!r} imported as concat (twice the output width)")
        return y

    def _l_LSTM(self, c, ins, n):
        return self._rnn(c, ins[0], n, "LSTM")

    def _l_GRU(self, c, ins, n):
        return self._rnn(c, ins[0], n, "GRU")

    def _l_Bidirectional(self, c, ins, n):
        inner = c.get("layer") or {}
        cls = inner.get("class_name")
        if cls not in ("LSTM", "GRU"):
            return None
        return self._rnn(inner.get("config") or {}, ins[0], n, cls, True, c.get("merge_mode", "concat"))

    def _l_Reshape(self, c, ins, n):
        x = ins[0]
        target = [int(v) if v is not None else -1 for v in c["target_shape"]]
        internal, moved = self.to_internal(tuple(target))
        y = self.node("Reshape", [x], {"shape": list(internal)}, n, n)
        y.moved = moved
        return y

    def _l_Permute(self, c, ins, n):
        x = ins[0]
        if x.moved:
            return None
        dims = [0] + [int(v) for v in c["dims"]]
        return self.node("Permute", [x], {"dims": dims}, n, n)

    def _l_UpSampling2D(self, c, ins, n):
        size = _tuple(c.get("size", 2), 2)
        if size[0] != size[1]:
            return None
        interp = str(c.get("interpolation", "nearest"))
        y = self.node("Upsample", [ins[0]], {"scale_factor": float(size[0]),
                                             "mode": "bilinear" if interp == "bilinear" else "nearest"}, n, n)
        y.moved = ins[0].moved
        return y

    def _l_MultiHeadAttention(self, c, ins, n):
        x = ins[0]
        if len(x.spec.shape) != 2:
            return None
        if any(r.node != x.node or r.port != x.port for r in ins[1:]):
            return None  # cross-attention: not representable by the self-attention node
        heads, key_dim = int(c["num_heads"]), int(c["key_dim"])
        if c.get("value_dim") not in (None, key_dim) or c.get("output_shape") is not None:
            return None
        head_dim = 0 if heads * key_dim == x.spec.shape[1] else key_dim
        return self.node("MultiHeadAttention", [x], {"num_heads": heads, "dropout": float(c.get("dropout", 0.0)),
                                                     "bias": bool(c.get("use_bias", True)), "kernel": "fused",
                                                     "need_weights": False, "head_dim": head_dim}, n, n)

    def hold_layer_outputs(self):
        """Keras runs a model (Functional, and Sequential built on an Input) through
        ``Function._run_through_graph``, which keeps every layer's output in a dict until the
        forward pass returns: none is freed when its last consumer ran. Each node holding a Keras
        layer's output keeps it until the model's last op."""
        order = self.d.topo_order()
        if not order:
            return
        last = order[-1]
        for nid in set(self.keras_layers.values()):
            node = self.d.nodes[nid]
            if nid != last and node.type != "Input":
                node.keep_until = last
        # A merge layer (Add, Concatenate, ...) leaves the list of its inputs in a reference cycle
        # (measured on Keras 3.15's PyTorch backend): they outlive the forward until Python's
        # cyclic garbage collector runs, which the estimate cannot know (engine: GC_HELD)
        for nid in self.gc_held:
            node = self.d.nodes[nid]
            if nid != last and node.type != "Input":
                node.keep_until = GC_HELD

    def record_layouts(self):
        """Where a node's output order differs from the design's rule (channels_last: image tensors
        are shown channels last), say so on the node, so that shapes are shown as Keras shows them."""
        for nid, ref in self.refs.items():
            rank = len(ref.spec.shape)
            default = self.channels_last and rank >= 3
            if ref.moved != default:
                self.d.nodes[nid].layout = "moved" if ref.moved else "as_is"

    # -- layout ---------------------------------------------------------------------------------
    def layout(self):
        depth: dict[str, int] = {}
        order = self.d.topo_order()
        for nid in order:
            preds = [e.src for e in self.d.inputs_of(nid)]
            depth[nid] = 1 + max((depth[p] for p in preds), default=-1)
        used: dict[int, set] = {}
        for nid in order:
            col = depth[nid]
            row = self.lane.get(nid, 0)
            taken = used.setdefault(col, set())
            while row in taken:
                row += 1
            taken.add(row)
            self.d.nodes[nid].pos = (col * DX, row * DY)


__all__ = ["KerasImportError", "keras_shape", "load_keras_json"]

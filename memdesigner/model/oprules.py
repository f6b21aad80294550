"""The vocabulary a layer type uses to say what PyTorch allocates for it.

A memory rule is a function ``rule(m: MemCtx) -> OpMem``. It describes one op as eager PyTorch
runs it: the storages the forward creates (outputs, transients, extras kept for backward), which
tensors autograd saves, and what the backward allocates. The engine (engine/simulate.py) turns
these declarations into a liveness timeline; rules never compute totals themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memdesigner.units import DTYPE_BYTES


@dataclass(frozen=True)
class T:
    """A storage an op creates: ``elems`` elements of ``dtype`` (bytes = elems * itemsize)."""

    elems: int
    dtype: str
    what: str = ""

    @property
    def nbytes(self) -> int:
        return self.elems * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class In:
    """Reference to input ``i`` of the op (saved for backward, or aliased by an output)."""

    i: int = 0


@dataclass(frozen=True)
class Out:
    """Reference to output ``j`` of the op."""

    j: int = 0


@dataclass(frozen=True)
class Param:
    """Reference to parameter ``k`` of the layer (weights cost nothing new to save)."""

    k: int = 0


@dataclass
class OpMem:
    """What one op does to memory.

    outputs     one entry per output: a new storage ``T`` or ``In(i)`` (a view or an in-place
                result that shares input i's storage).
    out_dtypes  dtype of each output (needed also for aliased outputs).
    temps       storages alive only while the forward op runs (freed before the next op).
    saved       what autograd keeps until this op's backward ran: In/Out refs or extra ``T``
                storages created by the forward (masks, indices, statistics, clones).
    grad_in     per input: "new" (backward allocates a gradient of the input's size), "alias"
                (the gradient is a view of the incoming gradient: Add, views, Cat), "stage" (the
                last of ``bwd_stages`` made it: its first temp) or a ``T`` (a gradient of another
                size). Ignored for inputs that do not require grad.
    bwd_temps   storages alive only while this op's backward runs (beyond the gradients).
    param_grads whether trainable parameters get gradients (AccumulateGrad steals them: no copy).
    bwd_stages  a backward that runs in steps (a stacked LSTM, layer by layer): each stage
                allocates its temps and the gradients of its parameters, then releases the
                listed saved entries (indices into ``saved``); its temps live until the next stage.
    grad_out_stands_in  the stages count the incoming gradient's bytes for a tensor made after
                PyTorch freed it (at the op's first backward node). When another reader also holds
                that gradient (a residual Add passes the same tensor to both branches) it stays
                alive, and the engine holds its bytes once more through the stages.
    casts       AMP: (param_index, T) low-precision copies of parameters made by autocast; the
                engine keeps them in autocast's weight cache until the autocast region ends.
    affine      False when a size is not a + b·batch (page-rounded workspaces): the batch curve
                (engine/batch_curve.py) then simulates every batch it is asked about.
    """

    outputs: list
    out_dtypes: list
    temps: list = field(default_factory=list)
    saved: list = field(default_factory=list)
    grad_in: list | None = None
    bwd_temps: list = field(default_factory=list)
    param_grads: bool = True
    casts: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    affine: bool = True
    out_strides: list | None = None  # per output strides (full shape); None entries: default
    elementwise: bool = False  # new outputs take the input's memory order (TensorIterator)
    bwd_stages: list = field(default_factory=list)  # [(temps, param indices, saved indices to release)]
    grad_out_stands_in: bool = False
    late_outputs: tuple = ()  # output indices made after the temps are freed (a final torch.stack)
    # state that outlives the step (a KV cache): the outputs stay alive to the end of the run and are
    # reported in Simulation.persisted; releases_carried frees what an earlier step left for this
    # node (Simulation's carry): with late outputs, the first half before them, the rest after
    persists: bool = False
    releases_carried: bool = False


@dataclass
class MemCtx:
    """What a memory rule sees. Shapes here include the batch dimension."""

    props: dict
    in_shapes: list  # full shapes (batch first)
    in_dtypes: list  # concrete dtypes of the inputs
    out_shapes: list  # full shapes
    out_kinds: list  # float | int64 | bool per output (from shape inference)
    params: list  # list[ParamSpec]
    dtype: str  # the model's compute dtype (float32 / bfloat16 / float16)
    grad: bool  # autograd is recording (train mode)
    training: bool  # module.train(): dropout active, batch-norm uses batch statistics
    in_rg: list  # per input: requires grad
    backend: str = "cuda"  # cuda | cpu | mps
    amp: str | None = None  # autocast dtype, or None
    batch: int = 1
    in_strides: list = field(default_factory=list)  # per input: strides of the full shape

    def contiguous(self, i: int = 0) -> bool:
        from memdesigner.model.layout import is_contiguous

        return not self.in_strides or is_contiguous(self.in_shapes[i], self.in_strides[i])

    def viewable(self, i: int, new_shape) -> bool:
        """Whether input i can be viewed as ``new_shape`` without a copy."""
        from memdesigner.model.layout import view_strides

        return not self.in_strides or view_strides(self.in_shapes[i], self.in_strides[i], new_shape) is not None

    @staticmethod
    def numel(shape) -> int:
        n = 1
        for d in shape:
            n *= d
        return n

    def in_elems(self, i: int = 0) -> int:
        return self.numel(self.in_shapes[i])

    def out_elems(self, j: int = 0) -> int:
        return self.numel(self.out_shapes[j])

    @property
    def float_in(self) -> str:
        """The dtype a float op computes in: its first float input's dtype."""
        for d in self.in_dtypes:
            if d in ("float32", "float16", "bfloat16", "float64"):
                return d
        return self.dtype

    @property
    def any_rg(self) -> bool:
        return any(self.in_rg)

    @property
    def has_trainable(self) -> bool:
        """Some parameter requires grad (a frozen layer's do not)."""
        return any(p.requires_grad for p in self.params)

    def param_rg(self, k: int = 0) -> bool:
        """Parameter k exists and requires grad (autograd needs what its gradient reads)."""
        return k < len(self.params) and self.params[k].requires_grad

    @property
    def records(self) -> bool:
        """Autograd records this op (it will have a backward)."""
        return self.grad and (self.any_rg or self.has_trainable)


def simple(m: MemCtx, saved=(), temps=(), grad_in="new", bwd_temps=(), out_dtype=None) -> OpMem:
    """One new output of the inferred shape in the input's float dtype."""
    dt = out_dtype or m.float_in
    outs = [T(m.out_elems(j), dt if m.out_kinds[j] == "float" else m.out_kinds[j], "output")
            for j in range(len(m.out_shapes))]
    return OpMem(
        outputs=outs,
        out_dtypes=[o.dtype for o in outs],
        temps=list(temps),
        saved=list(saved),
        grad_in=[grad_in] * len(m.in_shapes) if isinstance(grad_in, str) else list(grad_in),
        bwd_temps=list(bwd_temps),
    )


def view(m: MemCtx) -> OpMem:
    """A view: the output shares the input's storage; the gradient is a view too."""
    return OpMem(outputs=[In(0)], out_dtypes=[m.in_dtypes[0]], grad_in=["alias"])

"""Liveness simulation of one eager PyTorch step, op by op.

Storages are reference counted the way PyTorch frees them: a tensor dies when its last consumer
ran (inference), or when the backward that saved it ran (training); gradients of activations die
as backward moves on; parameter gradients appear when their layer's backward runs (AccumulateGrad
steals the fresh gradient: no copy); optimizer state exists from the start (steady state, step 2).

The reference step (shared/truth): ``zero_grad(set_to_none=True); out = model(x);
loss = out.mean(); loss.backward(); opt.step()`` with ``out`` and ``loss`` alive through the
step; inference is ``with torch.no_grad(): out = model(x)``.
"""

from __future__ import annotations

from memdesigner.engine.backward_pass import run_backward, run_loss
from memdesigner.engine.compiled_rule import FLOATS, RULES, CompiledRule
from memdesigner.engine.forward_pass import run_forward
from memdesigner.engine.live_set import CATS, A, Event, G, K, LiveSet, O, W
from memdesigner.engine.optimizer_step import run_optimizer_step
from memdesigner.engine.param_state import _FACTS, INFLIGHT, _param_bytes, _param_facts, place_weights
from memdesigner.engine.row_table import RowTable
from memdesigner.engine.settings import Settings
from memdesigner.engine.sim_structure import Structure, scope_holds, structure_of
from memdesigner.model.analysis import Analysis
from memdesigner.model.design import Design

# the names other modules (and older benchmarks) import from here
_Mem = LiveSet
_Compiled = CompiledRule
_Structure = Structure
_structure = structure_of
_RULES = RULES
__all__ = ["CATS", "W", "G", "O", "A", "K", "FLOATS", "INFLIGHT", "Event", "LiveSet", "Simulation", "_Mem",
           "_Compiled", "_Structure", "_structure", "_RULES", "_FACTS", "_param_bytes", "_param_facts"]


class Step:
    """The state one run hands from phase to phase (forward_pass, backward_pass, optimizer_step):
    the settings' facts, the live set, and each phase's bookkeeping (which storage holds each
    value, what each op saved, the gradients in flight)."""


class Simulation:
    """Runs the step once and keeps the events, per-layer rows and phase peaks."""

    def __init__(self, design: Design, analysis: Analysis, settings: Settings, rounding: int = 1,
                 capture: int | None = None, trace: bool = False, rank: int | None = None,
                 carry: list | None = None, log: bool = False):
        self.capture = capture
        self.log = log  # keep the log a replay reads (engine/alloc_log.py, the batch curve's one probe)
        # storages an earlier step left alive (engine/generate.py): (node id or None, bytes, label);
        # a node whose rule says releases_carried frees its own, the rest live to the end of the run
        # (pipeline parallel: what other micro-batches and receive buffers hold, engine/pipeline_parallel.py)
        self.carry = carry or list(getattr(design, "stage_carry", ()))
        self.persisted: dict[str, list[int]] = {}  # node -> bytes of its outputs that outlive the step
        self.rank = rank  # data-parallel rank (engine/distributed.py); None: the heaviest
        self.trace = trace  # keep every checked moment (engine/batch_curve.py fits lines through them)
        self.design = design
        self.an = analysis
        self.s = settings
        self.rounding = rounding
        self.events: list[Event] = []
        self.phase_peaks = {"forward": 0, "backward": 0, "optimizer_step": 0}
        self.table: RowTable | None = None  # the per-layer rows, compact (set by place_weights)
        self._rows: dict[str, dict] | None = None
        self.recomputed: list[str] = []
        self.affine = True  # every size is a + b·batch (see OpMem.affine)
        self.gc_holds = True  # outputs kept_until GC_HELD live to the end of the step

    @property
    def rows(self) -> dict[str, dict]:
        """node -> its row (params, non_trainable, param_bytes, buffer_bytes, activation_bytes,
        kept_bytes, requires_grad; recompute under checkpointing), built when first read."""
        if self._rows is None:
            self._rows = self.table.as_dict() if self.table is not None else {}
        return self._rows

    @rows.setter
    def rows(self, rows: dict[str, dict]) -> None:
        self._rows = rows

    def row_entries(self, valid: list):
        """A function yielding (node, parameter row, activation bytes, kept bytes) for the nodes
        of ``valid``, in order, that holds the rows and not the simulation: the compact table
        itself while ``valid`` is the run's order and no rows dict was set (a pipeline's busiest
        stage gets every stage's rows as dicts)."""
        if self._rows is None and valid is self.order:
            return self.table.entries
        rows = self.rows
        return lambda: ((n, rows[n], rows[n]["activation_bytes"], rows[n]["kept_bytes"]) for n in valid)

    def compact_rows(self, valid: list) -> RowTable | None:
        """The compact table itself when row_entries would read it (``valid`` is the run's
        order, no rows dict set): the report's rows then reuse the previous estimate's."""
        return self.table if self._rows is None and valid is self.order else None

    def _new_mem(self) -> LiveSet:
        """The live set; a subclass may log every allocation (memdesigner.snapshot.writer)."""
        return LiveSet(self.rounding)


    # ----------------------------------------------------------------------------------
    def run(self) -> Simulation:
        s = self.s
        design, an = self.design, self.an
        r = Step()
        r.s, r.design, r.an = s, design, an
        r.train = train = s.training
        r.dtype = s.torch_dtype
        r.pdtype = "float32" if s.amp else r.dtype
        r.amp = amp = s.amp_dtype
        r.batch = s.batch
        r.mem = mem = self._new_mem()
        mem.capture = self.capture
        if self.capture is not None:
            mem.what = []  # the storages' labels, for the capture's list
        mem.trace = [] if self.trace else None
        if self.log:
            mem.rel, mem.marks = [], []
        self.mem = mem
        mem.events = self.events
        mem.label = lambda nid: design.nodes[nid].name if nid in design.nodes else "step"
        r.st = st = structure_of(design, an)
        r.order = self.order = st.order  # the valid nodes, in execution order
        r.nodes = design.nodes

        place_weights(self, r)
        run_forward(self, r)
        if not train:
            if amp:
                for sid in r.cast_cache.values():
                    mem.decref(sid)
            return self
        run_loss(self, r)
        run_backward(self, r)
        run_optimizer_step(self, r)
        for sid in r.held_outputs + r.loss_sids:
            mem.decref(sid)
        return self

    _scope_holds = staticmethod(scope_holds)

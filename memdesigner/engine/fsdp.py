"""Fully sharded data parallel (FSDP2), per rank: what ``fully_shard`` adds to one process's step
(docs/memory-model.md, "Fully sharded data parallel"; torch 2.13 torch/distributed/fsdp/_fully_shard).

- ``zero2``: ``fully_shard(child, reshard_after_forward=False)`` on each top-level child that has
  parameters (for a design: the first part of a node's scope), then on the root;
- ``zero3``: the same with ``reshard_after_forward=True`` (FSDP2's default).

Each unit (a child, or the root with the parameters of root-level ops) owns its parameters. Every
parameter is sharded on dim 0 as ``torch.chunk`` does: ``c = ceil(dim0 / world)`` rows per rank,
the storage padded to ``c`` rows on every rank (``FSDPParam._init_sharded_param``); the optimizer
state follows the rank's unpadded rows (the last ranks may hold fewer, or none).

The timeline (``FSDPParamGroup``/``foreach_all_gather``/``foreach_reduce``):
- forward, at a unit's first op: the all-gather output (``world x`` the unit's padded shards, one
  block); the copy-out into one unsharded block per parameter
  (``dim0`` padded to ``c x world``); only then the previous unit's all-gather output is freed
  (``wait_for_unshard`` keeps ``prev_all_gather_state`` until it returns). zero3 frees a child's
  unsharded parameters after its last op; the root's stay (``post_forward_mesh_info = None``).
  The root's post-forward frees the last all-gather output.
- backward: a unit's pre-backward (zero3) all-gathers it unless it was prefetched, frees the
  all-gather output after the copy-out, then prefetches the unit that ran before it in forward
  (its all-gather output lives until that unit's pre-backward). A unit's post-backward (when its
  inputs' gradients exist; in the root's final callback when they do not need any, and for the
  root) frees its unsharded parameters, the previous reduce-scatter input, makes its own
  reduce-scatter input (padded, unsharded size), frees the unsharded gradients but the last
  parameter's (``foreach_reduce``'s loop variable holds it until it returns), makes the
  reduce-scatter output (the unit's sharded ``.grad``, kept) and, on gloo (the CPU), a clone of
  the input for the collective.
  The final callback frees the last reduce-scatter input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FSDP_STRATEGIES = ("zero2", "zero3")
ROOT = ""


def rows(dim0: int, world: int) -> int:
    """Padded rows per rank: ``torch.chunk``'s chunk size."""
    return -(-dim0 // world) if dim0 else 0


def local_rows(dim0: int, world: int, rank: int) -> int:
    """The rows rank ``rank`` really holds (``_chunk_with_empty``: later ranks may get fewer)."""
    c = rows(dim0, world)
    return max(0, min(c, dim0 - rank * c))


@dataclass
class Unit:
    name: str  # top-level child ("" for the root)
    first: int  # position of its first / last op in the forward order
    last: int
    shard: list = field(default_factory=list)  # per parameter: padded shard bytes
    full: list = field(default_factory=list)  # per parameter: padded unsharded bytes
    input_grad: bool = False  # whether a gradient reaches its inputs (post-backward in autograd)
    # per parameter that requires grad: (registration rank, node, unsharded gradient bytes); the
    # last one's gradient outlives the reduce-scatter (``FsdpStep._post_backward``)
    grads: list = field(default_factory=list)
    # padded unsharded / shard bytes of the parameters that require grad: foreach_reduce reduces
    # only those (frozen base weights under LoRA are gathered, never reduced)
    grad_full: int = 0
    grad_shard: int = 0

    @property
    def gather_bytes(self) -> int:
        return sum(self.full)

    @property
    def shard_bytes(self) -> int:
        return sum(self.shard)


_INDEXED = re.compile(r"^(.*)\.(\d+)$")


def _parts(scope: str) -> list[str]:
    return [p[len("L__self__"):] if p.startswith("L__self__") else p for p in scope.split("/") if p]


def _layer_element(parts: list[str]) -> int | None:
    """Index in ``parts`` of the outermost element of a layer list: a module call ``<list>.<k>``
    whose container ``<list>`` is no call on the path (an ``nn.ModuleList``: no forward of its
    own, the parent loops over it; an ``nn.Sequential``'s children follow its own call)."""
    for i, p in enumerate(parts):
        m = _INDEXED.match(p)
        if m and m.group(1) not in parts[:i]:
            return i
    return None


def unit_of(scope: str | None) -> str:
    """The unit a module scope falls in: the element of a layer list it runs in, else its
    top-level child (idempotent: a unit's name is its own unit)."""
    if not scope:
        return ROOT
    parts = _parts(scope)
    if not parts:
        return ROOT
    i = _layer_element(parts)
    return parts[i] if i is not None else parts[0]


def unit_scopes(nodes: dict, node_rep: dict | None = None, joins: dict | None = None) -> dict:
    """node -> the name of its FSDP unit. An imported model's nodes carry their module scope
    (root-level ops have none: the root unit); a design built by hand has no scopes, and each of its
    layers is a top-level block (as an ``nn.Sequential``'s children). Drawn with blocks
    (``node_rep``: the expansion's node -> instance), only the instances' nodes have scopes; the
    layers drawn beside them are still top-level children, each its own unit, not the root's. A repeated layer is one unit
    per repetition, as ``fully_shard`` is applied to a stack of layers (HF's and torchtitan's
    decoder layers: ``for layer in model.layers: fully_shard(layer)``; FSDP2 refuses the
    ``nn.ModuleList`` itself, ``_validate_module``); a top-level child holding such a list (HF's
    ``model`` around ``model.layers``) is not wrapped as a whole: its other parameters (embedding,
    final norm) are the root's. ``joins`` (node -> the node whose unit it is in): LoRA's adapter
    ops (engine/finetune.py) are submodules of the Linear they wrap (peft's ``LoraLayer``), so
    ``fully_shard`` of the layer holding that Linear shards them with it."""
    if joins:
        units = unit_scopes({nid: n for nid, n in nodes.items() if nid not in joins}, node_rep)
        return {nid: units[joins.get(nid, nid)] for nid in nodes}
    if not any(n.scope for n in nodes.values()):
        return {nid: nid for nid in nodes}
    drawn = bool(node_rep) and not any(n.scope for nid, n in nodes.items() if nid not in node_rep)
    out, holders = {}, set()
    for nid, n in nodes.items():
        parts = _parts(n.scope) if n.scope else []
        i = _layer_element(parts) if parts else None
        if i is not None:
            out[nid] = parts[i]
            if i > 0:
                holders.add(parts[0])
        else:
            out[nid] = parts[0] if parts else (nid if drawn else ROOT)
    if holders:
        out = {nid: ROOT if u in holders else u for nid, u in out.items()}
    return out


def _dims(shape: tuple) -> tuple[int, int]:
    """(dim 0, elements per row) of a parameter."""
    if not shape:
        return 1, 1
    rest = 1
    for d in shape[1:]:
        rest *= d
    return shape[0], rest


def sharded_numel(shape: tuple, world: int, rank: int | None = None) -> int:
    """Elements of the rank's shard: padded (rank None) or the rank's own rows."""
    d0, rest = _dims(shape)
    return (rows(d0, world) if rank is None else local_rows(d0, world, rank)) * rest


class FsdpStep:
    """The simulation's hooks for one rank's step; ``mem`` is the simulation's live set."""

    def __init__(self, strategy: str, world: int, gloo: bool, offload: bool = False):
        self.strategy = strategy
        # CPUOffloadPolicy: the shards, their gradients and the optimizer live on the host; each
        # all-gather first copies the unit's shards to the device, each reduce-scatter output is
        # copied back and dropped (``FSDPParam.all_gather_inputs``, ``foreach_reduce``)
        self.offload = offload
        self.host_grads = 0
        self.world = world
        self.reshard_after_forward = strategy == "zero3"
        self.gloo = gloo  # torch.distributed on the CPU: gloo's reduce-scatter clones its input
        self.units: dict[str, Unit] = {}
        self._keys: list = []  # per registered parameter: its param_order key
        self.unit_at: dict[str, str] = {}  # node -> unit name
        self.grad_sids: dict[str, list] = {}
        self.unsharded: dict[str, list] = {}
        self.prefetched: dict[str, int] = {}
        self.post_forward_order: list[str] = []
        self.where = ("forward", None)  # the moment the simulation is at (for timeline marks)

    # -- layout -----------------------------------------------------------------------------
    def add_param(self, scope: str | None, shape: tuple, itemsize: int, nid: str | None = None,
                  key: str | None = None) -> int:
        """Register a trainable parameter (in execution order; ``key``: its "node name.param" for
        ``Design.param_order``); returns its padded shard's bytes (its storage)."""
        name = unit_of(scope)
        u = self.units.get(name)
        if u is None:
            u = self.units[name] = Unit(name, 0, 0)
        d0, rest = _dims(shape)
        c = rows(d0, self.world)
        u.shard.append(c * rest * itemsize)
        u.full.append(c * self.world * rest * itemsize)
        if nid is not None:
            u.grad_full += c * self.world * rest * itemsize
            u.grad_shard += c * rest * itemsize
            u.grads.append([len(self._keys), nid, d0 * rest * itemsize])
            self._keys.append(key)
        return c * rest * itemsize

    def finish_layout(self, order: list[str], scopes: dict[str, str | None], param_order=None) -> None:
        """Each unit spans its child's ops; the root spans the whole forward. ``param_order``:
        ``Design.param_order`` (registration order, the order of a unit's ``fsdp_params``); without
        it parameters are registered in execution order (engine/param_order.py)."""
        if param_order:
            rank: dict[str, int] = {}
            for i, k in enumerate(param_order):
                rank.setdefault(k, i)
            n = len(param_order)
            for u in self.units.values():
                for g in u.grads:
                    g[0] = rank.get(self._keys[g[0]], n + g[0])
        seen = set()
        for i, nid in enumerate(order):
            name = unit_of(scopes.get(nid))
            if name in self.units and name != ROOT:
                self.unit_at[nid] = name
                u = self.units[name]
                if name not in seen:
                    seen.add(name)
                    u.first = i
                u.last = i
        children = sorted((u for u in self.units.values() if u.name != ROOT), key=lambda u: u.first)
        self.post_forward_order = [u.name for u in children] + ([ROOT] if ROOT in self.units else [])

    # -- helpers ----------------------------------------------------------------------------
    def _gather(self, mem, u: Unit, cat_k: int) -> int:
        """The all-gather output (one block). gloo's all-gather also makes output-sized scratch
        inside the collective (the profiler sees it), but no tensor an op returns: not counted."""
        copies = [mem.alloc(nb, cat_k, 1, "FSDP offload: shard copied to the device")
                  for nb in u.shard] if self.offload else []
        sid = mem.alloc(u.gather_bytes, cat_k, 1, f"FSDP all-gather output ({u.name or 'root'})")
        if copies:  # the copies are the all-gather inputs: freed after the copy-in
            mem.mark(self.where)
            for c in copies:
                mem.decref(c)
        return sid

    def _copy_out(self, mem, u: Unit, cat_w: int) -> None:
        self.unsharded[u.name] = [mem.alloc(nb, cat_w, 1, f"FSDP unsharded parameter ({u.name or 'root'})")
                                  for nb in u.full]

    def _reshard(self, mem, name: str) -> None:
        for sid in self.unsharded.pop(name, ()):
            mem.decref(sid)

    # -- forward ----------------------------------------------------------------------------
    def forward_begin(self, mem, cats) -> None:
        """The root's pre-forward: the root unit's all-gather."""
        self.prev_ag = None
        if ROOT in self.units:
            self._unshard_forward(mem, self.units[ROOT], cats)

    def _unshard_forward(self, mem, u: Unit, cats) -> None:
        W, G, K = cats
        ag = self._gather(mem, u, K)
        self._copy_out(mem, u, W)
        mem.mark(self.where)
        if self.prev_ag is not None:
            mem.decref(self.prev_ag)
        self.prev_ag = ag

    def before_op(self, mem, nid: str, pos: int, cats, input_grad: bool) -> None:
        name = self.unit_at.get(nid)
        if name is None:
            return
        u = self.units[name]
        if pos == u.first:
            u.input_grad = input_grad
            self._unshard_forward(mem, u, cats)

    def after_op(self, mem, nid: str, pos: int) -> None:
        name = self.unit_at.get(nid)
        if name is not None and pos == self.units[name].last and self.reshard_after_forward:
            self._reshard(mem, name)

    def forward_end(self, mem) -> None:
        """The root's post-forward frees the last all-gather output."""
        if self.prev_ag is not None:
            mem.decref(self.prev_ag)
            self.prev_ag = None

    # -- backward ---------------------------------------------------------------------------
    def backward_begin(self, mem, cats) -> None:
        """The root's pre-backward: its parameters are unsharded already; it prefetches the last child."""
        self.open = None
        self.rs_input = None
        self.pending: list[str] = []
        self.sharded_grads: list = []
        if ROOT in self.units:
            self._prefetch(mem, ROOT, cats)

    def _prefetch(self, mem, name: str, cats) -> None:
        i = self.post_forward_order.index(name)
        if not self.reshard_after_forward or i == 0:
            return
        target = self.post_forward_order[i - 1]
        if target in self.unsharded or target in self.prefetched:
            return
        self.prefetched[target] = self._gather(mem, self.units[target], cats[2])

    def _pre_backward(self, mem, name: str, cats) -> None:
        if name not in self.unsharded:
            u = self.units[name]
            ag = self.prefetched.pop(name, None)
            if ag is None:
                ag = self._gather(mem, u, cats[2])
            self._copy_out(mem, u, cats[0])
            mem.mark(self.where)
            mem.decref(ag)
        self._prefetch(mem, name, cats)

    def _post_backward(self, mem, name: str, cats) -> None:
        W, G, K = cats
        u = self.units[name]
        self._reshard(mem, name)
        grads = self.grad_sids.pop(name, [])
        if not grads:
            return
        if self.rs_input is not None:
            mem.decref(self.rs_input)
        self.rs_input = mem.alloc(u.grad_full, K, 1, f"FSDP reduce-scatter input ({name or 'root'})")
        mem.mark(self.where)
        # ``unsharded_grads.clear()`` frees the gradients after the copy-in, all but the unit's last
        # parameter's: the loop variable of foreach_reduce's Shard(i) pass (``for i, (fsdp_param,
        # unsharded_grad) in enumerate(zip(fsdp_params, unsharded_grads))``, world > 1) still holds
        # it until foreach_reduce returns
        last = self._last_grad(u, {nid for nid, _ in grads}) if self.world > 1 else None
        for _, sid in grads:
            mem.decref(sid)
        kept = mem.alloc(last[1], G, 1, (last[0], "unsharded gradient held by foreach_reduce")) if last else None
        out = mem.alloc(u.grad_shard, G, 1, f"FSDP sharded gradients ({name or 'root'})")
        mem.mark(self.where)
        if self.gloo:
            t = mem.alloc(u.grad_full, K, 1, "gloo reduce-scatter copy of its input")
            mem.mark(self.where)
            mem.decref(t)
        if self.offload:  # copied to the host (``new_sharded_grad.to("cpu")``), the device block dropped
            mem.decref(out)
            self.host_grads += u.grad_shard
        else:
            self.sharded_grads.append(out)
        if kept is not None:
            mem.decref(kept)

    @staticmethod
    def _last_grad(u: Unit, made: set) -> tuple | None:
        """(node, bytes) of the unit's last parameter (registration order) with a gradient."""
        have = [g for g in u.grads if g[1] in made]
        if not have:
            return None
        g = max(have, key=lambda g: g[0])
        return g[1], g[2]

    def _close(self, mem, cats) -> None:
        name, self.open = self.open, None
        if name is None:
            return
        if self.units[name].input_grad:
            self._post_backward(mem, name, cats)
        else:
            self.pending.append(name)

    def before_backward_op(self, mem, nid: str, cats) -> None:
        name = self.unit_at.get(nid)
        if name == self.open:
            return
        self._close(mem, cats)
        if name is not None:
            self.open = name
            self._pre_backward(mem, name, cats)

    def grad_made(self, nid: str, sid: int) -> None:
        """An unsharded gradient block of node ``nid`` (AccumulateGrad on the unsharded parameter)."""
        self.grad_sids.setdefault(self.unit_at.get(nid, ROOT), []).append((nid, sid))

    def backward_end(self, mem, cats) -> None:
        """The root's final callback: post-backward of the root and of units whose inputs need no
        gradient (root first: ``all_states`` lists it first), then the last reduce-scatter input."""
        self._close(mem, cats)
        if ROOT in self.units:
            self._post_backward(mem, ROOT, cats)
        for name in self.pending:
            self._post_backward(mem, name, cats)
        if self.rs_input is not None:
            mem.decref(self.rs_input)
            self.rs_input = None


def rank_signature(trainable_shapes: list[tuple], world: int, rank: int) -> tuple:
    """What differs between ranks: the rows each holds of every parameter (optimizer state)."""
    return tuple(sharded_numel(s, world, rank) for s in trainable_shapes)

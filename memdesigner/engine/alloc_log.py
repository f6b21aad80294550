"""One simulated step as a log of frees and checked moments, replayed at any batch.

Every storage the engine allocates is a + s·batch bytes. A run at a huge batch M (Python ints:
nothing overflows) holds each storage's line in its size, a + s·M with |a| < M/2, so divmod
reads it back; the order of allocations, frees and checked moments is the same at every batch
where the step is affine (the caller checks that against one real run). Storages are allocated
in id order, so the log (LiveSet.rel, LiveSet.marks) only needs the frees, in order, and per
checked moment how many storages were allocated and freed by then. Replaying it with numpy gives
the exact peak, allocator rounding included, at any batch in a fraction of a millisecond: what
the largest-batch search and the window's batch sweep ask for, instead of a simulation each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PROBE = (1 << 64) + 13  # the batch M: far above any size, odd (a rule dividing the batch shows at the check)
_SAFE = 1 << 62  # replayed sizes stay well inside int64


@dataclass
class Replay:
    """Each storage's line (``a`` + ``s``·batch; ``rconst``: the rounded size of one that does not
    grow with the batch, as the run rounded it), the log, and per checked moment its line and its
    rounding slack bound (``at_a``, ``at_s``, ``at_slack``)."""

    a: np.ndarray
    s: np.ndarray
    rconst: np.ndarray
    rel: np.ndarray  # storage ids in the order they were freed
    n_alloc: np.ndarray  # per checked moment: storages allocated so far
    n_rel: np.ndarray  # per checked moment: entries of ``rel`` so far
    rounding: int
    at_a: np.ndarray | None = None
    at_s: np.ndarray | None = None
    at_slack: np.ndarray | None = None

    def _at_marks(self, sizes: np.ndarray) -> np.ndarray:
        made = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=made[1:])
        gone = np.zeros(len(self.rel) + 1, dtype=np.int64)
        np.cumsum(sizes[self.rel], out=gone[1:])
        return made[self.n_alloc] - gone[self.n_rel]

    def safe(self, batch: int) -> bool:
        """Whether every size at ``batch`` stays inside int64 (else the caller simulates)."""
        return not len(self.s) or int(self.a.max()) + int(self.s.max()) * batch < _SAFE

    def sizes(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """Each storage's (raw, allocator-rounded) bytes at ``batch``, as LiveSet rounds them
        (a size that does not grow: as the run rounded it, aggregates included)."""
        raw = self.a + self.s * batch
        r = self.rounding
        rounded = -(-raw // r) * r if r > 1 else raw
        return raw, np.where(self.s == 0, self.rconst, rounded)

    def peaks(self, batch: int) -> tuple[int, int]:
        """(raw peak, allocator-rounded peak) of the step at ``batch``, as LiveSet counts them."""
        if not len(self.n_alloc):
            return 0, 0
        raw, rounded = self.sizes(batch)
        return max(0, int(self._at_marks(raw).max())), max(0, int(self._at_marks(rounded).max()))


def replay_of(mem, m: int = PROBE) -> Replay | None:
    """The replay of a run at batch ``m`` that kept its log; None where a size is not read back
    as a line (a negative slope, a size beyond int64)."""
    try:
        nb = np.array(mem.nb, dtype=object) + m // 2  # (Python ints: the per-element // and % stay exact)
        # a in [-M/2, M/2): a size can be s·batch less a constant (checkpointing's segment sizes)
        s, a = (nb // m).astype(np.int64), (nb % m - m // 2).astype(np.int64)
        if len(s) and int(s.min()) < 0:
            return None
        rconst = np.where(s == 0, np.array(mem.rnb, dtype=object), 0).astype(np.int64)
    except (OverflowError, TypeError, ValueError):
        return None
    marks = np.array(mem.marks, dtype=np.int64).reshape(-1, 2)
    rp = Replay(a, s, rconst, np.array(mem.rel, dtype=np.int64), marks[:, 0].copy(), marks[:, 1].copy(), mem.round)
    # each storage's share of LiveSet.slack: a constant one's own rounding, less than one block else
    slack = np.where(s == 0, rconst - a, mem.round - 1)
    rp.at_a, rp.at_s, rp.at_slack = rp._at_marks(a), rp._at_marks(s), rp._at_marks(slack)
    return rp


@dataclass
class CheckPoint:
    """What one real run at the user's batch left (the estimate's own, engine/step.py): each
    storage's raw and rounded bytes and the peaks, for the one-probe lines to be checked against."""

    settings: object  # engine.settings.Settings
    rounding: int
    nb: list
    rnb: list
    peak: int
    rpeak: int
    affine: bool


def check_point(sim) -> CheckPoint:
    """The check a finished Simulation leaves (its live set's lists themselves, not a copy)."""
    mem = sim.mem
    return CheckPoint(sim.s, sim.rounding, mem.nb, mem.rnb, mem.peak, mem.rpeak, sim.affine)

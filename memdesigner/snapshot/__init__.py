"""PyTorch memory snapshots, both ways: read what ``torch.cuda.memory._dump_snapshot()`` writes
(safely: snapshots are pickles), replay it into allocated/reserved curves with phases and
per-layer attribution, and write the engine's estimate as a snapshot memory_viz opens. No Qt."""

from memdesigner.snapshot.reader import SnapshotError, load_snapshot, loads_snapshot
from memdesigner.snapshot.replay import Replay, replay

__all__ = ["Replay", "SnapshotError", "load_snapshot", "loads_snapshot", "replay"]

"""Activation checkpointing in backward: entering a checkpointed segment from its end reruns
its forward with grad, which makes again what the segment's ops keep for their backward."""

from __future__ import annotations

from memdesigner.engine.live_set import A, K


def rerun_segment(mem, recompute: dict, segment: list, live: list, nid: str) -> dict:
    """Allocates what the rerun keeps ({node: its recomputed block}). While the forward reruns,
    each op's intermediates live as they did the first time, beside what the ops before it saved
    again: the rerun's highest moment may be above everything it keeps (``live``: [(node, bytes
    its first forward held above the segment's start)]; ``recompute``: node -> bytes it makes again)."""
    blocks = {m_: mem.alloc(recompute.get(m_, 0), A, 1, (m_, "recomputed for backward (checkpoint)"))
              for m_ in segment}
    kept_before = rerun_peak = 0
    for m_, live_ in live:
        rerun_peak = max(rerun_peak, kept_before + live_)
        kept_before += recompute.get(m_, 0)
    if rerun_peak > kept_before:
        t_ = mem.alloc(rerun_peak - kept_before, K, 1, (nid, "recomputed forward's intermediates"))
        mem.mark(("backward", nid))
        mem.decref(t_)
    return blocks

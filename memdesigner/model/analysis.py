"""The analysis of any design: a flat one directly (model/flat_analysis.py), one with blocks
expanded (model/blocks.py), so that neither of those imports the other's caller."""

from __future__ import annotations

from memdesigner.model.blocks import analyze_collapsed
from memdesigner.model.design import Design
from memdesigner.model.flat_analysis import READ_ONLY_NODES, Analysis, NodeInfo, analyze_flat, graph_as_recorded

__all__ = ["READ_ONLY_NODES", "Analysis", "NodeInfo", "analyze", "graph_as_recorded"]


def analyze(design: Design) -> Analysis:
    """The design's analysis; instances of block definitions are analysed expanded. Re-analysing
    after an edit re-infers only what it touched (model/flat_analysis.py)."""
    if getattr(design, "blocks", None):
        return analyze_collapsed(design)
    return analyze_flat(design)

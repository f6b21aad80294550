"""Which forward ops activation checkpointing reruns in backward, as segments in forward order."""

from __future__ import annotations

import math

from memdesigner.engine.checkpoint_units import unit_segments
from memdesigner.engine.finetune import layer_segments


def checkpoint_segments(s, order: list, nodes: dict, in_edges: dict) -> tuple[list, dict, bool]:
    """(segments, node -> its segment's index, layerwise). checkpoint_sequential: ceil(sqrt(n))
    segments, every one but the last recomputed in backward; a checkpointed segment keeps only its
    input. Layerwise (non-reentrant, per layer): transformers' gradient_checkpointing_enable()
    makes each decoder layer (a scope <prefix>.<k>) one checkpoint, the last one included;
    checkpoint_units: only the layers named."""
    train = s.training
    seg_of: dict[str, int] = {}
    segments: list = []
    layerwise = train and (s.checkpoint_layers or bool(s.checkpoint_units))
    if layerwise:
        segments = unit_segments(order, nodes, s.checkpoint_units, in_edges) if s.checkpoint_units \
            else layer_segments(order, nodes)
    elif train and s.checkpointing:
        layers = [n for n in order if nodes[n].type != "Input"]
        k = max(1, math.ceil(math.sqrt(len(layers))))
        size = max(1, len(layers) // k)
        segments = [layers[i:i + size] for i in range(0, size * (k - 1), size)]
    for si, seg in enumerate(segments):
        for nid in seg:
            seg_of[nid] = si
    return segments, seg_of, layerwise

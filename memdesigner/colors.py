"""Colours of memory categories, phases and verdicts: the window's plots and the reports agree.
Plain hex strings, no Qt."""

from __future__ import annotations

# memory categories, in engine CATS order (weights, gradients, optimizer_state, activations, workspace)
CATEGORY_COLORS = ("#4E79A7", "#F28E2B", "#B07AA1", "#59A14F", "#9C9C9C")
CATEGORY_LABELS = ("weights", "gradients", "optimizer state", "activations", "workspace")

PHASE_COLORS = {"forward": "#4E79A7", "backward": "#E15759", "optimizer_step": "#B07AA1"}
PHASE_LABELS = {"forward": "forward", "backward": "backward", "optimizer_step": "optimizer step"}
PHASE_COLORS.update({"prefill": "#4E79A7", "decode": "#59A14F"})  # generate mode (engine/generate.py)
PHASE_LABELS.update({"prefill": "prefill", "decode": "decode"})

OK_COLOR = "#2E9E5B"
BAD_COLOR = "#D64541"
WARN_COLOR = "#E0A030"

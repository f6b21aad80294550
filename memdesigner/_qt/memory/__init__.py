"""Memory views of one report: the timeline, the summary, the per-layer table, Explain the Peak, snapshots."""

"""Model-parallel flags of every estimate command: tensor, sequence and pipeline parallelism."""

from __future__ import annotations

import argparse

KEYS = ("tensor_parallel", "sequence_parallel", "pipeline_parallel", "micro_batches")


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tensor-parallel", type=int, default=None, dest="tensor_parallel", metavar="T",
                   help="tensor-parallel size: Megatron colwise/rowwise Linears (world = gpus x T x P)")
    p.add_argument("--sequence-parallel", action="store_true", default=None, dest="sequence_parallel",
                   help="with --tensor-parallel: norms and residuals sharded on the sequence (SequenceParallel)")
    p.add_argument("--pipeline-parallel", type=int, default=None, dest="pipeline_parallel", metavar="P",
                   help="pipeline stages, 1F1B schedule (derived, not measured)")
    p.add_argument("--micro-batches", type=int, default=None, dest="micro_batches", metavar="M",
                   help="micro-batches per step under --pipeline-parallel (each of --batch samples)")

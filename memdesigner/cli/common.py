"""What every subcommand shares: the one-line error, the parser that exits 2 with one line, the run
settings options and how they become Settings, loading a design, the device, writable outputs."""

from __future__ import annotations

import argparse
import sys

from memdesigner.cli import finetune_options, parallel_options
from memdesigner.engine.distributed import STRATEGIES

EXIT_USAGE = 2


class CliError(Exception):
    """One line for stderr."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + message otherwise)
        sys.stderr.write(f"memdesigner: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def settings_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=("inference", "train", "generate"), default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--optimizer", choices=("none", "sgd", "momentum", "sgd_momentum", "adam", "adamw", "adamw8bit",
                                           "paged_adamw8bit", "adafactor"), default=None)
    p.add_argument("--dtype", choices=("fp32", "fp16", "bf16"), default=None)
    p.add_argument("--amp", action="store_true", default=None, help="mixed precision (autocast)")
    p.add_argument("--checkpointing", action="store_true", default=None, help="activation checkpointing")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--device", default=None, help="device profile id (see `memdesigner devices`)")
    g.add_argument("--backend", choices=("cuda", "cpu", "mps"), default=None)
    p.add_argument("--foreach", choices=("auto", "true", "false"), default="auto",
                   help="optimizer multi-tensor path (auto: CUDA yes, CPU no)")
    p.add_argument("--gpus", type=int, default=None, help="data-parallel world size (--batch is per rank)")
    p.add_argument("--strategy", choices=STRATEGIES, default=None,
                   help="data-parallel training: DDP, DDP + ZeroRedundancyOptimizer (zero1), FSDP2 fully_shard (zero2, zero3)")
    p.add_argument("--offload", default=None, help="zero2/zero3: params = FSDP2 CPUOffloadPolicy (host RAM reported)")
    p.add_argument("--seq-len", type=int, default=None, dest="seq_len",
                   help="token models: the sequence length (default: the design's; saved as the design's seq_len)")
    parallel_options.add_args(p)
    finetune_options.add_args(p)


def generate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--new-tokens", type=int, default=None, dest="new_tokens", help="generate: tokens after the prompt")
    p.add_argument("--kv-cache", choices=("dynamic", "static"), default=None, dest="kv_cache")
    p.add_argument("--kv-dtype", choices=("auto", "fp32", "fp16", "bf16"), default=None, dest="kv_dtype")
    p.add_argument("--max-context", action="store_true", help="generate: the longest context that fits the device")


def settings_from(args, design):
    from memdesigner.engine.settings import Settings

    base = dict(design.settings) if design is not None else {}
    base.pop("device", None)
    kw = {}
    for k in ("mode", "batch", "optimizer", "dtype", "amp", "checkpointing", "backend", "gpus", "strategy", "offload",
              "new_tokens", "kv_cache", "kv_dtype", "seq_len", *parallel_options.KEYS):
        v = getattr(args, k, None)
        if v is not None:
            kw[k] = v
        elif k in base:
            kw[k] = base[k]
    if getattr(args, "foreach", "auto") != "auto":
        kw["foreach"] = args.foreach == "true"
    kw.update(finetune_options.settings_kw(args, base))
    if kw.get("mode", "inference") != "train":  # as the window estimates (document/run_settings.to_settings):
        kw.update(optimizer="none", checkpointing=False)  # they count in training only
    try:
        s = Settings(**kw)
        if s.seq_len and design is not None:
            from memdesigner.engine.sequence_length import at_length

            at_length(design, s.seq_len)  # raises when the design has no token input
        if s.checkpoint_units and design is not None:
            from memdesigner.engine.checkpoint_units import check_design_units

            check_design_units(design, s.checkpoint_units)
        return s
    except (TypeError, ValueError) as err:
        raise CliError(str(err)) from None


def load(path):
    from memdesigner.io.design_file import DesignFileError, load_design

    try:
        return load_design(path)
    except DesignFileError as err:
        raise CliError(str(err)) from None


def writable(path) -> None:
    from memdesigner.io.output_path import OutputPathError, check_output_path

    try:
        check_output_path(path)
    except OutputPathError as err:
        raise CliError(str(err)) from None


def device(args, design):
    from memdesigner.engine.devices import get_device, warn_device_file_problems

    dev_id = args.device or (design.settings.get("device") if design is not None and not args.backend else None)
    if not dev_id:
        return None
    warn_device_file_problems()
    try:
        return get_device(dev_id)
    except KeyError as err:
        raise CliError(str(err.args[0])) from None


def save(design, path) -> None:
    from memdesigner.io.atomic_write import cannot_write
    from memdesigner.io.design_file import save_design

    try:
        save_design(design, path)
    except OSError as err:
        raise CliError(cannot_write(path, err)) from None

"""Command line: ``memdesigner`` opens the window; subcommands work headless.

Bad input prints one line on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from memdesigner import cli_finetune, cli_parallel, cli_report
from memdesigner.cli_generate import describe_generate
from memdesigner.engine.distributed import STRATEGIES, describe_per_rank
from memdesigner.units import format_bytes, format_count, format_flops, format_gib

EXIT_USAGE = 2


class CliError(Exception):
    """One line for stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + message otherwise)
        sys.stderr.write(f"memdesigner: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def _settings_args(p: argparse.ArgumentParser) -> None:
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
    cli_parallel.add_args(p)
    cli_finetune.add_args(p)


def _generate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--new-tokens", type=int, default=None, dest="new_tokens", help="generate: tokens after the prompt")
    p.add_argument("--kv-cache", choices=("dynamic", "static"), default=None, dest="kv_cache")
    p.add_argument("--kv-dtype", choices=("auto", "fp32", "fp16", "bf16"), default=None, dest="kv_dtype")
    p.add_argument("--max-context", action="store_true", help="generate: the longest context that fits the device")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memdesigner", description="Design a neural network and see the memory it needs.")
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser)
    e = sub.add_parser("estimate", help="estimate memory for a design file")
    e.add_argument("design")
    _settings_args(e)
    e.add_argument("--max-batch", action="store_true", help="also find the largest batch that fits the device")
    _generate_args(e)
    e.add_argument("--format", choices=("table", "json"), default="table")
    e.add_argument("--timeline", action="store_true", help="table format: also print the timeline")
    e.add_argument("--explain", action="store_true", help="list every tensor alive at the peak (JSON: peak_contents)")
    sub.add_parser("devices", help="list device profiles").add_argument("--format", choices=("table", "json"),
                                                                        default="table")
    sub.add_parser("layers", help="list layer types")
    r = sub.add_parser("render", help="render the window for a design to a PNG, headless")
    r.add_argument("design")
    r.add_argument("-o", "--output", required=True)
    _settings_args(r)
    imp = sub.add_parser("import", help="import a model (torch FILE.py:FACTORY, keras MODEL.json, onnx MODEL.onnx)")
    isub = imp.add_subparsers(dest="source", parser_class=_Parser)
    ik = isub.add_parser("keras", help="Keras model.to_json() output")
    ik.add_argument("model")
    ik.add_argument("-o", "--output", required=True)
    it = isub.add_parser("torch", help="a Python file with a factory returning an nn.Module (runs the file)",
                         description="Importing RUNS the file's Python code (in a child process, with a time "
                                     "limit): import only files you trust.")
    it.add_argument("spec", help="FILE.py:FACTORY")
    it.add_argument("-o", "--output", required=True)
    it.add_argument("--input-shape", default=None, help="per-sample shape, e.g. 3,224,224")
    it.add_argument("--input-dtype", default=None, choices=("float", "int64"))
    f = sub.add_parser("fit", help="what to change so that a design fits a device (exit 1: it does not fit)")
    f.add_argument("design")
    _settings_args(f)
    f.add_argument("--format", choices=("table", "json"), default="table")
    it.add_argument("--timeout", type=float, default=300.0, help="seconds the model code may run (default 300)")
    io_ = isub.add_parser("onnx", help="an ONNX model file (needs pip install memdesigner[onnx])")
    io_.add_argument("model", help="MODEL.onnx")
    io_.add_argument("-o", "--output", required=True)
    io_.add_argument("--input-shape", default=None, help="per-sample shape, e.g. 3,224,224 (default: the graph's)")
    from memdesigner.importers.hf_config import cli as hf_cli

    hf_cli.add_parser(isub, _Parser)
    ex = sub.add_parser("export", help="export a design as code")
    esub = ex.add_subparsers(dest="target", parser_class=_Parser)
    et = esub.add_parser("torch", help="PyTorch nn.Module source")
    et.add_argument("design")
    et.add_argument("-o", "--output", required=True)
    cli_report.add_parser(sub, _settings_args)
    from memdesigner import cli_snapshot as snapshot_cli

    snapshot_cli.add_export_parser(esub, _settings_args)
    snapshot_cli.add_snapshot_parser(sub, _settings_args)
    return p


def _settings_from(args, design):
    from memdesigner.engine.settings import Settings

    base = dict(design.settings) if design is not None else {}
    base.pop("device", None)
    kw = {}
    for k in ("mode", "batch", "optimizer", "dtype", "amp", "checkpointing", "backend", "gpus", "strategy", "offload",
              "new_tokens", "kv_cache", "kv_dtype", "seq_len", *cli_parallel.KEYS):
        v = getattr(args, k, None)
        if v is not None:
            kw[k] = v
        elif k in base:
            kw[k] = base[k]
    if getattr(args, "foreach", "auto") != "auto":
        kw["foreach"] = args.foreach == "true"
    kw.update(cli_finetune.settings_kw(args, base))
    if kw.get("mode", "inference") != "train":  # as the window estimates (document/run_settings.to_settings):
        kw.update(optimizer="none", checkpointing=False)  # they count in training only
    try:
        s = Settings(**kw)
        if s.seq_len and design is not None:
            from memdesigner.engine.sequence_length import at_length

            at_length(design, s.seq_len)  # raises when the design has no token input
        if s.checkpoint_units and design is not None:
            from memdesigner.engine.checkpoint_plan import check_design_units

            check_design_units(design, s.checkpoint_units)
        return s
    except (TypeError, ValueError) as err:
        raise CliError(str(err)) from None


def _load(path):
    from memdesigner.io.design_file import DesignFileError, load_design

    try:
        return load_design(path)
    except DesignFileError as err:
        raise CliError(str(err)) from None


def _writable(path) -> None:
    from memdesigner.io.output_path import OutputPathError, check_output_path

    try:
        check_output_path(path)
    except OutputPathError as err:
        raise CliError(str(err)) from None


def _device(args, design):
    from memdesigner.engine.devices import get_device, warn_device_file_problems

    dev_id = args.device or (design.settings.get("device") if design is not None and not args.backend else None)
    if not dev_id:
        return None
    warn_device_file_problems()
    try:
        return get_device(dev_id)
    except KeyError as err:
        raise CliError(str(err.args[0])) from None


def cmd_estimate(args) -> int:
    from memdesigner.engine.estimate import estimate

    design = _load(args.design)
    settings = _settings_from(args, design)
    dev = _device(args, design)
    if args.max_batch and dev is None:
        raise CliError("--max-batch needs --device")
    if args.explain and settings.mode == "generate":
        raise CliError("--explain does not cover --mode generate yet (it explains one forward)")
    rep = estimate(design, settings, device=dev, max_batch=args.max_batch)
    if getattr(args, "max_context", False):
        from memdesigner.cli_generate import max_context

        max_context(rep, design, settings, dev, CliError)
    contents = None
    if args.explain and not rep.issues:
        from memdesigner.engine.estimate import explain_peak

        contents = explain_peak(design, settings, device=dev)
    if rep.issues:
        more = f" (and {len(rep.issues) - 1} more; --format json lists them)" if len(rep.issues) > 1 else ""
        sys.stderr.write(f"memdesigner: error: {args.design}: {rep.issues[0]}{more}\n")
        if args.format == "json":
            print(json.dumps(rep.to_dict(), indent=2))
        return EXIT_USAGE
    if args.format == "json":
        d = rep.to_dict()
        if getattr(design, "library_versions", None):
            d["library_versions"] = dict(design.library_versions)
        if contents is not None:
            d["peak_contents"] = contents
        print(json.dumps(d, indent=2))
    else:
        print(render_table(rep, design, timeline=args.timeline))
        if contents is not None:
            print()
            print(f"alive at the peak ({format_bytes(rep.peak_bytes, 2)}):")
            for r in contents:
                who = r["name"] or "-"
                print(f"  {format_bytes(r['bytes']):>11}  {r['category']:<16} {who[:28]:<28} {r['tensor']}")
    return 0


def render_table(rep, design, timeline: bool = False) -> str:
    s = rep.settings
    lines = []
    opt = f", optimizer {s['optimizer']}" if s["mode"] == "train" else ""
    seq = f", {rep.sequence_length:,} tokens" if rep.sequence_length is not None else ""
    lines.append(f"{design.name}: {s['mode']}, batch {s['batch']}{seq}, {s['dtype']}{' + AMP' if s['amp'] else ''}"
                 f"{opt}, {s['backend']} semantics")
    if getattr(design, "library_versions", None):
        from memdesigner.model.library_versions import describe

        lines.append(f"follows {describe(design.library_versions)}")
    lines.append("")
    hdr = f"{'layer':<24} {'type':<18} {'output shape':<22} {'params':>12} {'weights':>11} {'activations':>12} {'FLOPs':>12}"
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for r in rep.layers:
        shape = "x".join(str(d) for d in r.output_shape) if r.output_shape and isinstance(r.output_shape[0], int) \
            else "; ".join("x".join(map(str, o)) for o in r.output_shape)
        lines.append(f"{r.name[:24]:<24} {r.type[:18]:<18} {shape[:22]:<22} {r.params:>12,} "
                     f"{format_bytes(r.param_bytes):>11} {format_bytes(r.activation_bytes):>12} "
                     f"{format_flops(r.flops):>12}")
    lines.append("-" * len(hdr))
    lines.append(f"parameters        {rep.params:,} ({format_bytes(rep.param_bytes)}"
                 f"{', buffers ' + format_bytes(rep.buffer_bytes) if rep.buffer_bytes else ''})")
    if rep.non_trainable_params:  # float buffers: Keras's "Non-trainable params"
        lines.append(f"  non-trainable   {rep.non_trainable_params:,} (total {rep.total_params:,})")
    lines.extend(cli_finetune.describe(rep))
    lines.append(f"FLOPs (forward)   {format_count(rep.flops)}")
    peak_name = design.nodes[rep.peak_layer].name if rep.peak_layer in design.nodes else next(
        (r.name for r in rep.layers if r.id == rep.peak_layer), "")  # (inside a block: the layer row's name)
    where = f" in {rep.peak_phase}" + (f" at {peak_name}" if peak_name else "") if rep.peak_phase else ""
    lines.append(f"peak memory       {format_bytes(rep.peak_bytes, 2)} ({rep.peak_bytes:,} B){where}")
    parts = ", ".join(f"{k.replace('_', ' ')} {format_bytes(v)}" for k, v in rep.at_peak.items() if v)
    lines.append(f"  at the peak     {parts}")
    ph = ", ".join(f"{k.replace('_', ' ')} {format_bytes(v)}" for k, v in rep.phase_peaks.items() if v)
    lines.append(f"  phase peaks     {ph}")
    lines.extend(describe_per_rank(rep.per_rank, format_bytes))
    lines.append(f"hand calculation {format_bytes(rep.lower_bound_bytes)} (parameters + two adjacent feature maps: "
                 f"the textbook lower bound)")
    if rep.device:
        d = rep.device
        verdict = "FITS" if d["fits"] else "DOES NOT FIT"
        lines.append(f"device            {d['name']}: {format_bytes(d['capacity_bytes'])}; with runtime "
                     f"{format_bytes(rep.device_peak_bytes)} -> {verdict}, headroom {format_bytes(d['headroom_bytes'])}")
    if rep.max_batch is not None:
        lines.append(f"largest batch     {rep.max_batch}")
    lines.extend(describe_generate(rep, format_bytes))
    for w in rep.warnings:
        lines.append(f"warning: {w}")
    if timeline:
        lines.append("")
        lines.append(f"{'phase':<15} {'layer':<24} {'live':>11}")
        for e in rep.timeline:
            lines.append(f"{e.phase:<15} {(e.label or '')[:24]:<24} {format_bytes(e.bytes):>11}")
    return "\n".join(lines)


def cmd_devices(args) -> int:
    from memdesigner.engine.devices import all_devices, warn_device_file_problems

    warn_device_file_problems()
    devs = all_devices()
    if args.format == "json":
        print(json.dumps([d.to_dict() for d in devs], indent=2))
        return 0
    print(f"{'id':<24} {'name':<34} {'kind':<5} {'memory':>10} {'runtime':>10}")
    for d in devs:  # one unit for every row, so rows compare at a glance
        print(f"{d.id:<24} {d.name[:34]:<34} {d.kind:<5} {format_gib(d.memory_bytes):>10} "
              f"{format_gib(d.runtime_overhead_bytes, 2):>10}{'  (user)' if d.user else ''}")
    return 0


def cmd_layers(args) -> int:
    from memdesigner.model import registry

    for fam, types in registry.by_family().items():
        print(f"{fam}:")
        for t in types:
            props = ", ".join(f"{p.name}={p.default!r}" for p in t.props)
            print(f"  {t.name:<26} {props}")
            print(f"  {'':<26} keeps for backward: {t.keeps_for_backward or '-'}")
    return 0


def cmd_render(args) -> int:
    _writable(args.output)
    design = _load(args.design)
    settings = _settings_from(args, design)
    dev = _device(args, design)
    try:
        from memdesigner._qt.render import render_design
    except ImportError as err:
        raise CliError(f"rendering needs the Qt window: {err}") from None
    try:
        render_design(design, args.output, settings, device_id=dev.id if dev else None)
    except OSError as err:
        from memdesigner.io.atomic_write import cannot_write

        raise CliError(cannot_write(args.output, err) if err.strerror else str(err)) from None
    print(args.output)
    return 0


def _save(design, path) -> None:
    from memdesigner.io.atomic_write import cannot_write
    from memdesigner.io.design_file import save_design

    try:
        save_design(design, path)
    except OSError as err:
        raise CliError(cannot_write(path, err)) from None


def cmd_import(args) -> int:
    _writable(args.output)
    if args.source == "keras":
        from memdesigner.importers.keras_json import load_keras_json

        try:
            design = load_keras_json(args.model)
        except (OSError, ValueError, KeyError) as err:
            raise CliError(f"{args.model}: {err}") from None
    elif args.source == "torch":
        from memdesigner.importers.torch_isolated import import_file_isolated, parse_input_shape

        try:  # the file runs in a child process: it cannot exit, hang or chdir this one
            design = import_file_isolated(args.spec, parse_input_shape(args.input_shape), args.input_dtype,
                                          timeout=args.timeout)
        except ImportError as err:
            raise CliError(f"PyTorch import needs torch installed (pip install memdesigner[torch]): {err}") from None
        except ValueError as err:
            raise CliError(str(err)) from None
    elif args.source == "onnx":
        from memdesigner.importers.onnx_import import OnnxImportError, import_for_cli

        try:
            design = import_for_cli(args)
        except OnnxImportError as err:
            raise CliError(str(err)) from None
    elif args.source == "hf":
        from memdesigner.importers.hf_config.cli import design_for_cli

        try:
            design = design_for_cli(args)
        except ValueError as err:
            raise CliError(str(err)) from None
    else:
        raise CliError("import needs a source: torch, keras, onnx or hf")
    _save(design, args.output)
    for w in getattr(design, "import_warnings", []):
        sys.stderr.write(f"memdesigner: warning: {w}\n")
    print(args.output)
    return 0


def cmd_export(args) -> int:
    if args.target == "snapshot":
        from memdesigner.cli_snapshot import cmd_export_snapshot

        _writable(args.output)
        return cmd_export_snapshot(args)
    if args.target != "torch":
        raise CliError("export needs a target: torch or snapshot")
    _writable(args.output)
    design = _load(args.design)
    from memdesigner.exporters.torch_code import to_python

    try:
        code = to_python(design)
    except ValueError as err:
        raise CliError(str(err)) from None
    from memdesigner.io.atomic_write import cannot_write, write_atomic

    try:
        write_atomic(args.output, code)
    except OSError as err:
        raise CliError(cannot_write(args.output, err)) from None
    print(args.output)
    return 0


def cmd_fit(args) -> int:
    from memdesigner.cli_fit import cmd_fit as run

    return run(args, _load, _settings_from, _device, CliError)


def _cmd_snapshot(args) -> int:
    from memdesigner.cli_snapshot import cmd_snapshot

    return cmd_snapshot(args)
def _not_a_command(word: str, commands) -> str:
    """A first argument that is neither a subcommand nor an existing file (the window opens files)."""
    import difflib

    if word.lower().endswith(".json") or os.sep in word:
        return f"{word}: no such design file"
    near = difflib.get_close_matches(word, sorted(commands), n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"{word!r} is not a command nor a design file; {hint}commands: {', '.join(sorted(commands))}"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"estimate", "devices", "layers", "render", "import", "export", "fit", "report", "snapshot"}
    if not argv or (argv[0] not in commands and not argv[0].startswith("-")):
        if argv and not os.path.exists(argv[0]):
            sys.stderr.write(f"memdesigner: error: {_not_a_command(argv[0], commands)}\n")
            return EXIT_USAGE
        try:
            from memdesigner._qt.app import main as gui_main
        except ImportError as err:
            sys.stderr.write(f"memdesigner: error: the designer window cannot start: {err}\n")
            return EXIT_USAGE
        return gui_main(argv)
    args = build_parser().parse_args(argv)
    from memdesigner.io.console import tolerate_unencodable_output

    tolerate_unencodable_output()
    handlers = {"estimate": cmd_estimate, "devices": cmd_devices, "layers": cmd_layers, "render": cmd_render,
                "import": cmd_import, "export": cmd_export, "fit": cmd_fit, "report": cli_report.run,
                "snapshot": _cmd_snapshot}
    try:
        return handlers[args.cmd](args)
    except CliError as err:
        one_line = " ".join(str(err).split())  # messages with newlines (user code, tracers) stay one line
        sys.stderr.write(f"memdesigner: error: {one_line}\n")
        return EXIT_USAGE
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # python -m memdesigner.cli: run the imported module, whose CliError the
    from memdesigner.cli import main as _main  # subcommand modules raise (__main__'s is another class)

    raise SystemExit(_main())

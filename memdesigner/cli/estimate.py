"""`memdesigner estimate DESIGN.json [settings] [--max-batch] [--format json]`: one step's memory."""

from __future__ import annotations

import json
import sys

from memdesigner.cli import finetune_options
from memdesigner.cli.common import EXIT_USAGE, CliError, device, generate_args, load, settings_args, settings_from
from memdesigner.cli.generate_text import describe_generate, max_context
from memdesigner.engine.distributed import describe_per_rank
from memdesigner.engine.verified import verdict as check_verdict
from memdesigner.units import format_bytes, format_count, format_flops


def add_parser(sub) -> None:
    e = sub.add_parser("estimate", help="estimate memory for a design file")
    e.add_argument("design")
    settings_args(e)
    e.add_argument("--max-batch", action="store_true", help="also find the largest batch that fits the device")
    generate_args(e)
    e.add_argument("--format", choices=("table", "json"), default="table")
    e.add_argument("--timeline", action="store_true", help="table format: also print the timeline")
    e.add_argument("--explain", action="store_true", help="list every tensor alive at the peak (JSON: peak_contents)")


def run(args) -> int:
    from memdesigner.engine.estimate import estimate

    design = load(args.design)
    settings = settings_from(args, design)
    dev = device(args, design)
    if args.max_batch and dev is None:
        raise CliError("--max-batch needs --device")
    if args.explain and settings.mode == "generate":
        raise CliError("--explain does not cover --mode generate yet (it explains one forward)")
    rep = estimate(design, settings, device=dev, max_batch=args.max_batch)
    if getattr(args, "max_context", False):
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
        d["verified"] = check_verdict(design, settings, rep.peak_bytes)
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
    lines.extend(finetune_options.describe(rep))
    lines.append(f"FLOPs (forward)   {format_count(rep.flops)}")
    peak_name = design.nodes[rep.peak_layer].name if rep.peak_layer in design.nodes else next(
        (r.name for r in rep.layers if r.id == rep.peak_layer), "")  # (inside a block: the layer row's name)
    where = f" in {rep.peak_phase}" + (f" at {peak_name}" if peak_name else "") if rep.peak_phase else ""
    lines.append(f"peak memory       {format_bytes(rep.peak_bytes, 2)} ({rep.peak_bytes:,} B){where}")
    lines.append(f"  verified        {check_verdict(design, rep.settings, rep.peak_bytes)['line']}")
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

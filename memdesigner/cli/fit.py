"""``memdesigner fit``: what to change so that a design fits a device. Exit 0 when it fits as
given, 1 when it does not (for CI pipelines), 2 on bad input."""

from __future__ import annotations

import json

from memdesigner.cli.common import CliError, device, load, settings_args, settings_from
from memdesigner.reports.suggestions import price_text
from memdesigner.units import format_bytes


def render_fit(advice, design, dev) -> str:
    need = format_bytes(advice.device_peak_bytes, 2)
    verdict = "fits" if advice.fits_as_given else "DOES NOT FIT"
    lines = [f"{design.name} on {dev.name}: needs {need} of {format_bytes(dev.memory_bytes, 2)} -> {verdict}",
             "largest batch that fits these settings: " + (str(advice.max_batch) if advice.max_batch else "none")]
    if advice.min_gpus:
        lines.append(f"fewest GPUs that fit (zero3): {advice.min_gpus}")
    if advice.max_sequence is not None:
        lines.append("longest sequence that fits: " + (str(advice.max_sequence) if advice.max_sequence else "none"))
    if not advice.suggestions:
        lines.append("no change found that lowers the peak")
        return "\n".join(lines)
    lines.append("")
    w = max(len(s.change) for s in advice.suggestions)
    lines.append(f"  #  {'change':<{w}}  {'needs':>11}  {'verdict':<12} price")
    for i, s in enumerate(advice.suggestions, 1):
        price = price_text(s)
        v = "fits" if s.fits else "still too big"
        lines.append(f"  {i:<2} {s.change:<{w}}  {format_bytes(s.device_peak_bytes, 2):>11}  {v:<12} {price}")
    return "\n".join(lines)


def add_parser(sub) -> None:
    f = sub.add_parser("fit", help="what to change so that a design fits a device (exit 1: it does not fit)")
    f.add_argument("design")
    settings_args(f)
    f.add_argument("--format", choices=("table", "json"), default="table")


def run(args) -> int:
    from memdesigner.engine.fit import make_it_fit

    design = load(args.design)
    settings = settings_from(args, design)
    dev = device(args, design)
    if dev is None:
        raise CliError("fit needs --device (see `memdesigner devices`)")
    try:
        advice = make_it_fit(design, settings, device=dev)
    except ValueError as err:
        raise CliError(f"{args.design}: {err}") from None
    if args.format == "json":
        print(json.dumps(advice.to_dict(), indent=2))
    else:
        print(render_fit(advice, design, dev))
    return 0 if advice.fits_as_given else 1

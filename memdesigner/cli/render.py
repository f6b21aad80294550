"""`memdesigner render DESIGN.json -o PNG [settings]`: the window for a design, headless."""

from __future__ import annotations

from memdesigner.cli.common import CliError, device, load, settings_args, settings_from, writable


def add_parser(sub) -> None:
    r = sub.add_parser("render", help="render the window for a design to a PNG, headless")
    r.add_argument("design")
    r.add_argument("-o", "--output", required=True)
    settings_args(r)


def run(args) -> int:
    writable(args.output)
    design = load(args.design)
    settings = settings_from(args, design)
    dev = device(args, design)
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

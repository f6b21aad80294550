"""`memdesigner export torch|snapshot DESIGN.json -o FILE`: PyTorch code, or the estimate as a
PyTorch memory snapshot."""

from __future__ import annotations

from memdesigner.cli.common import CliError, Parser, load, settings_args, writable
from memdesigner.cli.snapshot import add_export_parser, cmd_export_snapshot


def add_parser(sub) -> None:
    ex = sub.add_parser("export", help="export a design as code")
    esub = ex.add_subparsers(dest="target", parser_class=Parser)
    et = esub.add_parser("torch", help="PyTorch nn.Module source")
    et.add_argument("design")
    et.add_argument("-o", "--output", required=True)
    add_export_parser(esub, settings_args)


def run(args) -> int:
    if args.target == "snapshot":
        writable(args.output)
        return cmd_export_snapshot(args)
    if args.target != "torch":
        raise CliError("export needs a target: torch or snapshot")
    writable(args.output)
    design = load(args.design)
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

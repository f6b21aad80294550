"""Command line: ``memdesigner`` opens the window; subcommands work headless, one module each in
this package (``add_parser`` and ``run``), with the options they share in cli/common.py.

Bad input prints one line on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import os
import sys

from memdesigner.cli import devices, estimate, export, fit, import_model, layers, render, report, snapshot
from memdesigner.cli.common import EXIT_USAGE, CliError, Parser

COMMANDS = {"estimate": estimate, "devices": devices, "layers": layers, "render": render, "import": import_model,
            "export": export, "fit": fit, "report": report, "snapshot": snapshot}


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="memdesigner", description="Design a neural network and see the memory it needs.")
    sub = p.add_subparsers(dest="cmd", parser_class=Parser)
    for name in ("estimate", "devices", "layers", "render", "import", "fit", "export", "report", "snapshot"):
        COMMANDS[name].add_parser(sub)
    return p


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
    commands = set(COMMANDS)
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
    try:
        return COMMANDS[args.cmd].run(args)
    except CliError as err:
        one_line = " ".join(str(err).split())  # messages with newlines (user code, tracers) stay one line
        sys.stderr.write(f"memdesigner: error: {one_line}\n")
        return EXIT_USAGE
    except BrokenPipeError:
        return 0

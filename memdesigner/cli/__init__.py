"""The ``memdesigner`` command (cli/main.py)."""

from memdesigner.cli.commands import main

__all__ = ["main"]

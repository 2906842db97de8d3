"""The ``trainprobe`` command line.

Each subcommand lives in its own module, which exposes ``register(subcommands)``: it adds its
parser and sets ``run`` to a function taking the parsed arguments and returning the exit status.

Only the module of the command named is imported (the others are for ``trainprobe --help`` and
for a command misspelt): a script that calls ``trainprobe jobs create`` many times pays for the
start-up of ``jobs`` alone, not for the web server of ``serve`` or the training of ``run``
(``benchmarks/cli_startup.py`` measures it).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from trainprobe import __version__

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

COMMAND_MODULES = {
    "run": "trainprobe.cli.run_command",
    "jobs": "trainprobe.cli.jobs_command",
    "logs": "trainprobe.cli.jobs_command",
    "profile": "trainprobe.cli.jobs_command",
    "report": "trainprobe.cli.report_command",
    "serve": "trainprobe.cli.serve_command",
    "ui": "trainprobe.cli.ui_command",
    "rules": "trainprobe.cli.rules_command",
    "validate": "trainprobe.cli.validate_command",
}
"""Each command, and the module that registers it (in the order ``--help`` lists them)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for every subcommand, or for ``command`` alone when it is one of them."""
    parser = argparse.ArgumentParser(
        prog="trainprobe",
        description="Debug and profile training jobs, the SageMaker Debugger way, locally.",
    )
    parser.add_argument("--version", action="version", version=f"trainprobe {__version__}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND")
    if command in COMMAND_MODULES:
        modules = [COMMAND_MODULES[command]]
    else:
        modules = list(dict.fromkeys(COMMAND_MODULES.values()))
    for module in modules:
        importlib.import_module(module).register(subcommands)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_named(arguments))
    args = parser.parse_args(arguments)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        status: int = args.run(args)
    except BrokenPipeError:
        # The reader went away (`trainprobe rules list | head`): stop quietly, as Unix tools do.
        sys.stderr.close()
        return 0
    return status


if __name__ == "__main__":
    sys.exit(main())

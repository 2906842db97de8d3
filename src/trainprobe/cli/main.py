"""The ``trainprobe`` command line.

Each subcommand lives in its own module, which exposes ``register(subcommands)``: it adds its
parser and sets ``run`` to a function taking the parsed arguments and returning the exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from trainprobe import __version__
from trainprobe.cli import (
    jobs_command,
    report_command,
    rules_command,
    run_command,
    serve_command,
    validate_command,
)

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="trainprobe",
        description="Debug and profile training jobs, the SageMaker Debugger way, locally.",
    )
    parser.add_argument("--version", action="version", version=f"trainprobe {__version__}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (
        run_command,
        jobs_command,
        report_command,
        serve_command,
        rules_command,
        validate_command,
    ):
        module.register(subcommands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
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

"""``trainprobe ui [--port N] [--host ADDRESS] [--no-browser]``: the live web UI.

Every job of the job store, live in the browser: its status, steps, rules and their evidence,
losses, step durations and system metrics, its saved tensors, and buttons to stop it or to
profile its next steps. It prints the one URL to open (with the token that lets a browser in)
and opens it, as Jupyter does; Ctrl-C stops it (the jobs keep running).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import sys
import webbrowser

from trainprobe.cli.serve_command import add_address_arguments
from trainprobe.ui.address_file import DEFAULT_PORT

__all__ = ["register", "ui"]


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ui`` to the command line."""
    parser = subcommands.add_parser(
        "ui",
        help="the live web UI: jobs, rules, tensors and profiles in the browser",
        description="Serve the live web UI for the jobs of the job store on this machine.",
    )
    add_address_arguments(
        parser, DEFAULT_PORT, "another address lets other machines reach the UI, token in hand"
    )
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    parser.set_defaults(run=ui)


def ui(args: argparse.Namespace) -> int:
    """Serve until interrupted; the exit status."""
    from trainprobe.ui.server import UiServer

    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        server = UiServer(args.port, host=args.host, verbose=args.verbose)
    except OSError as error:
        print(f"trainprobe ui: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 1
    if not ipaddress.ip_address(server.host).is_loopback:
        print(
            f"trainprobe ui: warning: listening on {server.host}, not only on this machine: "
            "anyone who can reach it and holds the token can stop your jobs",
            file=sys.stderr,
        )
    print(f"trainprobe ui: {server.url}", flush=True)
    if not args.no_browser:
        with contextlib.suppress(webbrowser.Error):
            webbrowser.open(server.url)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0

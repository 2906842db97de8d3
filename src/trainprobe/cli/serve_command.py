"""``trainprobe serve [--port N] [--host ADDRESS]``: the job operations over HTTP in SageMaker's
JSON protocol.

Point boto3 or the AWS CLI at it with the key pair it keeps in ``$TRAINPROBE_HOME/
serve-credentials`` (profile ``trainprobe``) to create, describe, list, update and stop training
jobs on this machine. It listens on 127.0.0.1 unless ``--host`` says otherwise; Ctrl-C stops it
(the jobs it started keep running).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import sys

from trainprobe.jobs import JobStore
from trainprobe.jobs.server.access_key import (
    PROFILE,
    AccessKeyFileError,
    default_path,
    load_or_create,
)
from trainprobe.jobs.server.api_app import ApiLimits
from trainprobe.jobs.server.api_server import LOCALHOST, JobApiServer

__all__ = ["DEFAULT_PORT", "add_address_arguments", "address_argument", "register", "serve"]

DEFAULT_PORT = 8642

_EPILOG = """\
example:
  trainprobe serve --port 8642 &
  AWS_SHARED_CREDENTIALS_FILE=~/.trainprobe/serve-credentials aws --profile trainprobe \\
      --region us-east-1 --endpoint-url http://127.0.0.1:8642 sagemaker list-training-jobs

served: CreateTrainingJob, DescribeTrainingJob, ListTrainingJobs, UpdateTrainingJob,
StopTrainingJob, for requests signed (AWS Signature Version 4) with the key pair in
$TRAINPROBE_HOME/serve-credentials, created on the first start (mode 600). Relative paths in
requests are taken from the directory trainprobe serve was started in.
"""


def address_argument(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an IP address; expected one such as 127.0.0.1 or ::1"
        ) from None


def add_address_arguments(parser: argparse.ArgumentParser, port: int, other_hosts: str) -> None:
    """``--port`` (default ``port``) and ``--host`` (default 127.0.0.1; ``other_hosts`` says
    what another address means) for a server command."""
    parser.add_argument(
        "--port", type=int, default=port, help=f"the port (default {port}; 0: any free port)"
    )
    parser.add_argument(
        "--host",
        type=address_argument,
        default=LOCALHOST,
        help=f"the IP address to listen on (default {LOCALHOST}: this machine only; {other_hosts})",
    )


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve`` to the command line."""
    parser = subcommands.add_parser(
        "serve",
        help="serve the job operations over HTTP (SageMaker's JSON protocol, for boto3)",
        description="Serve CreateTrainingJob, DescribeTrainingJob, ListTrainingJobs, "
        "UpdateTrainingJob and StopTrainingJob in SageMaker's JSON protocol, to callers "
        "signing with trainprobe's key pair.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_address_arguments(
        parser,
        DEFAULT_PORT,
        "another address lets other machines reach the server, which runs commands as you",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=ApiLimits.request_seconds,
        metavar="SECONDS",
        help="how long a client may take to send a request's headers, and again its body "
        f"(default {ApiLimits.request_seconds:g})",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    parser.set_defaults(run=serve)


def serve(args: argparse.Namespace) -> int:
    """Serve until interrupted; the exit status."""
    if not args.request_timeout > 0:
        print("trainprobe serve: --request-timeout must be more than 0 seconds", file=sys.stderr)
        return 2
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        key = load_or_create()
    except AccessKeyFileError as error:
        print(f"trainprobe serve: {error}", file=sys.stderr)
        return 1
    try:
        server = JobApiServer(
            args.port,
            host=args.host,
            store=JobStore(),
            key=key,
            limits=ApiLimits(request_seconds=args.request_timeout),
            verbose=args.verbose,
        )
    except OSError as error:
        print(
            f"trainprobe serve: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr
        )
        return 1
    if not ipaddress.ip_address(server.host).is_loopback:
        print(
            f"trainprobe serve: warning: listening on {server.host}, not only on this machine: "
            "anyone who can reach it and holds the key pair can run commands as you",
            file=sys.stderr,
        )
    print(
        f"trainprobe serve: the key pair is in {default_path()} (profile {PROFILE!r}; "
        "AWS_SHARED_CREDENTIALS_FILE may point there)",
        flush=True,
    )
    print(f"trainprobe serve: SageMaker's JSON API at {server.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: uvicorn let open requests finish
        server.serve_forever()
    return 0

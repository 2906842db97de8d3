"""``trainprobe serve [--port N]``: the job operations over HTTP in SageMaker's JSON protocol.

Point boto3 or the AWS CLI at it (``endpoint_url="http://127.0.0.1:N"``, any region and keys)
to create, describe, list, update and stop training jobs on this machine. It listens on
127.0.0.1 only; Ctrl-C stops it (the jobs it started keep running).
"""

from __future__ import annotations

import argparse
import sys

from trainprobe.jobs import JobStore
from trainprobe.jobs.http_api import JobApiServer

__all__ = ["DEFAULT_PORT", "register", "serve"]

DEFAULT_PORT = 8642

_EPILOG = """\
example:
  trainprobe serve --port 8642 &
  python -c 'import boto3; sm = boto3.client("sagemaker", endpoint_url="http://127.0.0.1:8642",
      region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x");
      print(sm.list_training_jobs()["TrainingJobSummaries"])'

served: CreateTrainingJob, DescribeTrainingJob, ListTrainingJobs, UpdateTrainingJob,
StopTrainingJob. Relative paths in requests are taken from the directory trainprobe serve
was started in.
"""


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve`` to the command line."""
    parser = subcommands.add_parser(
        "serve",
        help="serve the job operations over HTTP (SageMaker's JSON protocol, for boto3)",
        description="Serve CreateTrainingJob, DescribeTrainingJob, ListTrainingJobs, "
        "UpdateTrainingJob and StopTrainingJob on 127.0.0.1, in SageMaker's JSON protocol.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free port)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    parser.set_defaults(run=serve)


def serve(args: argparse.Namespace) -> int:
    """Serve until interrupted; the exit status."""
    try:
        server = JobApiServer(args.port, store=JobStore(), verbose=args.verbose)
    except OSError as error:
        print(f"trainprobe serve: cannot listen on 127.0.0.1:{args.port}: {error}", file=sys.stderr)
        return 1
    print(f"trainprobe serve: SageMaker's JSON API at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0

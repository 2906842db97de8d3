"""``trainprobe jobs create|describe|list|stop|update``, ``trainprobe logs JOB`` and
``trainprobe profile JOB --steps N``.

The ``jobs`` commands are SageMaker's training job operations, as the AWS CLI offers them:
requests as JSON files (``--cli-input-json file://job.json``) or options, responses printed as
JSON (times in ISO 8601); ``list`` prints a table, and its JSON with ``--json``. ``logs`` prints
a job's training output, or a rule's, the runner's or the system monitor's messages, and with
``--follow`` keeps printing until the job is done. ``profile`` asks a running job's flight
recorder to capture its next N steps with torch.profiler.

Exit status: 0 done; 2 a bad request (the message names the field, the value and what is
allowed), an unknown job, or a job in the wrong state for the operation.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.config.request_json import load_request

# Each action imports the operation it runs when it runs: `jobs create`, called many times by
# a script, loads what creating a job needs and no more (not rich, not DescribeTrainingJob's
# readers of rule statuses).

__all__ = ["register"]

_FOLLOW_POLL_SECONDS = 0.5


def _json_value(value: object) -> object:
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _print_json(response: dict[str, Any]) -> None:
    print(json.dumps(response, indent=4, default=_json_value))


def _job_name(args: argparse.Namespace) -> dict[str, Any]:
    name = args.training_job_name or args.name
    if name is None:
        raise ConfigError("TrainingJobName", None, "the job's name (JOB or --training-job-name)")
    return {"TrainingJobName": name}


def _add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", metavar="JOB", help="the training job's name")
    parser.add_argument("--training-job-name", help="the training job's name (AWS CLI style)")


def _create(args: argparse.Namespace) -> int:
    from trainprobe.jobs.operations.create import create_training_job

    response = create_training_job(load_request(args.cli_input_json))
    _print_json(response)
    return 0


def _describe(args: argparse.Namespace) -> int:
    from trainprobe.jobs.operations.describe import describe_training_job

    _print_json(describe_training_job(_job_name(args)))
    return 0


def _list(args: argparse.Namespace) -> int:
    from trainprobe.jobs.operations.listing import list_training_jobs

    request: dict[str, Any] = {}
    for option, member in (
        ("name_contains", "NameContains"),
        ("status_equals", "StatusEquals"),
        ("sort_by", "SortBy"),
        ("sort_order", "SortOrder"),
        ("max_results", "MaxResults"),
        ("next_token", "NextToken"),
        ("creation_time_after", "CreationTimeAfter"),
        ("creation_time_before", "CreationTimeBefore"),
    ):
        value = getattr(args, option)
        if value is not None:
            request[member] = value
    response = list_training_jobs(request)
    if args.json:
        _print_json(response)
    else:
        _print_table(response)
    return 0


def _when(value: object) -> str:
    if isinstance(value, datetime.datetime):
        return value.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return "" if value is None else str(value)


def _print_table(response: dict[str, Any]) -> None:
    """ListTrainingJobs as a table: one job a row, its status and times."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    for column in ("Name", "Status", "Secondary", "Created", "Ended"):
        table.add_column(column)
    for job in response.get("TrainingJobSummaries", []):
        table.add_row(
            job["TrainingJobName"],
            job.get("TrainingJobStatus", ""),
            job.get("SecondaryStatus", ""),
            _when(job.get("CreationTime")),
            _when(job.get("TrainingEndTime")),
        )
    console = Console(soft_wrap=True)
    if table.row_count:
        console.print(table)
    else:
        console.print("no training jobs")
    if response.get("NextToken"):
        console.print(f"more with --next-token {response['NextToken']}")


def _stop(args: argparse.Namespace) -> int:
    from trainprobe.jobs.operations.control import stop_training_job

    _print_json(stop_training_job(_job_name(args)))
    return 0


def _profile(args: argparse.Namespace) -> int:
    from trainprobe.jobs.operations.control import profile_training_job

    request = {"TrainingJobName": args.job, "Steps": args.steps}
    _print_json(profile_training_job(request, requested_by="trainprobe profile"))
    return 0


def _update(args: argparse.Namespace) -> int:
    from trainprobe.jobs.operations.control import update_training_job

    if args.cli_input_json is not None:
        request = load_request(args.cli_input_json)
    else:
        request = _job_name(args)
        profiler: dict[str, Any] = {}
        if args.profiler_interval_ms is not None:
            profiler["ProfilingIntervalInMilliseconds"] = args.profiler_interval_ms
        if args.disable_profiler:
            profiler["DisableProfiler"] = True
        if args.enable_profiler:
            profiler["DisableProfiler"] = False
        request["ProfilerConfig"] = profiler
    _print_json(update_training_job(request))
    return 0


def _log_path(args: argparse.Namespace) -> tuple[str, str]:
    from trainprobe.jobs.launch_plan import LaunchPlan
    from trainprobe.jobs.operations.describe import find_job, layout_of
    from trainprobe.jobs.runner.job_rules import rule_log
    from trainprobe.jobs.store import JobStore

    store = JobStore()
    record = find_job(store, {"TrainingJobName": args.job})
    layout = layout_of(record)
    if args.rule:
        try:
            return record.name, rule_log(LaunchPlan.read(record.job_dir), args.rule)
        except (OSError, ValueError, KeyError):  # no launch plan: the job failed before it
            return record.name, layout.rule_log(args.rule)
    if args.runner:
        return record.name, layout.runner_log
    if args.monitor:
        return record.name, layout.monitor_log
    return record.name, layout.training_log


def _logs(args: argparse.Namespace) -> int:
    from trainprobe.jobs.operations.describe import find_job
    from trainprobe.jobs.operations.progress import LogTail
    from trainprobe.jobs.store import JobStore

    name, path = _log_path(args)
    tail = LogTail(path)
    store = JobStore()
    while True:
        for line in tail.new_lines():
            print(line, flush=True)
        if not args.follow:
            return 0
        record = find_job(store, {"TrainingJobName": name})
        if record.runner_done:
            for line in tail.new_lines():
                print(line, flush=True)
            return 0
        time.sleep(_FOLLOW_POLL_SECONDS)


def _guarded(command: str, action: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            status: int = action(args)
        except ConfigError as error:
            print(f"trainprobe {command}: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
        return status

    return run


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``jobs`` and ``logs`` to the command line."""
    jobs = subcommands.add_parser(
        "jobs",
        help="create, describe, list, stop and update training jobs",
        description="SageMaker's training job operations, run on this machine.",
    )
    actions = jobs.add_subparsers(dest="jobs_action", metavar="ACTION")

    create = actions.add_parser("create", help="start a job from a CreateTrainingJob request")
    create.add_argument(
        "--cli-input-json",
        required=True,
        metavar="file://JOB.json",
        help="the CreateTrainingJob request",
    )
    create.set_defaults(run=_guarded("jobs create", _create))

    describe = actions.add_parser("describe", help="a job's status, rules and outputs")
    _add_name(describe)
    describe.set_defaults(run=_guarded("jobs describe", _describe))

    listing = actions.add_parser("list", help="the jobs, newest last")
    listing.add_argument("--name-contains")
    listing.add_argument("--status-equals")
    listing.add_argument("--sort-by", help="CreationTime (default), Name or Status")
    listing.add_argument("--sort-order", help="Ascending (default) or Descending")
    listing.add_argument("--max-results", type=int)
    listing.add_argument("--next-token")
    listing.add_argument(
        "--json", action="store_true", help="print ListTrainingJobs' JSON response, not a table"
    )
    listing.add_argument("--creation-time-after", metavar="TIME", help="ISO 8601")
    listing.add_argument("--creation-time-before", metavar="TIME", help="ISO 8601")
    listing.set_defaults(run=_guarded("jobs list", _list))

    stop = actions.add_parser("stop", help="stop a running job")
    _add_name(stop)
    stop.set_defaults(run=_guarded("jobs stop", _stop))

    update = actions.add_parser(
        "update", help="change a running job's profiling (UpdateTrainingJob)"
    )
    _add_name(update)
    update.add_argument("--cli-input-json", metavar="file://UPDATE.json")
    update.add_argument("--profiler-interval-ms", type=int, metavar="MS")
    switch = update.add_mutually_exclusive_group()
    switch.add_argument("--disable-profiler", action="store_true")
    switch.add_argument("--enable-profiler", action="store_true")
    update.set_defaults(run=_guarded("jobs update", _update))

    def usage(args: argparse.Namespace) -> int:
        jobs.print_help(sys.stderr)
        return 2

    jobs.set_defaults(run=usage)

    logs = subcommands.add_parser(
        "logs",
        help="a job's training output (or a rule's, the runner's, the monitor's)",
        description="Print a job's training output; --follow keeps printing until it is done.",
    )
    logs.add_argument("job", metavar="JOB", help="the training job's name")
    logs.add_argument("--follow", "-f", action="store_true", help="print new lines as they come")
    which = logs.add_mutually_exclusive_group()
    which.add_argument("--rule", metavar="NAME", help="the rule evaluator's messages")
    which.add_argument("--runner", action="store_true", help="the job runner's messages")
    which.add_argument("--monitor", action="store_true", help="the system monitor's messages")
    logs.set_defaults(run=_guarded("logs", _logs))

    profile = subcommands.add_parser(
        "profile",
        help="capture a running job's next steps with torch.profiler (its flight recorder)",
        description="Ask a running job's training to capture its next steps with torch.profiler; "
        "the capture appears under the job's profiler-output/framework/pytorch/flight_recorder/ "
        "and in its profiler report.",
    )
    profile.add_argument("job", metavar="JOB", help="the training job's name")
    profile.add_argument(
        "--steps", type=int, default=2, metavar="N", help="how many steps (default 2, at most 20)"
    )
    profile.set_defaults(run=_guarded("profile", _profile))

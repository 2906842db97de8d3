"""A job's DebugRuleEvaluationStatuses and ProfilerRuleEvaluationStatuses, from its rule output.

Each rule evaluator keeps ``rule-output/<RuleConfigurationName>/status.json`` up to date; a
rule with no status yet is InProgress (its evaluator is starting). A rule whose status is not
final when its job's runner is gone will never finish: it is reported as Error, saying so.

Profiler rules (ProfilerReport and the rules it runs) have no implementation in this version.
A job that configures them still runs: each is recorded at once as Error with
``PROFILER_RULES_UNAVAILABLE`` as its details, and the profiler data is kept for later.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Mapping
from typing import Any

from trainprobe.jobs.arns import rule_evaluation_job_arn
from trainprobe.jobs.layout import JobLayout
from trainprobe.rules.verdict import ERROR, IN_PROGRESS, STOPPING
from trainprobe.storage.rule_output import RuleOutputWriter, RuleStatus, read_status

__all__ = [
    "PROFILER_RULES_UNAVAILABLE",
    "UNFINISHED_STATUSES",
    "evaluation_statuses",
    "record_unavailable_profiler_rules",
]

UNFINISHED_STATUSES = frozenset({IN_PROGRESS, STOPPING})

PROFILER_RULES_UNAVAILABLE = (
    "profiler rules added while a job runs are not started in this version of trainprobe: "
    "this rule was not evaluated. Run it on the job's profiler output, {profiler_output}, with "
    "python -m trainprobe.rules.profiler."
)


def _names(rules: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str(rule.get("RuleConfigurationName")) for rule in rules]


def record_unavailable_profiler_rules(
    layout: JobLayout, rules: Iterable[Mapping[str, Any]]
) -> None:
    """Record each profiler rule added by UpdateTrainingJob as Error: not started (see above)."""
    details = PROFILER_RULES_UNAVAILABLE.format(profiler_output=layout.profiler_output)
    for name in _names(rules):
        directory = layout.rule_output_dir(name)
        if read_status(directory) is not None:
            continue
        writer = RuleOutputWriter(directory)
        writer.write_status(RuleStatus(name, ERROR, details, time.time(), finished=True))
        writer.close()


def _timestamp(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)


def _status(
    job_name: str, layout: JobLayout, name: str, runner_lost: str | None, since: float
) -> dict[str, Any]:
    status = read_status(layout.rule_output_dir(name))
    if status is None:
        value, details, modified = IN_PROGRESS, "the rule evaluator is starting", since
    else:
        value = status.rule_evaluation_status
        details, modified = status.status_details, status.last_modified_time
    if value in UNFINISHED_STATUSES and runner_lost is not None:
        details = f"the rule did not finish: {runner_lost}" + (
            f" (its last status: {value}: {details})" if details else ""
        )
        value = ERROR
    return {
        "RuleConfigurationName": name,
        "RuleEvaluationJobArn": rule_evaluation_job_arn(job_name, name),
        "RuleEvaluationStatus": value,
        "StatusDetails": details,
        "LastModifiedTime": _timestamp(modified),
    }


def evaluation_statuses(
    job_name: str,
    layout: JobLayout,
    rules: Iterable[Mapping[str, Any]],
    *,
    runner_lost: str | None = None,
    since: float,
) -> list[dict[str, Any]]:
    """The evaluation status of each of ``rules`` (configuration entries), in their order.

    ``runner_lost`` says why the job's runner is gone, if it is; ``since`` is the time a rule
    without a status yet reports as its last change (the job's creation)."""
    return [_status(job_name, layout, name, runner_lost, since) for name in _names(rules)]

"""A job's DebugRuleEvaluationStatuses and ProfilerRuleEvaluationStatuses, from its rule output.

Each rule evaluator keeps ``rule-output/<RuleConfigurationName>/status.json`` up to date; a
rule with no status yet is InProgress: its evaluator is starting (for a profiler rule added by
UpdateTrainingJob, the job's runner starts one within a tick). A rule whose status is not final
when its job's runner is gone will never finish: it is reported as Error, saying so. A rule whose
evaluator could not be started at all is recorded as Error at once, with the reason
(``record_rules_not_started``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Mapping
from typing import Any

from trainprobe.jobs.arns import rule_evaluation_job_arn
from trainprobe.rules.verdict import ERROR, IN_PROGRESS, STOPPING
from trainprobe.storage.job_layout import JobLayout
from trainprobe.storage.rule_output import RuleOutputWriter, RuleStatus, read_status

__all__ = [
    "UNFINISHED_STATUSES",
    "evaluation_statuses",
    "record_rules_not_started",
]

UNFINISHED_STATUSES = frozenset({IN_PROGRESS, STOPPING})


def _names(rules: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str(rule.get("RuleConfigurationName")) for rule in rules]


def record_rules_not_started(
    layout: JobLayout, rules: Iterable[Mapping[str, Any]], reason: str
) -> None:
    """Record each of ``rules`` (configuration entries) that has no status yet as Error, with
    ``reason``: its evaluator could not be started, so it would otherwise look InProgress until
    the job's end."""
    for name in _names(rules):
        directory = layout.rule_output_dir(name)
        if read_status(directory) is not None:
            continue
        writer = RuleOutputWriter(directory)
        writer.write_status(RuleStatus(name, ERROR, reason, time.time(), finished=True))
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

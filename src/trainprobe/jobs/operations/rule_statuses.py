"""A job's DebugRuleEvaluationStatuses and ProfilerRuleEvaluationStatuses, from its rule output.

Each rule evaluator keeps ``rule-output/<RuleConfigurationName>/status.json`` up to date; a
rule with no status yet is InProgress: its evaluator is starting (for a profiler rule added by
UpdateTrainingJob, the job's runner starts one within a tick). A rule whose evaluator could not
be started, or ended (killed, out of memory, stuck) before the rule's status was final, is
recorded as Error by the runner, with the reason (``record_unfinished_rules``), unless the
evaluator held other rules too: then the runner takes each up in a process of its own
(``trainprobe.jobs.runner.job_rules``) and says so meanwhile. A rule whose
status is not final when its job's runner is gone will never finish: it is reported as Error,
saying so.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from trainprobe.config.statuses import UNFINISHED_RULE_STATUSES, RuleEvaluationStatus
from trainprobe.jobs.operations.arns import rule_evaluation_job_arn
from trainprobe.storage.job_layout import JobLayout
from trainprobe.storage.rule_output import RuleOutputWriter, RuleStatus, read_status

__all__ = [
    "evaluation_statuses",
    "record_unfinished_rules",
    "rule_names",
    "unfinished_rules",
]

log = logging.getLogger(__name__)


def rule_names(rules: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str(rule.get("RuleConfigurationName")) for rule in rules]


def unfinished_rules(layout: JobLayout, names: Iterable[str]) -> list[str]:
    """Those of the rules ``names`` whose status is not final (none yet counts as not final)."""
    return [name for name in names if not _finished(layout, name)]


def _finished(layout: JobLayout, name: str) -> bool:
    try:
        previous = read_status(layout.rule_output_dir(name))
    except (OSError, ValueError, KeyError):
        return False
    return previous is not None and previous.finished


def record_unfinished_rules(
    layout: JobLayout,
    names: Iterable[str],
    reason: str,
    status: RuleEvaluationStatus = RuleEvaluationStatus.ERROR,
) -> list[str]:
    """Record each rule of ``names`` whose status is not final as ``status`` (Error: its
    evaluator could not start, or ended before the rule did; InProgress: it is being taken up
    by another), with ``reason``, so that it does not look as it did until the job's end. The
    names recorded; a status that cannot be written (a full disk) is logged and left."""
    recorded = []
    finished = status not in UNFINISHED_RULE_STATUSES
    for name in names:
        directory = layout.rule_output_dir(name)
        try:
            previous = read_status(directory)
        except (OSError, ValueError, KeyError):
            previous = None
        if previous is not None and previous.finished:
            continue
        if previous is None:
            written = RuleStatus(name, status, reason, time.time(), finished=finished)
        else:
            # What the rule had checked when its evaluator ended stays counted.
            written = dataclasses.replace(
                previous,
                rule_evaluation_status=status,
                status_details=reason,
                last_modified_time=time.time(),
                finished=finished,
            )
        try:
            writer = RuleOutputWriter(directory)
            writer.write_status(written)
            writer.close()
        except OSError as error:
            log.warning("could not record rule %s as %s (%s): %s", name, status, reason, error)
            continue
        recorded.append(name)
    return recorded


def _timestamp(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)


def _status(
    job_name: str, layout: JobLayout, name: str, runner_lost: str | None, since: float
) -> dict[str, Any]:
    status = read_status(layout.rule_output_dir(name))
    if status is None:
        value = RuleEvaluationStatus.IN_PROGRESS
        details, modified = "the rule evaluator is starting", since
    else:
        value = status.rule_evaluation_status
        details, modified = status.status_details, status.last_modified_time
    if value in UNFINISHED_RULE_STATUSES and runner_lost is not None:
        details = f"the rule did not finish: {runner_lost}" + (
            f" (its last status: {value}: {details})" if details else ""
        )
        value = RuleEvaluationStatus.ERROR
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
    return [_status(job_name, layout, name, runner_lost, since) for name in rule_names(rules)]

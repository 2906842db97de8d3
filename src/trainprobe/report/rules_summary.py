"""The report's rules: what each profiler rule found, read from the data the rules keep.

The ProfilerReport rule writes each of its rules' report data to
``profiler-reports/<Rule>.json`` after every window
(``trainprobe.rules.profiler_rules.report_data``);
its ``status.json`` says whether the evaluation is still going. The summary lists the rules that
fired first, most often first, as SageMaker's report does.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from trainprobe.report.records import Record
from trainprobe.storage import files
from trainprobe.storage.rule_output import read_status

__all__ = ["ProfilerRuleRow", "RulesSummary", "read_rule_reports", "rules_summary"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProfilerRuleRow(Record):
    """One profiler rule's findings, as its report data holds them (any JSON the rule wrote)."""

    rule: str
    description: Any
    recommendation: Any
    rule_triggered: Any
    violations: Any
    datapoints: Any
    parameters: Any
    windows: Any
    error: Any
    details: Any


@dataclass(frozen=True)
class RulesSummary(Record):
    """The section: the ProfilerReport rule's output and status, and a row per rule."""

    rule_output: str | None
    status: str | None
    status_details: str | None
    rules: list[ProfilerRuleRow]


def read_rule_reports(reports_dir: str | None) -> dict[str, dict[str, Any]]:
    """Each rule's report data under ``reports_dir``, by rule; a broken file is left out."""
    if reports_dir is None or not files.is_dir(reports_dir):
        return {}
    found = {}
    for name in files.list_files(reports_dir, ".json"):
        path = os.path.join(reports_dir, name)
        try:
            data = json.loads(files.read_bytes(path))
        except (OSError, ValueError) as error:
            log.warning("leaving out %s, which is not a rule's report data: %s", path, error)
            continue
        if isinstance(data, dict):
            found[str(data.get("Rule") or os.path.splitext(os.path.basename(name))[0])] = data
    return found


def rules_summary(reports: dict[str, dict[str, Any]], rule_output: str | None) -> RulesSummary:
    """The section's content: the ProfilerReport rule's status, and a row per rule."""
    status = read_status(rule_output) if rule_output is not None else None
    rows = [
        ProfilerRuleRow(
            rule=rule,
            description=data.get("Description", ""),
            recommendation=data.get("Recommendation", ""),
            rule_triggered=data.get("RuleTriggered", 0),
            violations=data.get("Violations", 0),
            datapoints=data.get("Datapoints", 0),
            parameters=data.get("Parameters") or data.get("RuleParameters", ""),
            windows=data.get("Windows"),
            error=data.get("Error"),
            details=data.get("Details", {}),
        )
        for rule, data in reports.items()
    ]
    rows.sort(key=lambda row: (-int(row.rule_triggered or 0), row.rule))
    return RulesSummary(
        rule_output=rule_output,
        status=None if status is None else status.rule_evaluation_status,
        status_details=None if status is None else status.status_details,
        rules=rows,
    )

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
from typing import Any

from trainprobe.storage import files
from trainprobe.storage.rule_output import read_status

__all__ = ["read_rule_reports", "rules_summary"]

log = logging.getLogger(__name__)


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


def rules_summary(reports: dict[str, dict[str, Any]], rule_output: str | None) -> dict[str, Any]:
    """The section's content: the ProfilerReport rule's status, and a row per rule."""
    status = read_status(rule_output) if rule_output is not None else None
    rows = [
        {
            "Rule": rule,
            "Description": data.get("Description", ""),
            "Recommendation": data.get("Recommendation", ""),
            "RuleTriggered": data.get("RuleTriggered", 0),
            "Violations": data.get("Violations", 0),
            "Datapoints": data.get("Datapoints", 0),
            "Parameters": data.get("Parameters") or data.get("RuleParameters", ""),
            "Windows": data.get("Windows"),
            "Error": data.get("Error"),
            "Details": data.get("Details", {}),
        }
        for rule, data in reports.items()
    ]
    rows.sort(key=lambda row: (-int(row["RuleTriggered"] or 0), row["Rule"]))
    return {
        "RuleOutput": rule_output,
        "Status": None if status is None else status.rule_evaluation_status,
        "StatusDetails": None if status is None else status.status_details,
        "Rules": rows,
    }

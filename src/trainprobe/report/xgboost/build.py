"""``build_xgboost_report``: write an XGBoost job's training report, ``xgboost_report.html`` and
its JSON twin ``xgboost_report.json``, where SageMaker's CreateXgboostReport puts it:
``<job>/rule-output/CreateXgboostReport/``.

Both files appear atomically. The report is built from what is on disk: the tensors the XGBoost
hook saved and the statuses the job's other rules wrote beside this one.
"""

from __future__ import annotations

import os

from trainprobe.analysis.trial import create_trial
from trainprobe.config.errors import ConfigError
from trainprobe.report.build import ReportFiles
from trainprobe.report.xgboost.content import xgboost_report_content
from trainprobe.report.xgboost.page import render_xgboost_page
from trainprobe.rules.profiler_rules.report_data import json_safe
from trainprobe.storage import files, step_reader

__all__ = [
    "HTML_FILE",
    "JSON_FILE",
    "RULE_NAME",
    "build_xgboost_report",
    "is_xgboost_output",
]

HTML_FILE = "xgboost_report.html"
JSON_FILE = "xgboost_report.json"
RULE_NAME = "CreateXgboostReport"
_XGBOOST_COLLECTIONS = frozenset({"feature_importance", "trees", "full_shap"})


def is_xgboost_output(debug_output: str) -> bool:
    """Whether the tensor output at ``debug_output`` was written by an XGBoost hook (its
    collections file has XGBoost's collections)."""
    return step_reader.has_collections(debug_output, _XGBOOST_COLLECTIONS)


def build_xgboost_report(
    debug_output: str | os.PathLike[str],
    rule_output: str | os.PathLike[str],
    *,
    job_name: str | None = None,
    out_dir: str | os.PathLike[str] | None = None,
) -> ReportFiles:
    """Write the report of the XGBoost job whose tensors are at ``debug_output``, as the rule
    whose output directory is ``rule_output`` (``<job>/rule-output/<rule>``); into ``out_dir``
    when given. ConfigError when there are no tensors to report on."""
    debug_output, rule_output = os.fspath(debug_output), files.absolute(os.fspath(rule_output))
    try:
        trial = create_trial(debug_output, timeout=0)
    except Exception as error:
        raise ConfigError(
            "debug_output", debug_output, f"the tensor output of an XGBoost job ({error})"
        ) from None
    root = os.path.dirname(rule_output)
    name = job_name or os.path.basename(os.path.dirname(root))
    content = json_safe(xgboost_report_content(trial, name, root, os.path.basename(rule_output)))
    directory = os.fspath(out_dir) if out_dir is not None else rule_output
    page = render_xgboost_page(content)
    return ReportFiles.write(directory, (HTML_FILE, JSON_FILE), content, page)

"""xgboost_report.html from real XGBoost trainings, in real headless Chromium: it opens offline,
logs no error, draws every plot and shows every section; its JSON twin agrees with XGBoost.
The screenshots are kept in .cache/test-artifacts/ for a person to look at."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from browser import open_page
from trainprobe.report.xgboost import build_xgboost_report, is_xgboost_output
from trainprobe.storage.rule_output import RuleOutputWriter, RuleStatus

pytestmark = pytest.mark.slow

ARTIFACTS = Path(__file__).resolve().parents[2] / ".cache" / "test-artifacts"
TRAINING = Path(__file__).resolve().parents[1] / "capture" / "xgboost_training.py"
REPORT_COLLECTIONS = "metrics,hyperparameters,predictions,labels,feature_importance"
SECTIONS = (
    "Hyperparameters",
    "Label distribution",
    "Loss and metrics per round",
    "Feature importance",
    "Evaluation on the validation set",
    "Rules",
)


def xgboost_job(job: Path, task: str) -> tuple[Path, dict[str, float]]:
    """A job directory whose training saved what CreateXgboostReport asks for, with a
    TreeDepth verdict beside it; returns the report rule's output and the last metrics."""
    finished = subprocess.run(
        [
            sys.executable,
            str(TRAINING),
            "--task",
            task,
            "--rounds",
            "8",
            "--hook",
            str(job / "debug-output"),
            "--collections",
            REPORT_COLLECTIONS,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr
    last = {}
    for line in finished.stdout.splitlines():
        if line.startswith("metric ") and line.split()[2] == "7":
            last[line.split()[1]] = float(line.split()[3])
    other = RuleOutputWriter(str(job / "rule-output" / "TreeDepth"))
    other.write_status(RuleStatus("TreeDepth", "NoIssuesFound", "", time.time(), finished=True))
    other.close()
    return job / "rule-output" / "CreateXgboostReport", last


def test_a_binary_classification_report(tmp_path: Path) -> None:
    rule_output, last = xgboost_job(tmp_path / "binary-job", "binary")
    assert is_xgboost_output(str(tmp_path / "binary-job" / "debug-output"))
    report = build_xgboost_report(tmp_path / "binary-job" / "debug-output", rule_output)
    assert Path(report.html) == rule_output / "xgboost_report.html"

    content = json.loads(Path(report.json).read_text())
    evaluation = content["Evaluation"]
    assert evaluation["Task"] == "binary"
    assert evaluation["ROC"]["AUC"] == pytest.approx(last["validation-auc"], rel=1e-6)
    matrix = np.array(evaluation["Confusion"]["Matrix"])
    assert matrix.sum() == sum(evaluation["Labels"]["Counts"])
    assert evaluation["Accuracy"]["Rounds"] == list(range(8))
    assert evaluation["Accuracy"]["Values"][-1] == pytest.approx(np.trace(matrix) / matrix.sum())
    assert {m["Metric"] for m in content["Metrics"]} == {"logloss", "auc"}
    assert content["Hyperparameters"]["objective"] == "binary:logistic"
    assert content["Hyperparameters"]["eta"] == 0.3
    assert type(content["Hyperparameters"]["max_depth"]) is int  # 3, not 3.0
    assert content["Rules"] == [{"Rule": "TreeDepth", "Status": "NoIssuesFound", "Details": ""}]

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "xgboost-report-binary.png"
    visit = open_page(Path(report.html), screenshot)
    assert visit.console_errors == []
    assert visit.page_errors == []
    assert visit.network_requests == []
    # labels; logloss and auc; 5 importance types; confusion, accuracy, ROC
    assert visit.plots == 11
    assert visit.plots_drawn == visit.plots_with_traces == visit.plots
    assert visit.title == "XGBoost training report: binary-job"
    for heading in SECTIONS:
        assert heading in visit.text
    assert "No " not in visit.text.split("Rules")[0]  # no section says something is missing
    assert "TreeDepth" in visit.text and "ROC curve" in visit.text


def test_a_regression_report_shows_the_residuals(tmp_path: Path) -> None:
    rule_output, last = xgboost_job(tmp_path / "regression-job", "regression")
    report = build_xgboost_report(tmp_path / "regression-job" / "debug-output", rule_output)
    content = json.loads(Path(report.json).read_text())
    evaluation = content["Evaluation"]
    assert evaluation["Task"] == "regression"
    assert evaluation["Residuals"]["RootMeanSquare"] == pytest.approx(
        last["validation-rmse"], rel=1e-5
    )
    assert sum(evaluation["Labels"]["Histogram"]["Counts"]) == sum(
        evaluation["Residuals"]["Histogram"]["Counts"]
    )

    visit = open_page(Path(report.html), ARTIFACTS / "xgboost-report-regression.png")
    assert visit.console_errors == [] and visit.page_errors == []
    # labels; rmse; 5 importance types; residuals
    assert visit.plots == 8
    assert visit.plots_drawn == visit.plots_with_traces == visit.plots
    for heading in SECTIONS:
        assert heading in visit.text

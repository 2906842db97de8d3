"""XGBoost jobs end to end: ``trainprobe run`` on a script that never imports trainprobe, with
XGBoost's rules and CreateXgboostReport; then ``trainprobe report`` on the job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from job_helpers import trainprobe

pytestmark = pytest.mark.slow

TRAINING = Path(__file__).resolve().parent.parent / "capture" / "xgboost_training.py"


def test_trainprobe_run_judges_an_over_deep_xgboost_model_and_writes_its_report(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    finished = trainprobe(
        tmp_path,
        "run",
        str(TRAINING),
        "--rule", "Overfit",
        "--rule", "LossNotDecreasing",
        "--rule", "CreateXgboostReport",
        "--save-interval", "1",
        "--no-profiler",
        "--output", str(out),
        "--name", "deep-xgboost",
        "--",
        "--noisy", "--max-depth", "100", "--min-child-weight", "0", "--rounds", "12",
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout + finished.stderr
    lines = finished.stdout.splitlines()
    summary = lines[lines.index("Training job deep-xgboost: Completed") :]
    assert "  Overfit: IssuesFound" in summary
    assert "  LossNotDecreasing: IssuesFound" in summary
    assert "  CreateXgboostReport: NoIssuesFound" in summary

    rule_output = out / "deep-xgboost" / "rule-output" / "CreateXgboostReport"
    content = json.loads((rule_output / "xgboost_report.json").read_text())
    assert {rule["Rule"]: rule["Status"] for rule in content["Rules"]} == {
        "Overfit": "IssuesFound",
        "LossNotDecreasing": "IssuesFound",
    }
    # CreateXgboostReport's collections were saved: the report has every part.
    assert content["Hyperparameters"]["max_depth"] == 100
    assert content["Evaluation"]["Task"] == "binary"
    assert content["FeatureImportance"] and content["Metrics"]
    assert (rule_output / "xgboost_report.html").stat().st_size > 1_000_000  # plotly inline

    again = trainprobe(tmp_path, "report", "deep-xgboost")
    assert again.returncode == 0, again.stderr
    assert f"XGBoost report: {rule_output / 'xgboost_report.html'}" in again.stdout.splitlines()

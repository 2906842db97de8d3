"""XGBoost jobs end to end: ``trainprobe run`` on a script that never imports trainprobe (its
``XGBClassifier.fit``), with XGBoost's rules, a profiler rule on the system monitor's metrics and
CreateXgboostReport; then ``trainprobe report`` on the job."""

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
        "--rule", "CPUBottleneck",
        "--rule", "TreeDepth",
        "--collection", "trees",
        "--save-interval", "1",
        "--output", str(out),
        "--name", "deep-xgboost",
        "--",
        "--api", "sklearn",
        "--noisy", "--max-depth", "100", "--min-child-weight", "0", "--rounds", "12",
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout + finished.stderr
    lines = finished.stdout.splitlines()
    summary = lines[lines.index("Training job deep-xgboost: Completed") :]
    assert "  Overfit: IssuesFound" in summary
    assert "  LossNotDecreasing: IssuesFound" in summary
    assert "  CreateXgboostReport: NoIssuesFound" in summary
    assert "  TreeDepth: IssuesFound" in summary  # the trees of --collection trees
    # The system monitor ran as for a PyTorch job, and the profiler rule concluded on its
    # metrics (whatever it found on this machine).
    assert {"  CPUBottleneck: NoIssuesFound", "  CPUBottleneck: IssuesFound"} & set(summary)
    assert list((out / "deep-xgboost" / "profiler-output" / "system").rglob("*.json"))

    rule_output = out / "deep-xgboost" / "rule-output" / "CreateXgboostReport"
    content = json.loads((rule_output / "xgboost_report.json").read_text())
    rules = {rule["Rule"]: rule for rule in content["Rules"]}
    assert {name: rule["Status"] for name, rule in rules.items() if name != "CPUBottleneck"} == {
        "Overfit": "IssuesFound",
        "LossNotDecreasing": "IssuesFound",
        "TreeDepth": "IssuesFound",
    }
    assert rules["CPUBottleneck"]["Status"] in ("NoIssuesFound", "IssuesFound")
    # The scikit-learn API's evaluation sets, the first of them the training data.
    assert {data_set["Set"] for data_set in content["Metrics"][0]["Sets"]} == {
        "validation_0",
        "validation_1",
    }
    assert "validation_1-logloss" in rules["LossNotDecreasing"]["Details"]
    # CreateXgboostReport's collections were saved: the report has every part. The
    # hyperparameters are those the script set, not the scikit-learn API's unset ones.
    assert content["Hyperparameters"]["max_depth"] == 100
    assert "None" not in content["Hyperparameters"].values()
    assert content["Evaluation"]["Task"] == "binary"
    assert content["FeatureImportance"] and content["Metrics"]
    assert (rule_output / "xgboost_report.html").stat().st_size > 1_000_000  # plotly inline

    again = trainprobe(tmp_path, "report", "deep-xgboost")
    assert again.returncode == 0, again.stderr
    assert f"XGBoost report: {rule_output / 'xgboost_report.html'}" in again.stdout.splitlines()

"""XGBoost jobs as the SDK and boto3 start them: ``trainprobe.estimator.XGBoost`` with a script,
and boto3's CreateTrainingJob, sent to ``trainprobe serve``'s API, for SageMaker's built-in XGBoost
algorithm (no script)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from api_calls import client
from job_helpers import rule, rule_statuses, wait_for
from sklearn.datasets import load_breast_cancer

from trainprobe import debugger
from trainprobe.config.errors import ConfigError
from trainprobe.estimator import XGBoost
from trainprobe.jobs import JobStore
from trainprobe.jobs.server.access_key import load_or_create
from trainprobe.jobs.server.api_server import JobApiServer
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

TRAINING = Path(__file__).resolve().parent.parent / "capture" / "xgboost_training.py"
IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"


def test_the_xgboost_estimator_runs_a_script_with_its_report(
    store: JobStore, tmp_path: Path
) -> None:
    estimator = XGBoost(
        entry_point=TRAINING.name,
        source_dir=str(TRAINING.parent),
        framework_version="1.7-1",
        hyperparameters={"task": "multiclass", "rounds": 6},
        rules=[debugger.Rule.sagemaker(debugger.rule_configs.create_xgboost_report())],
        output_path=str(tmp_path / "out"),
        disable_profiler=True,
        store=store,
    )
    request = estimator._request("probe")
    assert request["AlgorithmSpecification"]["TrainingImage"] == "sagemaker-xgboost:1.7-1"
    estimator.fit(logs=False)
    job = estimator.latest_training_job
    assert job is not None and job.describe()["TrainingJobStatus"] == "Completed"
    # The job runner writes the report once the rules have concluded, and then is done.
    wait_for(store, job.name, lambda _: _runner_done(store, job.name), "the job runner")
    report = Path(tmp_path / "out" / job.name / "rule-output" / "CreateXgboostReport")
    assert (report / "xgboost_report.html").exists()
    # A multi-class report: a confusion matrix of the 3 classes by argmax, no ROC curve.
    evaluation = json.loads((report / "xgboost_report.json").read_text())["Evaluation"]
    assert evaluation["Task"] == "multiclass"
    assert evaluation["Labels"]["Classes"] == [0, 1, 2]
    matrix = np.array(evaluation["Confusion"]["Matrix"])
    assert matrix.shape == (3, 3) and matrix.sum() == sum(evaluation["Labels"]["Counts"])
    assert [row["Class"] for row in evaluation["Confusion"]["PerClass"]] == [0, 1, 2]
    assert evaluation["Accuracy"]["Rounds"] == [0, 5]
    assert "ROC" not in evaluation and "Residuals" not in evaluation
    trial = create_trial(estimator.latest_job_debugger_artifacts_path() or "")
    # CreateXgboostReport's collections: metrics every 5 rounds, hyperparameters at round 0.
    assert trial.tensor("validation-mlogloss").steps() == [0, 5]
    assert str(trial.tensor("hyperparameters/task").value(0)[0]) == "multiclass"
    with pytest.raises(ConfigError, match="framework_version"):
        XGBoost(entry_point="train.py", store=store)
    # Every argument of the SDK's XGBoost estimator is taken.
    XGBoost("train.py", "1.5-1", None, None, "py3", None, "us-west-2", store=store)


def _runner_done(store: JobStore, name: str) -> bool:
    record = store.get(name)
    return record is not None and bool(record.runner_done)


def _channel(directory: Path, features: np.ndarray, labels: np.ndarray) -> str:
    directory.mkdir(parents=True)
    np.savetxt(directory / "data.csv", np.column_stack([labels, features]), delimiter=",")
    return str(directory)


def test_boto3_runs_the_builtin_xgboost_algorithm(
    store: JobStore, api_server: JobApiServer, tmp_path: Path
) -> None:
    features, labels = load_breast_cancer(return_X_y=True)
    flip = np.random.default_rng(1).random(labels.shape[0]) < 0.33
    labels = np.where(flip, 1 - labels, labels)
    train = _channel(tmp_path / "train", features[:400], labels[:400])
    validation = _channel(tmp_path / "validation", features[400:], labels[400:])
    channels = [
        {
            "ChannelName": name,
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri}},
        }
        for name, uri in (("train", train), ("validation", validation))
    ]
    sagemaker = client(api_server.url, load_or_create())
    sagemaker.create_training_job(
        **{
            "TrainingJobName": "xgboost-algorithm",
            "RoleArn": "arn:aws:iam::111122223333:role/local",
            "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
            "HyperParameters": {
                "num_round": "8",
                "objective": "binary:logistic",
                "max_depth": "100",
                "min_child_weight": "0",
                "nthread": "1",
            },
            "InputDataConfig": channels,
            "OutputDataConfig": {"S3OutputPath": str(tmp_path / "out")},
            "ResourceConfig": {
                "InstanceCount": 1,
                "InstanceType": "ml.m5.large",
                "VolumeSizeInGB": 1,
            },
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
            "DebugHookConfig": {
                "S3OutputPath": str(tmp_path / "out"),
                "HookParameters": {"save_interval": "1"},
                "CollectionConfigurations": [
                    {"CollectionName": "metrics"},
                    {"CollectionName": "trees"},
                    {"CollectionName": "hyperparameters"},
                ],
            },
            "DebugRuleConfigurations": [rule("TreeDepth"), rule("Overfit")],
        }
    )
    description = wait_for(store, "xgboost-algorithm")
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    assert rule_statuses(description) == {"TreeDepth": "IssuesFound", "Overfit": "IssuesFound"}
    job = tmp_path / "out" / "xgboost-algorithm"
    assert any(job.rglob("xgboost-model"))
    trial = create_trial(str(job / "debug-output"))
    assert trial.steps() == list(range(8))
    assert int(trial.tensor("hyperparameters/max_depth").value(0)[0]) == 100
    assert {"train-logloss", "validation-logloss"} <= set(trial.tensor_names())

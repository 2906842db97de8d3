"""trainprobe.estimator.Estimator: the SDK's request for the Debugger parts, and a real job."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.jobs.job_helpers import wait_for
from tests.reference_envs import run_reference

from trainprobe import debugger
from trainprobe.estimator import Estimator, UnexpectedStatusException
from trainprobe.jobs import JobStore

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "examples" / "digits"
DEBUGGER_KEYS = (
    "DebugRuleConfigurations",
    "DebugHookConfig",
    "TensorBoardOutputConfig",
    "ProfilerRuleConfigurations",
    "ProfilerConfig",
)

# Each case builds the Debugger arguments of an estimator from the SDK's classes (``api``);
# both the SDK and trainprobe run the same text.
CASES = {
    "defaults": "{}",
    "rules_hook_tensorboard": """dict(
        rules=[api.Rule.sagemaker(api.rule_configs.loss_not_decreasing()),
               api.Rule.sagemaker(api.rule_configs.vanishing_gradient(),
                                  rule_parameters={"threshold": "1e-6"})],
        debugger_hook_config=api.DebuggerHookConfig(
            hook_parameters={"save_interval": "5"},
            collection_configs=[api.CollectionConfig("weights")]),
        tensorboard_output_config=api.TensorBoardOutputConfig(TENSORBOARD))""",
    "profiler_rules_and_framework_profile": """dict(
        rules=[api.ProfilerRule.sagemaker(api.rule_configs.CPUBottleneck()),
               api.Rule.sagemaker(api.rule_configs.exploding_tensor())],
        profiler_config=api.ProfilerConfig(
            system_monitor_interval_millis=100,
            framework_profile_params=api.FrameworkProfile(start_step=2, num_steps=3)))""",
    "everything_off": "dict(debugger_hook_config=False, disable_profiler=True)",
}

_SDK = """
import json, boto3
from types import SimpleNamespace
import sagemaker.debugger as debugger
from sagemaker.session import Session
from sagemaker.estimator import Estimator, _TrainingJob
api = debugger
OUT, TENSORBOARD = "s3://bucket/out", "s3://bucket/tensorboard"
session = Session(boto_session=boto3.Session(
    region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"))
keys = {"debugger_rule_configs": "DebugRuleConfigurations", "debugger_hook_config":
    "DebugHookConfig", "tensorboard_output_config": "TensorBoardOutputConfig",
    "profiler_rule_configs": "ProfilerRuleConfigurations", "profiler_config": "ProfilerConfig"}
results = {}
for name, text in json.loads(CASES).items():
    estimator = Estimator(image_uri="image", role="arn:aws:iam::1:role/r", instance_count=1,
        instance_type="ml.m5.xlarge", output_path=OUT, sagemaker_session=session, **eval(text))
    estimator._prepare_for_training(job_name="job-1")
    arguments = _TrainingJob._get_train_args(estimator, inputs=None, experiment_config=None)
    results[name] = {keys[k]: v for k, v in arguments.items() if k in keys and v}
print(json.dumps(results))
"""


def _comparable(parts: dict[str, Any], out: str, tensorboard: str) -> dict[str, Any]:
    """The Debugger parts with the output roots named alike, the rule images left out (the SDK
    puts its region's image there) and the collections in name order (the SDK keeps a set)."""
    text = json.dumps(parts).replace(json.dumps(out)[1:-1], "OUT")
    data: dict[str, Any] = json.loads(text.replace(json.dumps(tensorboard)[1:-1], "TENSORBOARD"))
    for key in ("DebugRuleConfigurations", "ProfilerRuleConfigurations"):
        for rule in data.get(key, []):
            rule.pop("RuleEvaluatorImage", None)
    hook = data.get("DebugHookConfig", {})
    if "CollectionConfigurations" in hook:
        hook["CollectionConfigurations"].sort(key=lambda entry: entry["CollectionName"])
    return data


@pytest.fixture(scope="module")
def sdk_requests() -> dict[str, Any]:
    result = run_reference("sagemaker", f"CASES = {json.dumps(json.dumps(CASES))}\n{_SDK}")
    assert isinstance(result, dict)
    return result


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_debugger_parts_of_the_request_are_the_sdks(
    case: str, sdk_requests: dict[str, Any], tmp_path: Path
) -> None:
    out, tensorboard = str(tmp_path / "out"), str(tmp_path / "tensorboard")
    namespace = {"api": debugger, "TENSORBOARD": tensorboard}
    arguments = eval(CASES[case], namespace)
    estimator = Estimator(
        "train.py",
        source_dir=str(DIGITS),
        output_path=out,
        store=JobStore(tmp_path / "j.db"),
        **arguments,
    )
    request = estimator._request("job-1")
    ours = {key: request[key] for key in DEBUGGER_KEYS if request.get(key)}
    expected = _comparable(sdk_requests[case], "s3://bucket/out", "s3://bucket/tensorboard")
    assert _comparable(ours, out, tensorboard) == expected


def test_the_estimator_trains_the_digits_example_and_follows_it(
    store: JobStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    estimator = Estimator(
        entry_point="train.py",
        source_dir=str(DIGITS),
        hyperparameters={"epochs": 2},
        rules=[debugger.Rule.sagemaker(debugger.rule_configs.exploding_tensor())],
        debugger_hook_config=debugger.DebuggerHookConfig(hook_parameters={"save_interval": "10"}),
        output_path=str(tmp_path / "out"),
        base_job_name="digits",
        store=store,
    )
    estimator.fit()
    assert "final eval accuracy" in capsys.readouterr().out
    job = estimator.latest_training_job
    assert job is not None and job.name.startswith("digits-")
    assert job.describe()["TrainingJobStatus"] == "Completed"
    summary = estimator.rule_job_summary()
    assert [(s["RuleConfigurationName"], s["RuleEvaluationStatus"]) for s in summary] == [
        ("ExplodingTensor", "NoIssuesFound")
    ]
    tensors = estimator.latest_job_debugger_artifacts_path()
    assert tensors == os.path.join(str(tmp_path / "out"), job.name, "debug-output")
    assert any(Path(tensors, "index").rglob("*.json"))
    profiler = estimator.latest_job_profiler_artifacts_path()
    assert profiler is not None and any(Path(profiler, "system").rglob("*"))
    assert estimator.latest_job_tensorboard_artifacts_path() is None


def test_update_profiler_and_stop_a_running_estimator_job(store: JobStore, tmp_path: Path) -> None:
    estimator = Estimator(
        "train.py",
        source_dir=str(DIGITS),
        hyperparameters={"epochs": 500},
        output_path=str(tmp_path / "out"),
        store=store,
    )
    with pytest.raises(ValueError, match="fit"):
        estimator.latest_job_profiler_artifacts_path()
    estimator.fit(wait=False)
    job = estimator.latest_training_job
    assert job is not None
    wait_for(store, job.name, lambda d: d["SecondaryStatus"] == "Training", "training")
    estimator.update_profiler(system_monitor_interval_millis=100)
    described = job.describe()
    assert described["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] == 100
    with pytest.raises(ValueError, match="already on"):
        estimator.enable_default_profiling()
    estimator.disable_profiling()
    assert job.describe()["ProfilingStatus"] == "Disabled"
    job.stop()
    final = job.wait(logs=False)
    assert final["TrainingJobStatus"] == "Stopped"


def test_a_crashing_script_fails_fit_with_its_error(store: JobStore, tmp_path: Path) -> None:
    estimator = Estimator(
        "plain_training.py",
        source_dir=str(Path(__file__).parent),
        hyperparameters={"crash-at": 1},
        output_path=str(tmp_path / "out"),
        store=store,
    )
    with pytest.raises(UnexpectedStatusException) as failed:
        estimator.fit(logs=False)
    assert failed.value.actual_status == "Failed"
    assert "the training data ran out at step 1" in str(failed.value)

"""The SDK's estimator surface: every argument SageMaker notebooks pass is accepted, inputs become
channels, and ``estimator.sagemaker_session.sagemaker_client`` answers for the local job."""

from __future__ import annotations

import inspect
import logging
import time
from pathlib import Path

import pytest

from reference_envs import run_reference
from trainprobe.estimator import Estimator, PyTorch
from trainprobe.jobs import JobStore
from trainprobe.sdk_arguments import IGNORED

HERE = Path(__file__).resolve().parent

SDK_SIGNATURES = """
import inspect, json
import sagemaker.estimator as e, sagemaker.pytorch as p
def names(f):
    return [n for n in inspect.signature(f).parameters if n not in ("self", "kwargs")]
print(json.dumps({"Estimator": names(e.EstimatorBase.__init__) + names(e.Estimator.__init__),
                  "PyTorch": names(p.PyTorch.__init__), "fit": names(e.EstimatorBase.fit)}))
"""


def test_every_argument_of_the_sdks_estimators_is_accepted() -> None:
    sdk = run_reference("sagemaker", SDK_SIGNATURES)
    assert isinstance(sdk, dict)
    for ours, theirs in ((Estimator, sdk["Estimator"]), (PyTorch, sdk["PyTorch"])):
        explicit = set(inspect.signature(ours.__init__).parameters) | set(
            inspect.signature(Estimator.__init__).parameters
        )
        missing = [name for name in theirs if name not in explicit and name not in IGNORED]
        assert missing == [], ours.__name__
    assert list(inspect.signature(Estimator.fit).parameters)[1:] == sdk["fit"]


def test_a_name_the_sdk_does_not_know_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'volume_sise'.*volume_size"):
        Estimator(entry_point="train.py", volume_sise=30)


@pytest.mark.slow
def test_a_notebooks_pytorch_estimator_trains_here(
    tmp_path: Path, store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("1,2\n")
    with caplog.at_level(logging.INFO, logger="trainprobe"):
        estimator = PyTorch(
            entry_point=str(HERE / "channel_training.py"),
            role="arn:aws:iam::111122223333:role/SageMakerRole",
            framework_version="2.1",
            py_version="py310",
            instance_count=1,
            instance_type="ml.p3.2xlarge",
            volume_size=30,
            subnets=["subnet-1"],
            metric_definitions=[{"Name": "loss", "Regex": "loss: ([0-9.]+)"}],
            enable_sagemaker_metrics=True,
            debugger_hook_config=False,
            disable_profiler=True,
            store=store,
        )
        estimator.fit(
            {"training": str(data)},
            wait=False,
            logs="None",
            job_name="sdk-estimator",
            experiment_config={"ExperimentName": "e"},
        )
    assert "PyTorch(role=...) is accepted and ignored" in caplog.text
    assert estimator.role.endswith("SageMakerRole")  # kept, as the SDK keeps it
    # The notebooks' polling loop, unchanged.
    client = estimator.sagemaker_session.sagemaker_client
    deadline = time.monotonic() + 120
    while True:
        status = client.describe_training_job(TrainingJobName="sdk-estimator")
        if status["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    assert status["TrainingJobStatus"] == "Completed", status
    assert status["InputDataConfig"][0]["ChannelName"] == "training"
    listed = client.list_training_jobs(NameContains="sdk-")["TrainingJobSummaries"]
    assert [job["TrainingJobName"] for job in listed] == ["sdk-estimator"]
    # The SDK's output_path ends with a slash: the notebooks' path arithmetic holds.
    assert estimator.output_path.endswith("/")
    job_dir = Path(estimator.output_path + estimator.latest_training_job.job_name)
    [log] = job_dir.rglob("training.log")
    assert "training channel: ['train.csv']" in log.read_text()

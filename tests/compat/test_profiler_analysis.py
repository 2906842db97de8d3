"""smdebug's profiling analysis at smdebug's paths: ``TrainingJob`` and ``PandasFrame`` as the
SageMaker profiling notebooks use them, on a job's profiler output in the real formats."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "report"))

from synthetic_job import SyntheticJob, write_synthetic_job

from trainprobe import smdebug_names


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyntheticJob]:
    written = write_synthetic_job(
        tmp_path_factory.mktemp("job") / "my-job", seconds=20, steps=20, outlier_every=0
    )
    smdebug_names.install(by="a test")
    yield written
    smdebug_names.uninstall()


def test_the_notebooks_frames_have_smdebugs_columns(job: SyntheticJob) -> None:
    from smdebug.profiler.analysis.notebook_utils.training_job import TrainingJob
    from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame

    tj = TrainingJob(str(job.job_dir))
    assert tj.profiler_s3_output_path == str(job.profiler_output)
    tj.wait_for_sys_profiling_data_to_be_available()
    tj.wait_for_framework_profiling_data_to_be_available()
    frame = PandasFrame(tj.profiler_s3_output_path)
    system = frame.get_all_system_metrics()
    assert list(system.columns) == [
        "timestamp", "timestamp_us", "value", "system_metric", "dimension", "nodeID", "type",
    ]  # fmt: skip
    assert system["timestamp_us"].min() == 0 and system["nodeID"].unique().tolist() == ["algo-1"]
    assert {"CPUUtilization", "GPUUtilization"} <= set(system["dimension"])
    framework = frame.get_all_framework_metrics()
    assert list(framework.columns) == [
        "start_time", "end_time", "start_time_us", "end_time_us", "tid", "pid",
        "framework_metric", "step", "bytes", "process", "nodeID",
    ]  # fmt: skip
    assert sorted(set(framework["step"]) - {-1}) == list(range(20))
    cpu = frame.get_all_system_metrics(selected_system_metrics=["cpu0"])
    assert set(cpu["system_metric"]) == {"cpu0"} and len(cpu) < len(system)
    steps_system, steps_framework = frame.get_profiler_data_by_step(5, 7)
    assert sorted(set(steps_framework["step"])) == [5, 6, 7]
    began, ended = steps_framework["start_time_us"].min(), steps_framework["end_time_us"].max()
    assert len(steps_system) and steps_system["timestamp_us"].between(began, ended).all()
    start_us = job.first_step_s * 1e6
    by_time, _ = frame.get_profiler_data_by_time(start_us, start_us + 2e6)
    assert by_time["timestamp_us"].between(0, 20e6).all() and 0 < len(by_time) < len(system)

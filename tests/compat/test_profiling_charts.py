"""The notebook charts and analyses at smdebug's paths, on a job's profiler output in the real
formats with GPUs (written by the report tests' synthesizer): what each chart holds, the
per-node and all-node views, and the clear errors on arguments they cannot take."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "report"))

from synthetic_job import SyntheticJob, write_synthetic_job

from trainprobe import smdebug_names
from trainprobe.config.errors import ConfigError

STEPS = 20


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyntheticJob]:
    written = write_synthetic_job(
        tmp_path_factory.mktemp("job") / "gpu-job", seconds=20, steps=STEPS, gpus=2, cores=4
    )
    smdebug_names.install(by="a test")
    yield written
    smdebug_names.uninstall()


def test_the_charts_hold_every_gpu_and_core(job: SyntheticJob, tmp_path: Path) -> None:
    from smdebug.profiler.analysis.notebook_utils import Heatmap, MetricsHistogram, TrainingJob

    tj = TrainingJob(str(job.job_dir))
    system = tj.get_systems_metrics_reader()
    framework = tj.get_framework_metrics_reader()
    heatmap = Heatmap(system, framework)  # smdebug's defaults: every CPU and GPU event
    rows = list(heatmap.figure.data[0].y)
    assert {"GPUUtilization-nodeid:algo-1_gpu0", "GPUUtilization-nodeid:algo-1_gpu1"} <= set(rows)
    assert {f"CPUUtilization-nodeid:algo-1_cpu{n}" for n in range(4)} <= set(rows)
    assert "CPUUtilization-nodeid:algo-1_total" in rows
    z_gpu0 = heatmap.figure.data[0].z[rows.index("GPUUtilization-nodeid:algo-1_gpu0")]
    readings = [
        r.value
        for r in system.get_events(0, system.get_timestamp_of_latest_available_file() + 1)
        if r.name == "gpu0" and r.dimension == "GPUUtilization"
    ]
    assert [value for value in z_gpu0 if value is not None] == readings
    combined = Heatmap(system, select_dimensions=["GPU"], show_workers=False)
    assert set(combined.figure.data[0].y) >= {"GPUUtilization_gpu0", "GPUUtilization_total"}

    histogram = MetricsHistogram(system)
    histogram.plot(select_dimensions=["GPUUtilization"], select_events=["gpu"], show_workers=False)
    names = {trace.name for trace in histogram.figure.data}
    assert names == {"GPUUtilization_gpu0", "GPUUtilization_gpu1"}
    counted = {trace.name: sum(trace.y) for trace in histogram.figure.data}
    values = histogram.system_metrics["GPUUtilization"]["gpu0"]
    assert counted["GPUUtilization_gpu0"] == sum(0 <= v <= 98 for v in values)
    page = Path(histogram.save_html(tmp_path / "histogram.html"))
    assert "GPUUtilization_gpu1" in page.read_text()


def test_the_step_charts_hold_each_step(job: SyntheticJob) -> None:
    from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
    from smdebug.profiler.analysis.notebook_utils.step_histogram import StepHistogram
    from smdebug.profiler.analysis.notebook_utils.step_timeline_chart import StepTimelineChart

    framework = LocalAlgorithmMetricsReader(str(job.profiler_output))
    timeline = StepTimelineChart(framework)
    assert [step for _, _, step in timeline.steps] == list(range(STEPS))
    histogram = StepHistogram(framework)
    histogram.plot(show_workers=False)  # the default metrics name per-node phases: steps only
    assert set(histogram.step_metrics) == {"Step:ModeKeys.TRAIN"}
    histogram.plot(select_metrics=["Step:ModeKeys", "Forward"], show_workers=False)
    assert set(histogram.step_metrics) == {"Step:ModeKeys.TRAIN", "Forward"}
    assert len(histogram.step_metrics["Step:ModeKeys.TRAIN"]) == STEPS
    [train] = [t for t in histogram.figure.data if t.name == "Step:ModeKeys.TRAIN"]
    assert list(train.x) == histogram.step_metrics["Step:ModeKeys.TRAIN"]


def test_arguments_they_cannot_take_say_what_is_allowed(job: SyntheticJob, tmp_path: Path) -> None:
    from smdebug.profiler.analysis.notebook_utils.timeline_charts import TimelineCharts
    from smdebug.profiler.analysis.python_profile_analysis import cProfileAnalysis
    from smdebug.profiler.analysis.utils.merge_timelines import MergedTimeline
    from smdebug.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis
    from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
    from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader

    with pytest.raises(ConfigError, match=r"local_profile_dir: .* an existing folder"):
        cProfileAnalysis(local_profile_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"unit: 'hours' is not valid; MergeUnit\.TIME or"):
        MergedTimeline(str(job.profiler_output)).merge_timeline(0, 1, unit="hours")
    system = LocalSystemMetricsReader(str(job.profiler_output))
    with pytest.raises(ConfigError, match="unit: 'fortnights' is not valid"):
        system.get_events(0, 1, unit="fortnights")
    seconds = system.get_events(job.start_s, job.start_s + 2, unit="SECONDS")
    assert seconds and all(job.start_s <= r.timestamp < job.start_s + 2 for r in seconds)
    charts = TimelineCharts(system, None, select_dimensions=["CPU"])
    assert not [t for t in charts.figure.data if t.type == "bar"]
    with pytest.raises(ConfigError, match="framework_metrics_reader: None is not valid"):
        charts.plot_detailed_profiler_data([0, 10])
    frame = PandasFrame(str(job.profiler_output))
    analysis = PandasFrameAnalysis(
        frame.get_all_system_metrics(), frame.get_all_framework_metrics()
    )
    assert analysis.get_step_statistics(by="step") is None  # logged, as smdebug does
    assert analysis.get_utilization_stats(resource="gpu") is None
    assert analysis.get_device_usage_stats(utilization_ranges=[(0, 10, 20)]).empty


def test_the_timeline_shows_the_last_x_readings_over_the_framework_events(
    job: SyntheticJob,
) -> None:
    from smdebug.profiler.analysis.notebook_utils import TimelineCharts, TrainingJob

    tj = TrainingJob(str(job.job_dir))
    charts = TimelineCharts(
        tj.get_systems_metrics_reader(),
        tj.get_framework_metrics_reader(),
        select_dimensions=["CPU", "GPU"],
        select_events=["total"],
        x=10,
    )
    lines = {trace.name: trace for trace in charts.figure.data if trace.type == "scatter"}
    # select_events are found anywhere in a name, as smdebug's: "total" finds cpu_total too
    assert set(lines) == {
        "CPUUtilization-nodeid:algo-1 total",
        "CPUUtilization-nodeid:algo-1 cpu_total",
        "GPUUtilization-nodeid:algo-1 total",
        "GPUMemoryUtilization-nodeid:algo-1 total",
        "GPUPowerWatts-nodeid:algo-1 total",
    }
    gpu = lines["GPUUtilization-nodeid:algo-1 total"]
    assert len(gpu.x) == job.samples
    assert list(charts.figure.layout.xaxis.range) == [gpu.x[-10], gpu.x[-1]]
    [steps] = [t for t in charts.figure.data if t.name == "Step:ModeKeys.TRAIN"]
    events = tj.get_framework_metrics_reader().get_events(0, job.end_s * 1e6)
    starts = [e.start_time / 1e6 - job.start_s for e in events if e.event_phase == steps.name]
    assert len(steps.x) == STEPS and list(steps.base) == pytest.approx(starts)


def test_a_detailed_range_without_events_says_where_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The system monitor starts before the training does: the notebook's [2, 12] (1 s to 6 s)
    # then holds no framework event, and the chart says so rather than drawing nothing.
    from smdebug.profiler.analysis.notebook_utils import TimelineCharts, TrainingJob

    late = write_synthetic_job(tmp_path / "late-job", seconds=20, steps=10, initialization_s=8)
    tj = TrainingJob(str(late.job_dir))
    charts = TimelineCharts(tj.get_systems_metrics_reader(), tj.get_framework_metrics_reader())
    capsys.readouterr()

    charts.find_time_annotations([2, 12])
    charts.plot_detailed_profiler_data([2, 12])

    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith("Selected timerange: ")
    why = [line for line in said if line.startswith("No framework event from 1.0 s to 6.0 s")]
    assert len(why) == 2 and "(readings 2 to 12)" in why[0]
    assert "The training's events run from 8." in why[0]
    assert not charts.detailed_figure.data

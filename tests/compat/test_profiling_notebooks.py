"""SageMaker Debugger's profiling notebooks, on a real profiled training run by ``trainprobe run``.

The training (``smdebug_training.py``) is written for SageMaker Debugger and runs unchanged. The
analysis cells are those of AWS's public notebooks (interactive analysis of profiling data;
Python profiling), with nothing changed but the one line that turns smdebug's names on. The
interactive analysis notebook's cells also run in a Jupyter kernel, as a user runs them, where
each cell's output is displayed (a display that raises fails the cell).
smdebug 1.0.34 is the oracle where it reads the same data: ``PandasFrameAnalysis`` on the same
DataFrames, and the cProfile analysis of the same profiles.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from profiling_notebook_cells import INTERACTIVE_ANALYSIS_CELLS

from browser import CHROMIUM_FLAGS, chromium_path
from reference_envs import run_reference
from trainprobe import smdebug_names
from trainprobe.storage.modes import ModeKeys
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
TRAIN_STEPS = 14


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A job of ``trainprobe run`` on the unchanged smdebug script, with SageMaker's framework
    profiling defaults: Python (cProfile) at steps 9 to 11; its directory."""
    root = tmp_path_factory.mktemp("profiled")
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainprobe.cli.main",
            "run",
            str(HERE / "smdebug_training.py"),
            "--framework-profile",
            "--save-interval",
            "1",
            "--output",
            str(root / "out"),
            "--name",
            "notebook-job",
            "--plain",
            "--",
            "--steps",
            str(TRAIN_STEPS),
        ],
        env={**os.environ, "TRAINPROBE_HOME": str(root / "home")},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "smdebug is trainprobe.smdebug_names.smdebug.pytorch" in finished.stdout
    yield root / "out" / "notebook-job"


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A notebook's working folder, with the one line of setup run."""
    monkeypatch.chdir(tmp_path)
    import trainprobe.smdebug_names

    trainprobe.smdebug_names.install()
    yield tmp_path
    smdebug_names.uninstall()


def test_an_unchanged_smdebug_script_runs_under_trainprobe_run(job: Path) -> None:
    trial = create_trial(str(job / "debug-output"))
    # Each forward of the registered model is a step: the training's, then one evaluation.
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == list(range(TRAIN_STEPS + 1))
    assert trial.tensor("scalar/learning_rate").value(0) == pytest.approx(0.05)
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.steps(mode=ModeKeys.EVAL) == [0]
    assert loss.value(0, mode=ModeKeys.EVAL) < loss.value(0, mode=ModeKeys.TRAIN)


def test_the_interactive_analysis_notebook(job: Path, notebook: Path) -> None:
    training_job_name = str(job)
    region = "us-west-2"
    # --- the notebook's cells, as published ---
    from smdebug.profiler.analysis.notebook_utils.training_job import TrainingJob

    tj = TrainingJob(training_job_name, region)
    tj.wait_for_sys_profiling_data_to_be_available()
    tj.wait_for_framework_profiling_data_to_be_available()

    from smdebug.profiler.analysis.notebook_utils.timeline_charts import TimelineCharts

    system_metrics_reader = tj.get_systems_metrics_reader()
    system_metrics_reader.refresh_event_file_list()
    framework_metrics_reader = tj.get_framework_metrics_reader()
    framework_metrics_reader.refresh_event_file_list()

    view_timeline_charts = TimelineCharts(
        system_metrics_reader,
        framework_metrics_reader,
        select_dimensions=["CPU", "GPU"],
        select_events=["total"],
    )
    view_timeline_charts.plot_detailed_profiler_data([0, 1000])

    from smdebug.profiler.analysis.notebook_utils.step_timeline_chart import StepTimelineChart

    view_step_timeline_chart = StepTimelineChart(framework_metrics_reader)

    from smdebug.profiler.analysis.notebook_utils.step_histogram import StepHistogram

    step_histogram = StepHistogram(framework_metrics_reader)
    step_histogram.plot(
        starttime=step_histogram.last_timestamp - 5 * 1000 * 1000,
        endtime=step_histogram.last_timestamp,
        show_workers=True,
    )

    from smdebug.profiler.analysis.notebook_utils.metrics_histogram import MetricsHistogram

    metrics_histogram = MetricsHistogram(system_metrics_reader)
    metrics_histogram.plot(
        starttime=0,
        endtime=system_metrics_reader.get_timestamp_of_latest_available_file(),
        select_dimensions=["CPU", "GPU", "I/O"],
        select_events=["total"],
    )

    from smdebug.profiler.analysis.notebook_utils.heatmap import Heatmap

    view_heatmap = Heatmap(
        system_metrics_reader,
        framework_metrics_reader,
        select_dimensions=["CPU", "GPU", "I/O"],
        select_events=["total"],
        plot_height=450,
    )

    from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame

    pf = PandasFrame(tj.profiler_s3_output_path)
    system_metrics_df = pf.get_all_system_metrics()
    framework_metrics_df = pf.get_all_framework_metrics(
        selected_framework_metrics=[
            "Step:ModeKeys.TRAIN",
            "Step:ModeKeys.GLOBAL",
            "Forward",
            "Backward(post-forward)",
        ]
    )

    from smdebug.profiler.analysis.utils.pandas_data_analysis import (
        PandasFrameAnalysis,
        Resource,
        StatsBy,
    )

    pf_analysis = PandasFrameAnalysis(system_metrics_df, framework_metrics_df)
    job_statistics = pf_analysis.get_job_statistics()
    step_stats = pf_analysis.get_step_statistics(by=StatsBy.PROCESS)
    utilization = pf_analysis.get_utilization_stats(Resource.CPU, by=StatsBy.TRAINING_PHASE)
    device_usage = pf_analysis.get_device_usage_stats(device=Resource.CPU)
    intervals = pf_analysis.get_training_phase_intervals()

    from smdebug.profiler.analysis.utils.merge_timelines import MergedTimeline, MergeUnit

    combined_timeline = MergedTimeline(tj.profiler_s3_output_path, output_directory="./")
    merged_file = combined_timeline.merge_timeline(3, 5, unit=MergeUnit.STEP)
    whole_file = combined_timeline.merge_timeline(
        0, framework_metrics_reader.get_timestamp_of_latest_available_file() + 1
    )
    # --- what a user sees ---
    assert tj.profiler_s3_output_path == str(job / "profiler-output")
    cpu_lines = {trace.name: trace for trace in view_timeline_charts.figure.data}
    total = cpu_lines["CPUUtilization-nodeid:algo-1 total"]
    assert len(total.x) >= 4 and all(0 <= value <= 100 for value in total.y)
    phases = {trace.name for trace in view_timeline_charts.figure.data if trace.type == "bar"}
    assert {"Step:ModeKeys.TRAIN", "Forward", "Backward(post-forward)"} <= phases
    # The detailed view holds the framework events from the first reading to the last.
    times = [time for time, _ in view_timeline_charts.series.series[total.name.split()[0]]["total"]]
    between = framework_metrics_reader.get_events(times[0] * 1e6, times[-1] * 1e6)
    detailed = {trace.name: len(trace.x) for trace in view_timeline_charts.detailed_figure.data}
    operators = detailed.pop("cpu_functions")  # the detailed profile of step 5, as smdebug's
    assert detailed == dict(Counter(event.event_phase for event in between))
    assert operators == len(_detailed_operators(job))
    [durations] = view_step_timeline_chart.figure.data
    assert [step for _, _, step in view_step_timeline_chart.steps] == [*range(TRAIN_STEPS), 0]
    assert len(durations.y) == TRAIN_STEPS + 1 and all(y > 0 for y in durations.y)
    step_names = [trace.name for trace in step_histogram.figure.data]
    assert any(name.startswith("Step:ModeKeys.TRAIN-nodeid:algo-1-") for name in step_names)
    [train_steps] = [
        values
        for name, values in step_histogram.step_metrics.items()
        if name.startswith("Step:ModeKeys.TRAIN")
    ]
    in_window = framework_metrics_reader.get_events(
        step_histogram.last_timestamp - 5 * 1000 * 1000, step_histogram.last_timestamp
    )
    expected = [e.duration / 1e6 for e in in_window if e.event_phase == "Step:ModeKeys.TRAIN"]
    assert train_steps == expected and 0 < len(expected) <= TRAIN_STEPS
    histograms = {trace.name: trace for trace in metrics_histogram.figure.data}
    cpu_total = histograms["CPUUtilization-nodeid:algo-1_total"]
    readings = metrics_histogram.system_metrics["CPUUtilization-nodeid:algo-1"]["total"]
    assert sum(cpu_total.y) == len(readings) - sum(value > 98 for value in readings)
    [heat] = view_heatmap.figure.data
    assert "CPUUtilization-nodeid:algo-1_total" in heat.y and len(heat.x) == len(total.x)
    assert list(system_metrics_df.columns[:4]) == [
        "timestamp", "timestamp_us", "value", "system_metric"
    ]  # fmt: skip
    assert 0 < job_statistics["initialization"] < job_statistics["job_duration"]
    assert job_statistics["training_loop_duration"] > 0
    assert set(step_stats["process"]) == {
        "Step:ModeKeys.TRAIN", "Forward", "Backward(post-forward)"
    }  # fmt: skip
    # each reading in its interval: the steps may be too quick for one to fall in a step
    assert set(utilization["Training_phase"]) <= set(intervals["phase"])
    assert "Before Step:ModeKeys.TRAIN" in set(utilization["Training_phase"])
    assert device_usage["type"].tolist() == ["cpu"]
    assert intervals["phase"].iloc[0] == "Before Step:ModeKeys.TRAIN"
    merged = json.loads(Path(merged_file).read_text())
    assert Path(merged_file).parent.resolve() == notebook.resolve()
    assert merged_file.endswith("_merged_timeline.json")
    steps = {
        event["args"]["global_step"]
        for event in merged["traceEvents"]
        if event.get("name", "").startswith("Step:ModeKeys") and event.get("ph") == "X"
    }
    assert steps == {3, 4}  # to the start of step 5, as smdebug merges
    whole = json.loads(Path(whole_file).read_text())["traceEvents"]
    assert any(event.get("ph") == "C" for event in whole)
    assert sum(event.get("name") == "Step:ModeKeys.TRAIN" for event in whole) == TRAIN_STEPS
    for chart in (view_timeline_charts, view_step_timeline_chart, view_heatmap):
        assert Path(chart.save_html(notebook / "chart.html")).stat().st_size > 100_000


JOB_STATISTICS = [
    "start_time",
    "end_time",
    "job_duration",
    "training_loop_start",
    "training_loop_end",
    "training_loop_duration",
    "initialization",
    "finalization",
    "initialization_%",
    "training_loop_%",
    "finalization_%",
]


def run_in_a_kernel(cells: list[str], folder: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The notebook of ``cells``, run in a Jupyter kernel (ipykernel, this Python) in
    ``folder``, with its outputs; CellExecutionError naming the cell that failed."""
    import nbclient
    import nbformat
    from ipykernel.kernelspec import write_kernel_spec

    kernels = folder / "jupyter" / "kernels"
    write_kernel_spec(kernels / "trainprobe-test")
    monkeypatch.setenv("JUPYTER_PATH", str(folder / "jupyter"))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="trainprobe-test",
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute()
    return notebook


def outputs_of(notebook: Any, source: str) -> list[Any]:
    """The outputs of the cell whose source is ``source``."""
    [cell] = [cell for cell in notebook.cells if cell.source == source]
    return list(cell.outputs)


def test_the_interactive_analysis_notebook_runs_in_a_jupyter_kernel(
    job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = (
        "import trainprobe.smdebug_names\n"
        "trainprobe.smdebug_names.install()\n"
        f"training_job_name = {str(job)!r}\n"
        'region = "us-west-2"'
    )
    notebook = run_in_a_kernel([setup, *INTERACTIVE_ANALYSIS_CELLS], tmp_path, monkeypatch)

    # The job's statistics show as smdebug's do: a table of the 11 statistics, in one column.
    [shown] = outputs_of(notebook, "job_statistics")
    table = shown["data"]["text/plain"].splitlines()
    assert table[0].split() == ["0"]
    assert [line.split()[0] for line in table[1:]] == JOB_STATISTICS
    # The Python profiling configuration, read from the job as SageMaker describes it.
    [config] = outputs_of(notebook, "python_profiling_config_tj")
    assert "'ProfilerName': 'cprofile'" in config["data"]["text/plain"]
    [listed] = [
        output
        for cell in notebook.cells
        if cell.source.endswith("step_stats_df.head()")
        for output in cell.outputs
        if output["output_type"] == "execute_result"
    ]
    assert "<table" in listed["data"]["text/html"] and "prestepzero" in listed["data"]["text/html"]
    # Every chart is drawn in the notebook, with its traces.
    for chart in ("MetricsHistogram(", "StepTimelineChart(", "TimelineCharts(", "Heatmap("):
        [cell] = [cell for cell in notebook.cells if f"= {chart}" in cell.source]
        figures = [
            output["data"]["application/vnd.plotly.v1+json"]
            for output in cell.outputs
            if output["output_type"] == "display_data"
        ]
        assert figures and all(figure["data"] for figure in figures), chart
    [merged] = [
        output["data"]["text/plain"]
        for cell in notebook.cells
        if "merge_timeline(start_step" in cell.source
        for output in cell.outputs
        if output["output_type"] == "execute_result"
    ]
    assert (tmp_path / merged.strip("'")).is_file()
    printed = "".join(output.get("text", "") for cell in notebook.cells for output in cell.outputs)
    assert printed.count("Step number: ") == 10


def _detailed_operators(job: Path) -> list[dict[str, object]]:
    """The CPU operators torch.profiler recorded in the job's detailed profile (of step 5),
    ``ts`` in microseconds since the epoch."""
    [trace] = (job / "profiler-output" / "framework" / "pytorch").glob(
        "detailed_profiling/*/000000005/*.pt.trace.json"
    )
    content = json.loads(trace.read_text())
    base_us = content.get("baseTimeNanoseconds", 0) / 1000  # ts counts from it
    return [
        {**event, "ts": base_us + event["ts"]}
        for event in content["traceEvents"]
        if event.get("ph") == "X" and event.get("cat") != "Trace"
    ]


def test_the_notebook_draws_the_detailed_profile_of_the_readings_chosen(
    job: Path, notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The interactive analysis notebook's cells, on the readings around the detailed profile
    # of step 5 (as a user picks them off the chart).
    from smdebug.profiler.analysis.notebook_utils.timeline_charts import TimelineCharts
    from smdebug.profiler.analysis.notebook_utils.training_job import TrainingJob

    tj = TrainingJob(str(job), "us-west-2")
    system_metrics_reader = tj.get_systems_metrics_reader()
    framework_metrics_reader = tj.get_framework_metrics_reader()
    view_timeline_charts = TimelineCharts(
        system_metrics_reader,
        framework_metrics_reader,
        select_dimensions=["CPU", "GPU"],
        select_events=["total"],
    )
    readings = view_timeline_charts.series.series["CPUUtilization-nodeid:algo-1"]["total"]
    operators = _detailed_operators(job)
    profiled_s = min(float(event["ts"]) for event in operators) / 1e6  # type: ignore[arg-type]
    around = [i for i, (time, _) in enumerate(readings) if abs(time - profiled_s) < 3]
    chosen = [around[0], around[-1]]
    capsys.readouterr()

    view_timeline_charts.find_time_annotations(chosen)
    view_timeline_charts.plot_detailed_profiler_data(chosen)

    annotations = capsys.readouterr().out
    assert "Selected timerange" in annotations
    assert "(cumulative time) in aten::linear" in annotations
    assert "(cumulative time) in Step:ModeKeys.TRAIN_5" in annotations
    bars = {trace.name: trace for trace in view_timeline_charts.detailed_figure.data}
    names = {str(event["name"]) for event in operators}
    assert set(bars["cpu_functions"].text) == names and "aten::linear" in names
    assert len(bars["cpu_functions"].x) == len(operators)
    assert "Forward" in bars


def test_the_python_profiling_notebook(job: Path, notebook: Path) -> None:
    profiler_output = str(job / "profiler-output")
    # --- the notebook's cells, as published ---
    from smdebug.profiler.analysis.python_profile_analysis import cProfileAnalysis
    from smdebug.profiler.analysis.utils.python_profile_analysis_utils import Metrics
    from smdebug.profiler.python_profile_utils import PythonProfileModes, StepPhase

    python_analysis = cProfileAnalysis(local_profile_dir=profiler_output)
    profiles = python_analysis.list_profile_stats()
    step_stats = python_analysis.fetch_profile_stats_by_step(9, 10)
    step_stats.print_top_n_functions(Metrics.CUMULATIVE_TIME, n=10)
    forward_stats = python_analysis.fetch_profile_stats_by_step(
        9, 9, start_phase=StepPhase.STEP_START, end_phase=StepPhase.FORWARD_PASS_END
    )
    phase_stats = python_analysis.fetch_profile_stats_by_training_phase()
    job_phase_stats = python_analysis.fetch_profile_stats_by_job_phase()
    nodes = python_analysis.list_available_node_ids()
    # --- what a user sees ---
    assert len(nodes) == 1 and nodes[0].endswith("-algo-1")
    train = profiles[profiles["start_mode"] == "train"]
    assert sorted(set(train["start_step"])) == [9, 10, 11]
    assert set(profiles["start_mode"]) == {"prestepzero", "train"}
    names = {function.function_name for function in step_stats.function_stats_list}
    assert any("forward" in name for name in names)
    forward_names = {function.function_name for function in forward_stats.function_stats_list}
    assert any("forward" in name for name in forward_names)
    assert not any(name.endswith("(step)") and "optim" in name for name in forward_names)
    assert any("optim" in name and name.endswith("(step)") for name in names)
    assert (PythonProfileModes.TRAIN, PythonProfileModes.TRAIN) in phase_stats
    assert {"initialization", "training_loop"} <= set(job_phase_stats)
    assert len(job_phase_stats["training_loop"].function_stats_list) >= len(names)
    table = step_stats.get_function_stats()
    assert len(table) == len(step_stats.function_stats_list)
    deeper = cProfileAnalysis(local_profile_dir=f"{profiler_output}/framework/pytorch/cprofile")
    assert len(deeper.list_profile_stats()) == len(profiles)
    # Given s3_path (any URL the storage reads), the profiles are copied to local_profile_dir.
    copied = cProfileAnalysis(local_profile_dir=str(notebook), s3_path=profiler_output)
    copies = copied.list_profile_stats()
    assert len(copies) == len(profiles)
    assert all(path.startswith(str(notebook / "python_stats")) for path in copies["stats_path"])
    copied_stats = copied.fetch_profile_stats_by_step(9, 10)
    assert {f.function_name for f in copied_stats.function_stats_list} == names


def test_pandas_frame_analysis_answers_as_smdebugs_does(job: Path, tmp_path: Path) -> None:
    from trainprobe.analysis.profiling_data.frame_analysis import (
        PandasFrameAnalysis,
        Resource,
        StatsBy,
    )
    from trainprobe.analysis.profiling_data.pandas_frame import PandasFrame

    frame = PandasFrame(job / "profiler-output")
    system, framework = frame.get_all_system_metrics(), frame.get_all_framework_metrics()
    # smdebug raises IndexError on an event outside every step: both get those that are in one.
    framework = framework[framework["step"] != -1].reset_index(drop=True)
    system_file, framework_file = tmp_path / "system.json", tmp_path / "framework.json"
    system.to_json(system_file, orient="split")
    framework.to_json(framework_file, orient="split")
    theirs = run_reference(
        "smdebug",
        f"""
        import json
        import pandas as pd
        from smdebug.profiler.analysis.utils.pandas_data_analysis import (
            PandasFrameAnalysis, Resource, StatsBy)
        system = pd.read_json({str(system_file)!r}, orient="split")
        framework = pd.read_json({str(framework_file)!r}, orient="split")
        analysis = PandasFrameAnalysis(system, framework)
        answers = {{"step_" + by.name: analysis.get_step_statistics(by=by) for by in StatsBy}}
        answers["utilization"] = analysis.get_utilization_stats()
        answers["utilization_by_phase"] = analysis.get_utilization_stats(
            Resource.CPU, by=StatsBy.TRAINING_PHASE)
        usage = analysis.get_device_usage_stats()
        usage.columns = [str(column) for column in usage.columns]
        answers["device_usage"] = usage
        answers["intervals"] = analysis.get_training_phase_intervals()
        statistics = analysis.get_job_statistics()
        job = {{k: v.item() if hasattr(v, "item") else v for k, v in
               statistics.__dict__.items()}}
        answers = {{k: v.to_json(orient="split") for k, v in answers.items()}}
        print(json.dumps({{"frames": answers, "job": job, "shown": repr(statistics)}}))
        """,
    )
    assert isinstance(theirs, dict)
    system = pd.read_json(system_file, orient="split")
    framework = pd.read_json(framework_file, orient="split")
    analysis = PandasFrameAnalysis(system, framework)
    ours = {"step_" + by.name: analysis.get_step_statistics(by=by) for by in StatsBy}
    ours["utilization"] = analysis.get_utilization_stats()
    ours["utilization_by_phase"] = analysis.get_utilization_stats(
        Resource.CPU, by=StatsBy.TRAINING_PHASE
    )
    usage = analysis.get_device_usage_stats()
    usage.columns = [str(column) for column in usage.columns]
    ours["device_usage"] = usage
    ours["intervals"] = analysis.get_training_phase_intervals()
    assert set(ours) == set(theirs["frames"])
    for name, answer in ours.items():
        expected = pd.read_json(io.StringIO(theirs["frames"][name]), orient="split")
        got = pd.read_json(io.StringIO(answer.to_json(orient="split")), orient="split")
        pd.testing.assert_frame_equal(got, expected, check_dtype=False, obj=name)
    job_stats = {
        name: value.item() if hasattr(value, "item") else value
        for name, value in vars(analysis.get_job_statistics()).items()
    }
    assert job_stats == theirs["job"]
    # Shown as smdebug shows it (a notebook's cell that ends with it).
    assert repr(analysis.get_job_statistics()) == theirs["shown"]
    assert len(ours["step_TRAINING_PHASE"]) == 2  # TRAIN and EVAL


def test_cprofile_analysis_lists_and_adds_up_as_smdebugs_does(job: Path) -> None:
    from trainprobe.analysis.profiling_data.profile_analysis import Metrics, cProfileAnalysis

    profiles = job / "profiler-output" / "framework" / "pytorch" / "cprofile"
    theirs = run_reference(
        "smdebug",
        f"""
        import json
        from smdebug.profiler.analysis.python_profile_analysis import cProfileAnalysis
        from smdebug.profiler.python_profile_utils import StepPhase
        analysis = cProfileAnalysis(local_profile_dir={str(profiles)!r})
        listed = analysis.list_profile_stats()
        listed = listed.sort_values("start_time_since_epoch_in_micros")
        rows = [[str(v) for v in row] for row in listed.drop(columns=["stats_path"]).values]
        stats = analysis.fetch_profile_stats_by_step(9, 10)
        forward = analysis.fetch_profile_stats_by_step(
            10, start_phase=StepPhase.STEP_START, end_phase=StepPhase.FORWARD_PASS_END)
        calls = lambda s: {{f.function_name: f.total_calls for f in s.function_stats_list}}
        phases = sorted(str(k) for k in analysis.fetch_profile_stats_by_training_phase())
        print(json.dumps({{"rows": rows, "columns": list(listed.columns), "steps": calls(stats),
                          "forward": calls(forward), "phases": phases}}))
        """,
    )
    assert isinstance(theirs, dict)
    analysis = cProfileAnalysis(local_profile_dir=str(profiles))
    listed = analysis.list_profile_stats().sort_values("start_time_since_epoch_in_micros")
    assert list(listed.columns) == theirs["columns"]
    rows = [[str(v) for v in row] for row in listed.drop(columns=["stats_path"]).values]
    assert rows == theirs["rows"]
    from trainprobe.analysis.profiling_data.profile_analysis import StepPhase

    stats = analysis.fetch_profile_stats_by_step(9, 10)
    forward = analysis.fetch_profile_stats_by_step(
        10, start_phase=StepPhase.STEP_START, end_phase=StepPhase.FORWARD_PASS_END
    )
    assert {f.function_name: f.total_calls for f in stats.function_stats_list} == theirs["steps"]
    assert {f.function_name: f.total_calls for f in forward.function_stats_list} == theirs[
        "forward"
    ]
    assert (
        sorted(str(k) for k in analysis.fetch_profile_stats_by_training_phase()) == theirs["phases"]
    )
    stats.print_top_n_functions(Metrics.TOTAL_TIME, n=3)


def test_a_saved_chart_opens_offline_and_draws_its_traces(job: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from trainprobe.analysis.profiling_data.metrics_readers import LocalSystemMetricsReader
    from trainprobe.report.notebook_charts import MetricsHistogram

    histogram = MetricsHistogram(LocalSystemMetricsReader(str(job / "profiler-output")))
    histogram.plot(select_dimensions=["CPU"], select_events=["total"])
    page = Path(histogram.save_html(tmp_path / "histogram.html"))
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True
        )
        try:
            context = browser.new_context(offline=True)
            tab = context.new_page()
            tab.on("pageerror", lambda error: errors.append(str(error)))
            tab.on(
                "request",
                lambda request: (
                    not request.url.startswith(("file:", "data:", "blob:"))
                    and requests.append(request.url)
                ),
            )
            tab.goto(page.resolve().as_uri(), wait_until="load", timeout=60_000)
            tab.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
            bars = tab.evaluate("document.querySelectorAll('.js-plotly-plot .trace.bars').length")
            titles = tab.inner_text("body")
        finally:
            browser.close()
    assert errors == [] and requests == []
    assert bars == len(histogram.figure.data) >= 2
    assert "CPUUtilization-nodeid:algo-1_total" in titles


def test_pyinstrument_analysis_gives_each_profile_as_smdebugs_does(tmp_path: Path) -> None:
    import torch

    from trainprobe.capture.pytorch.profiling import FrameworkProfiler
    from trainprobe.config.framework_profile import FrameworkProfile
    from trainprobe.config.metrics_config import PythonProfilingConfig
    from trainprobe.config.profiler_config import ProfilerConfig

    config = PythonProfilingConfig(start_step=1, num_steps=2, python_profiler="pyinstrument")
    plan = ProfilerConfig(
        framework_profile_params=FrameworkProfile(python_profiling_config=config)
    ).profiling_plan()
    profiler = FrameworkProfiler(plan, str(tmp_path), "0-algo-1", profile_after_close=False)
    model = torch.nn.Linear(4, 2)
    profiler.register_module(model)
    profiler.set_mode(ModeKeys.TRAIN)
    for _ in range(4):
        model(torch.randn(3, 4)).sum().backward()
    profiler.close()
    profiles = tmp_path / "framework" / "pytorch" / "pyinstrument"
    theirs = run_reference(
        "smdebug",
        f"""
        import json, os
        from smdebug.profiler.analysis.python_profile_analysis import PyinstrumentAnalysis
        analysis = PyinstrumentAnalysis(local_profile_dir={str(profiles)!r})
        found = analysis.fetch_profile_stats_by_step(1, 2)
        print(json.dumps(sorted(
            [os.path.relpath(s.html_file_path, {str(tmp_path)!r}), s.json_stats["duration"]]
            for s in found)))
        """,
    )
    smdebug_names.install(by="a test")
    try:
        from smdebug.profiler.analysis.python_profile_analysis import PyinstrumentAnalysis

        analysis = PyinstrumentAnalysis(local_profile_dir=str(tmp_path))
        found = analysis.fetch_profile_stats_by_step(1, 2)
    finally:
        smdebug_names.uninstall()
    ours = sorted(
        [os.path.relpath(s.html_file_path, tmp_path), s.json_stats["duration"]] for s in found
    )
    assert ours == theirs
    assert len(ours) == 3  # step 1, between steps 1 and 2, step 2's forward pass
    assert all(Path(tmp_path / html).read_text().lower().count("<html") for html, _ in ours)


def test_pandas_frame_reads_the_job_as_smdebugs_does(job: Path, tmp_path: Path) -> None:
    from trainprobe.analysis.profiling_data.pandas_frame import PandasFrame

    run_reference(
        "smdebug",
        f"""
        import json
        from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
        frame = PandasFrame({str(job / "profiler-output")!r})
        frame.get_all_system_metrics().to_json({str(tmp_path / "system.json")!r}, orient="split")
        frame.get_all_framework_metrics().to_json(
            {str(tmp_path / "framework.json")!r}, orient="split")
        print(json.dumps("done"))
        """,
    )
    theirs_system = _frame_of(tmp_path / "system.json")
    theirs_framework = _frame_of(tmp_path / "framework.json")
    frame = PandasFrame(job / "profiler-output")
    system, framework = frame.get_all_system_metrics(), frame.get_all_framework_metrics()
    assert list(system.columns) == list(theirs_system.columns)
    assert list(framework.columns) == list(theirs_framework.columns)
    readings = ["value", "system_metric", "dimension", "nodeID", "type"]
    pd.testing.assert_frame_equal(system[readings], theirs_system[readings], check_dtype=False)
    assert _same_times(system["timestamp"], theirs_system["timestamp"])
    # Both count microseconds from a start of their own (smdebug: the first file's minute).
    offsets = theirs_system["timestamp_us"] - system["timestamp_us"]
    assert offsets.max() - offsets.min() <= 1
    events = ["start_time", "framework_metric", "step", "bytes", "process", "nodeID"]
    ours_sorted = framework.sort_values(events).reset_index(drop=True)
    theirs_sorted = theirs_framework.sort_values(events).reset_index(drop=True)
    kept = events[1:]
    pd.testing.assert_frame_equal(ours_sorted[kept], theirs_sorted[kept], check_dtype=False)
    assert _same_times(ours_sorted["start_time"], theirs_sorted["start_time"])
    assert _same_times(ours_sorted["end_time"], theirs_sorted["end_time"])


def _frame_of(path: Path) -> pd.DataFrame:
    """A DataFrame written with ``to_json(orient="split")``, its values as written."""
    split = json.loads(path.read_text())
    return pd.DataFrame(split["data"], columns=split["columns"])


def _same_times(ours: pd.Series, theirs: pd.Series) -> bool:
    """Whether two columns of smdebug's time text agree to 2 microseconds (smdebug truncates
    a float's microseconds where trainprobe rounds them)."""
    parse = lambda column: pd.to_datetime(column, format="%Y-%m-%dT%H:%M:%S:%f")  # noqa: E731
    return bool(((parse(ours) - parse(theirs)).abs() <= pd.Timedelta(microseconds=2)).all())

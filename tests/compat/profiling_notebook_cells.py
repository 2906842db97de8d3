"""The code cells of AWS's interactive profiling analysis notebook (amazon-sagemaker-examples,
``sagemaker-debugger/debugger_interactive_analysis_profiling/interactive_analysis_profiling_data``),
from the training job's name on, as published, for ``test_profiling_notebooks.py`` to run in a
Jupyter kernel.

Left out: the cells that start the training on SageMaker (the estimator, the IAM role, the
session's region: the test's first cell names the job and the region instead) and the one that
pip-installs smdebug and bokeh; and the two ``time.sleep(30)`` of the step timeline's cell, which
give a running job's files time to arrive (the test's job has ended). The cells are
TensorFlow's where the notebook's training is (its data loader's events): on a PyTorch job those
find no event, as they would on SageMaker.
"""

INTERACTIVE_ANALYSIS_CELLS = [
    """from smdebug.profiler.analysis.notebook_utils.training_job import TrainingJob

tj = TrainingJob(training_job_name, region)

tj.wait_for_sys_profiling_data_to_be_available()
tj.wait_for_framework_profiling_data_to_be_available()""",
    """from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame

pf = PandasFrame(tj.profiler_s3_output_path)""",
    """system_metrics_df = pf.get_all_system_metrics()
framework_metrics_df = pf.get_all_framework_metrics(
    selected_framework_metrics=["Step:ModeKeys.TRAIN", "Step:ModeKeys.GLOBAL"]
)""",
    """import os
from IPython.display import IFrame, display, Markdown
from smdebug.profiler.python_profile_utils import StepPhase, PythonProfileModes
from smdebug.profiler.analysis.utils.python_profile_analysis_utils import Metrics
from smdebug.profiler.analysis.python_profile_analysis import PyinstrumentAnalysis, cProfileAnalysis
from smdebug.profiler.analysis.utils.pandas_data_analysis import (
    PandasFrameAnalysis,
    StatsBy,
    Resource,
)""",
    """pf_analysis = PandasFrameAnalysis(system_metrics_df, framework_metrics_df)""",
    """job_statistics = pf_analysis.get_job_statistics()

initialization_start = job_statistics["start_time"]
initialization_end = job_statistics["training_loop_start"]

training_start = job_statistics["training_loop_start"]
training_end = job_statistics["training_loop_end"]

finalization_start = job_statistics["training_loop_end"]
finalization_end = job_statistics["end_time"]""",
    """job_statistics""",
    """tj.profiler_config["ProfilingParameters"]""",
    """python_stats_dir = "python_stats"
os.makedirs(python_stats_dir, exist_ok=True)
python_profiling_config_tj = eval(
    tj.profiler_config["ProfilingParameters"].get("PythonProfilingConfig")
)""",
    """python_profiling_config_tj""",
    """use_pyinstrument = (
    False if python_profiling_config_tj.get("ProfilerName") == "cprofile" else True
)  # Set to True if you used Pyinstrument for Python profiling option.""",
    """def display_python_profile_stats(stats):
    if use_pyinstrument:
        if stats:
            for step_stats in stats:
                display(IFrame(src=step_stats.html_file_path, width=1000, height=500))
    else:
        if stats:
            stats.print_top_n_functions(Metrics.CUMULATIVE_TIME, n=10)""",
    """python_analysis_class = PyinstrumentAnalysis if use_pyinstrument else cProfileAnalysis
python_analysis = python_analysis_class(
    local_profile_dir=python_stats_dir, s3_path=tj.profiler_s3_output_path
)
step_stats_df = python_analysis.list_profile_stats()
step_stats_df.head()""",
    """stats = python_analysis.fetch_pre_step_zero_profile_stats()
display_python_profile_stats(stats)""",
    """from smdebug.profiler.analysis.notebook_utils.metrics_histogram import MetricsHistogram

system_metrics_reader = tj.get_systems_metrics_reader()
system_metrics_reader.refresh_event_file_list()

metrics_histogram = MetricsHistogram(system_metrics_reader)
metrics_histogram.plot(
    starttime=0,
    endtime=system_metrics_reader.get_timestamp_of_latest_available_file(),
    select_dimensions=["CPU", "GPU"],
    # select_events=["total"]
)""",
    """import time
from smdebug.profiler.analysis.notebook_utils.step_timeline_chart import StepTimelineChart

tj.wait_for_sys_profiling_data_to_be_available()
tj.wait_for_framework_profiling_data_to_be_available()

framework_metrics_reader = tj.get_framework_metrics_reader()
framework_metrics_reader.refresh_event_file_list()

view_step_timeline_chart = StepTimelineChart(framework_metrics_reader)""",
    """python_profiling_config_tj["StartStep"]""",
    """if python_profiling_config_tj == {}:
    step = 9
else:
    step = int(python_profiling_config_tj["StartStep"])
phase = StepPhase.STEP_START
mode = PythonProfileModes.TRAIN
python_step_stats = python_analysis.fetch_profile_stats_by_step(
    start_step=step, end_step=step + 1, start_phase=phase, end_phase=phase, mode=mode
)
display_python_profile_stats(python_step_stats)""",
    """if use_pyinstrument:
    print("Pyinstrument was used as the Python profiler, no training loop stats are available.")
else:
    python_job_stats = python_analysis.fetch_profile_stats_by_job_phase()
    training_loop_stats = python_job_stats["training_loop"]
    display_python_profile_stats(training_loop_stats)""",
    """from smdebug.profiler.analysis.notebook_utils.timeline_charts import TimelineCharts

system_metrics_reader = tj.get_systems_metrics_reader()
framework_metrics_reader.refresh_event_file_list()
system_metrics_reader.refresh_event_file_list()

view_timeline_charts = TimelineCharts(
    system_metrics_reader,
    framework_metrics_reader,
    select_dimensions=["CPU", "GPU"],
    select_events=["total"],
)""",
    """# Note change index range below with selected index range from above cell
view_timeline_charts.find_time_annotations([400, 440])""",
    """# Note change index range below with selected index range from above cell
view_timeline_charts.plot_detailed_profiler_data([400, 440])""",
    """from smdebug.profiler.analysis.notebook_utils.heatmap import Heatmap

system_metrics_reader.refresh_event_file_list()
view_heatmap = Heatmap(system_metrics_reader, plot_height=450)""",
    """from smdebug.profiler.analysis.utils.merge_timelines import MergedTimeline, MergeUnit

start_step, end_step = 1, 10
combined_timeline = MergedTimeline(tj.profiler_s3_output_path, output_directory="./")
combined_timeline.merge_timeline(start_step, end_step, unit=MergeUnit.STEP)""",
    """from smdebug.profiler.analysis.notebook_utils.training_job import TrainingJob

tj = TrainingJob(training_job_name, region)
tj.wait_for_sys_profiling_data_to_be_available()
system_metrics_reader = tj.get_systems_metrics_reader()

tj.wait_for_framework_profiling_data_to_be_available()
framework_metrics_reader = tj.get_framework_metrics_reader()
framework_metrics_reader.refresh_event_file_list()

from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame

pf = PandasFrame(tj.profiler_s3_output_path)
system_metrics_df = pf.get_all_system_metrics()

step_metrics_df = pf.get_all_framework_metrics(selected_framework_metrics=["Step:ModeKeys.TRAIN"])

step_metrics_df.head(10)""",
    """iterator_metrics = pf.get_all_framework_metrics(
    selected_framework_metrics=["tensorflow::data::GeneratorDatasetOp::Dataset::Iterator::GetNext"]
)
iterator_metrics.head(10)""",
    """for i in range(10):
    cur_step = step_metrics_df.iloc[i]
    step_pid = cur_step["pid"]
    step_tid = cur_step["tid"]
    cur_step_number = cur_step["step"]
    step_start_time = cur_step["start_time_us"]
    step_end_time = cur_step["end_time_us"]
    step_duration = step_end_time - step_start_time

    data_iter_cur_step = iterator_metrics.loc[
        (iterator_metrics["start_time_us"] >= step_start_time)
        & (iterator_metrics["end_time_us"] <= step_end_time)
    ]
    num_workers = data_iter_cur_step.shape[0]
    dl_time_mean = (
        data_iter_cur_step["end_time_us"].mean() - data_iter_cur_step["start_time_us"].mean()
    )
    print(
        f"Step number: {cur_step_number}, time taken by train step: {step_duration}, Number of dataloading workers: {num_workers}, Average dataloading time of all the workers: {dl_time_mean} microseconds"
    )""",  # noqa: E501
    """stats = python_analysis.fetch_post_hook_close_profile_stats()
display_python_profile_stats(stats)""",
]

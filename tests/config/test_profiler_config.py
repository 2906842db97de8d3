"""ProfilerConfig, FrameworkProfile and the profiling configs, against sagemaker.debugger 2.257.7.

The same Python expressions are built in the SDK (one reference subprocess for all of them) and in
trainprobe; their request dictionaries must be equal, and the SDK's dictionaries must read back
into equal objects.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference_envs import run_reference
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.framework_profile import FrameworkProfile, TraceFileSettings
from trainprobe.config.metrics_config import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    HorovodProfilingConfig,
    MetricsConfigBase,
    PythonProfiler,
    PythonProfilingConfig,
    SMDataParallelProfilingConfig,
    StepRange,
    StepWindow,
    TimeRange,
    TimeWindow,
    cProfileTimer,
)
from trainprobe.config.profiler_config import Profiler, ProfilerConfig, ProfilingPlan

NAMESPACE = {
    name: value
    for name, value in globals().items()
    if isinstance(value, type) and value.__module__.startswith("trainprobe.config")
}

T0 = 1700000000  # a Unix time


def _with_framework(expression: str) -> str:
    return f"ProfilerConfig(framework_profile_params={expression})"


_FRAMEWORK = [
    "FrameworkProfile()",
    "FrameworkProfile(start_step=5, num_steps=10)",
    "FrameworkProfile(start_step=3)",
    "FrameworkProfile(num_steps=4)",
    "FrameworkProfile(start_step=0, num_steps=1)",
    f"FrameworkProfile(start_unix_time={T0}, duration=600)",
    f"FrameworkProfile(start_unix_time={T0})",
    "FrameworkProfile(duration=2.5)",
    "FrameworkProfile(local_path='/data/prof', file_max_size=1024, file_close_interval=2.5, "
    "file_open_fail_threshold=3)",
    "FrameworkProfile(detailed_profiling_config=DetailedProfilingConfig())",
    "FrameworkProfile(detailed_profiling_config=DetailedProfilingConfig("
    "start_step=2, num_steps=3))",
    "FrameworkProfile(detailed_profiling_config=DetailedProfilingConfig("
    f"start_unix_time={T0}, duration=30))",
    "FrameworkProfile(detailed_profiling_config=DetailedProfilingConfig(profile_default_steps=True))",
    "FrameworkProfile(detailed_profiling_config=DetailedProfilingConfig("
    "start_step=3, profile_default_steps=True))",
    "FrameworkProfile(dataloader_profiling_config=DataloaderProfilingConfig())",
    "FrameworkProfile(dataloader_profiling_config=DataloaderProfilingConfig("
    "start_step=1, metrics_regex='DataLoaderIter.*'))",
    "FrameworkProfile(python_profiling_config=PythonProfilingConfig())",
    "FrameworkProfile(python_profiling_config=PythonProfilingConfig(profile_default_steps=True))",
    "FrameworkProfile(python_profiling_config=PythonProfilingConfig("
    "python_profiler=PythonProfiler.PYINSTRUMENT))",
    "FrameworkProfile(python_profiling_config=PythonProfilingConfig("
    "python_profiler=PythonProfiler.PYINSTRUMENT, cprofile_timer=cProfileTimer.CPU_TIME))",
    *(
        "FrameworkProfile(python_profiling_config=PythonProfilingConfig("
        f"start_step=4, num_steps=2, cprofile_timer=cProfileTimer.{timer}))"
        for timer in ("TOTAL_TIME", "CPU_TIME", "OFF_CPU_TIME", "DEFAULT")
    ),
    "FrameworkProfile(horovod_profiling_config=HorovodProfilingConfig())",
    "FrameworkProfile(smdataparallel_profiling_config=SMDataParallelProfilingConfig("
    "start_step=20, num_steps=2))",
    # Individual configs win over the range, which is then ignored.
    "FrameworkProfile(start_step=1, num_steps=10, "
    "detailed_profiling_config=DetailedProfilingConfig(start_step=10, num_steps=1), "
    "dataloader_profiling_config=DataloaderProfilingConfig(start_step=9, num_steps=2), "
    "python_profiling_config=PythonProfilingConfig(start_step=12, num_steps=1), "
    "horovod_profiling_config=HorovodProfilingConfig(), "
    "smdataparallel_profiling_config=SMDataParallelProfilingConfig())",
]

CASES: list[str] = [
    "ProfilerConfig()",
    *(
        f"ProfilerConfig(system_monitor_interval_millis={ms})"
        for ms in (100, 200, 500, 1000, 5000, 60000)
    ),
    "ProfilerConfig(s3_output_path='s3://bucket/prefix')",
    "ProfilerConfig(s3_output_path='s3://bucket/prefix', disable_profiler=True)",
    "ProfilerConfig(disable_profiler=True)",
    "ProfilerConfig(s3_output_path='s3://b/p', system_monitor_interval_millis=1000, "
    "framework_profile_params=FrameworkProfile(start_step=5, num_steps=10))",
    "ProfilerConfig(profile_params=Profiler())",
    "ProfilerConfig(profile_params=Profiler(cpu_profiling_duration='120', "
    "file_rotation_interval='60'))",
    *(_with_framework(expression) for expression in _FRAMEWORK),
]

# Expressions the SDK refuses (AssertionError or ValueError); trainprobe must refuse them too.
REFUSED: list[str] = [
    f"FrameworkProfile(start_step=1, num_steps=2, start_unix_time={T0}, duration=4)",
    "DetailedProfilingConfig(start_step=-1)",
    "DetailedProfilingConfig(num_steps=0)",
    "DetailedProfilingConfig(start_step=1, duration=3)",
    "DetailedProfilingConfig(duration=0)",
    "DetailedProfilingConfig(start_unix_time=10**20)",
    "DetailedProfilingConfig(profile_default_steps='yes')",
    f"DetailedProfilingConfig(start_unix_time={T0}, profile_default_steps=True)",
    "DataloaderProfilingConfig(metrics_regex='(')",
    "PythonProfilingConfig(python_profiler='nope')",
    "PythonProfilingConfig(cprofile_timer='wall')",
    "HorovodProfilingConfig(start_step='3')",
    "SMDataParallelProfilingConfig(num_steps=1.5)",
    "FrameworkProfile(file_max_size=0)",
    "FrameworkProfile(file_max_size='10')",
    "FrameworkProfile(local_path=5)",
    "FrameworkProfile(file_close_interval=-1)",
    "FrameworkProfile(file_open_fail_threshold=1.5)",
    "FrameworkProfile(num_steps=0)",
    "ProfilerConfig(framework_profile_params={})",
    "ProfilerConfig(profile_params={})",
    "ProfilerConfig(framework_profile_params=FrameworkProfile(), profile_params=Profiler())",
]

_REFERENCE = """
import json
import logging
logging.disable(logging.CRITICAL)
from sagemaker.debugger import (
    DataloaderProfilingConfig, DetailedProfilingConfig, FrameworkProfile, HorovodProfilingConfig,
    Profiler, ProfilerConfig, PythonProfiler, PythonProfilingConfig,
    SMDataParallelProfilingConfig, cProfileTimer,
)
from sagemaker.debugger.metrics_config import StepRange, TimeRange
T0 = 1700000000
built = {}
for expression in json.loads(CASES):
    built[expression] = eval(expression)._to_request_dict()
refused = {}
for expression in json.loads(REFUSED):
    try:
        eval(expression)
        refused[expression] = None
    except Exception as error:
        refused[expression] = type(error).__name__
STEPS = ((None, None), (None, 5), (3, None), (3, 4))
TIMES = ((None, None), (T0, None), (None, 2), (T0, 2))
ranges = {
    "steps": [StepRange(*args).to_json() for args in STEPS],
    "times": [TimeRange(*args).to_json() for args in TIMES],
}
print(json.dumps({"built": built, "refused": refused, "ranges": ranges}))
"""


@pytest.fixture(scope="module")
def sdk() -> dict[str, Any]:
    """What the SageMaker SDK builds for CASES and refuses of REFUSED, in one subprocess."""
    code = f"CASES = {json.dumps(json.dumps(CASES))}\nREFUSED = {json.dumps(json.dumps(REFUSED))}\n"
    result = run_reference("sagemaker", code + _REFERENCE)
    assert isinstance(result, dict)
    return result


def build(expression: str) -> Any:
    return eval(expression, dict(NAMESPACE, T0=T0))


@pytest.mark.parametrize("expression", CASES)
def test_request_dict_matches_the_sdk(sdk: dict[str, Any], expression: str) -> None:
    assert build(expression)._to_request_dict() == sdk["built"][expression]


@pytest.mark.parametrize("expression", CASES)
def test_the_sdk_request_reads_back(sdk: dict[str, Any], expression: str) -> None:
    request = sdk["built"][expression]
    parsed = ProfilerConfig.from_request_dict(request)
    assert parsed == build(expression)
    assert parsed._to_request_dict() == request
    assert ProfilerConfig.from_request_dict(parsed._to_request_dict()) == parsed


@pytest.mark.parametrize("expression", REFUSED)
def test_what_the_sdk_refuses_is_refused(sdk: dict[str, Any], expression: str) -> None:
    assert sdk["refused"][expression] in ("AssertionError", "ValueError")
    with pytest.raises(ConfigError) as caught:
        build(expression)
    assert isinstance(caught.value, ValueError)


def test_ranges_match_the_sdk(sdk: dict[str, Any]) -> None:
    steps = [StepRange(*args).to_json() for args in ((None, None), (None, 5), (3, None), (3, 4))]
    times = [TimeRange(*args).to_json() for args in ((None, None), (T0, None), (None, 2), (T0, 2))]
    assert steps == sdk["ranges"]["steps"]
    assert times == sdk["ranges"]["times"]


# Defaults the documentation states (spec 002, spec 004).


def test_default_framework_profile_profiles_steps_5_7_and_9_to_11() -> None:
    plan = ProfilerConfig(framework_profile_params=FrameworkProfile()).profiling_plan()
    assert plan.enabled
    assert plan.system_monitor_interval_millis == 500
    assert plan.detailed == StepWindow(5, 1)
    assert plan.dataloader == StepWindow(7, 1)
    assert plan.python == StepWindow(9, 3)
    assert plan.python_profiler is PythonProfiler.CPROFILE
    assert [plan.python_timer_at(step) for step in (9, 10, 11, 12)] == [
        cProfileTimer.TOTAL_TIME,
        cProfileTimer.CPU_TIME,
        cProfileTimer.OFF_CPU_TIME,
        cProfileTimer.TOTAL_TIME,
    ]
    assert plan.trace_files == TraceFileSettings("/opt/ml/output/profiler", 10485760, 60.0, 50)


def test_each_config_alone_has_its_documented_default_steps() -> None:
    assert DetailedProfilingConfig().window() == StepWindow(5, 1)
    assert DataloaderProfilingConfig().window() == StepWindow(7, 1)
    assert PythonProfilingConfig().window() == StepWindow(9, 3)
    assert PythonProfilingConfig().cprofile_timer is cProfileTimer.TOTAL_TIME
    assert PythonProfilingConfig(profile_default_steps=True).cprofile_timer is cProfileTimer.DEFAULT
    assert DataloaderProfilingConfig().metrics_regex == ".*"
    assert HorovodProfilingConfig().window() == StepWindow(13, 1)
    assert SMDataParallelProfilingConfig().window() == StepWindow(15, 1)


def test_a_profiler_config_without_framework_profile_only_monitors_the_system() -> None:
    plan = ProfilerConfig().profiling_plan()
    assert plan == ProfilingPlan(enabled=True, system_monitor_interval_millis=500)
    assert plan.detailed is plan.dataloader is plan.python is None
    assert plan.python_timer_at(9) is None


def test_a_disabled_profiler_profiles_nothing() -> None:
    config = ProfilerConfig(framework_profile_params=FrameworkProfile(), disable_profiler=True)
    plan = config.profiling_plan()
    assert not plan.enabled
    assert plan.detailed is plan.dataloader is plan.python is None


def test_a_range_on_framework_profile_applies_to_every_option() -> None:
    framework = FrameworkProfile(start_step=6, num_steps=2)
    plan = ProfilerConfig(framework_profile_params=framework).profiling_plan()
    assert plan.detailed == plan.dataloader == plan.python == StepWindow(6, 2)
    assert plan.python_timer_at(6) is cProfileTimer.TOTAL_TIME
    timed = FrameworkProfile(start_unix_time=T0, duration=600)
    plan = ProfilerConfig(framework_profile_params=timed).profiling_plan()
    assert plan.detailed == plan.python == TimeWindow(float(T0), 600.0)


def test_individual_configs_override_the_range_and_leave_the_others_off() -> None:
    framework = FrameworkProfile(
        start_step=1,
        num_steps=10,
        detailed_profiling_config=DetailedProfilingConfig(start_step=10, num_steps=1),
        python_profiling_config=PythonProfilingConfig(
            start_step=12, python_profiler=PythonProfiler.PYINSTRUMENT
        ),
    )
    plan = ProfilerConfig(framework_profile_params=framework).profiling_plan()
    assert plan.detailed == StepWindow(10, 1)
    assert plan.dataloader is None
    assert plan.python == StepWindow(12, 1)
    assert plan.python_profiler is PythonProfiler.PYINSTRUMENT
    assert plan.python_timer_at(12) is None


def test_the_plan_carries_trace_settings_and_the_dataloader_regex() -> None:
    framework = FrameworkProfile(
        local_path="/data/prof",
        file_max_size=2048,
        file_close_interval=5,
        dataloader_profiling_config=DataloaderProfilingConfig(metrics_regex="DataLoaderIter.*"),
    )
    plan = ProfilerConfig(
        system_monitor_interval_millis=100, framework_profile_params=framework
    ).profiling_plan()
    assert plan.system_monitor_interval_millis == 100
    assert plan.trace_files == TraceFileSettings("/data/prof", 2048, 5.0, 50)
    assert plan.dataloader_metrics_regex == "DataLoaderIter.*"


# Validation beyond the SDK, as ConfigErrors naming the field.


def _problems(caught: pytest.ExceptionInfo[BaseException]) -> dict[str, ConfigError]:
    assert isinstance(caught.value, ConfigError)
    return {error.field: error for error in caught.value.problems()}


@pytest.mark.parametrize("interval", [0, 250, 300, 1500, 120000, True, "500"])
def test_a_monitoring_interval_outside_the_allowed_set_is_refused(interval: object) -> None:
    with pytest.raises(ConfigErrors) as caught:
        ProfilerConfig(system_monitor_interval_millis=interval)  # type: ignore[arg-type]
    error = _problems(caught)["ProfilerConfig.system_monitor_interval_millis"]
    assert "100, 200, 500, 1000, 5000, 60000" in error.allowed
    assert isinstance(caught.value, ValueError)


def test_a_config_in_the_wrong_slot_is_refused() -> None:
    with pytest.raises(ConfigErrors) as caught:
        FrameworkProfile(detailed_profiling_config=PythonProfilingConfig())  # type: ignore[arg-type]
    assert "FrameworkProfile.detailed_profiling_config" in _problems(caught)


def test_step_and_time_together_are_refused_with_the_sdk_message() -> None:
    with pytest.raises(ConfigErrors) as caught:
        FrameworkProfile(start_step=1, num_steps=2, start_unix_time=T0, duration=4)
    error = _problems(caught)["FrameworkProfile"]
    assert "both step and time fields cannot be specified" in error.allowed.lower()


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigErrors) as caught:
        PythonProfilingConfig(start_step=-1, num_steps=0, python_profiler="x", cprofile_timer="y")
    assert set(_problems(caught)) == {
        "PythonProfilingConfig.start_step",
        "PythonProfilingConfig.num_steps",
        "PythonProfilingConfig.python_profiler",
        "PythonProfilingConfig.cprofile_timer",
    }


def test_profiler_and_timer_may_be_given_as_the_docs_spell_them() -> None:
    # Spec 002's example passes python_profiler="cProfile", cprofile_timer="total_time".
    spelled = PythonProfilingConfig(
        start_step=9, num_steps=1, python_profiler="cProfile", cprofile_timer="total_time"
    )
    assert spelled == PythonProfilingConfig(start_step=9, num_steps=1)
    assert PythonProfilingConfig(python_profiler="Pyinstrument").python_profiler is (
        PythonProfiler.PYINSTRUMENT
    )
    assert PythonProfilingConfig(cprofile_timer="off_cpu").cprofile_timer is (
        cProfileTimer.OFF_CPU_TIME
    )


# Reading requests: spec 001's examples, UpdateTrainingJob, and bad requests.

SPEC_001_TARGET_STEP = r"""{"ProfilerConfig": {
    "ProfilingIntervalInMilliseconds": 500,
    "ProfilingParameters": {
        "DetailedProfilingConfig": {
            \"StartStep\": \"7\", // The default is the first step (step 0)
            \"NumSteps\": \"1\", // The default value is 1
        },
        "PythonProfilingConfig": {
            \"StartStep\": \"9\", // The default is the first step (step 0)
            \"NumSteps\": \"3\", // The default value is 3
            \"cProfileTimer\": \"total_time\", // Available options: cpu, off_cpu, total_time
            \"ProfilerName\" : \"cProfile\", // Available options: cProfile, Pyinstrument
        },
        "DataLoaderProfilingConfig": {
            \"StartStep\": \"5\", // The default is the first step (step 0)
            \"NumSteps\": \"1\" // The default value is 1
        }
    }
}}"""

SPEC_001_TARGET_TIME = r"""{"ProfilerConfig": {
    "ProfilingIntervalInMilliseconds": 500,
    "ProfilingParameters": {
        "DetailedProfilingConfig": {
            \"StartTimeInSecSinceEpoch\": \"12345567789\", // The default is the current time
            \"DurationInSeconds\": \"1\", // The default is duration of 1 step
        },
        "PythonProfilingConfig": {
            \"StartTimeInSecSinceEpoch\": \"12345567789\", // The default is the current time
            \"DurationInSeconds\": \"1\", // The default is duration of 1 step
            \"cProfileTimer\": \"total_time\", // Available options: cpu, off_cpu, total_time
            \"ProfilerName\" : \"cProfile\", // Available options: cProfile, Pyinstrument
        },
        "DataLoaderProfilingConfig": {
            \"StartTimeInSecSinceEpoch\": \"12345567789\", // The default is the current time
            \"DurationInSeconds\": \"1\" // The default is duration of 1 step
        }
    }
}}"""


def _spec_config(text: str) -> ProfilerConfig:
    from trainprobe.config.profiling_parameters import parse_config_text

    request = parse_config_text(text)["ProfilerConfig"]
    assert isinstance(request, dict)
    return ProfilerConfig.from_request_dict(request)


def test_spec_001_target_step_example_reads() -> None:
    config = _spec_config(SPEC_001_TARGET_STEP)
    expected = ProfilerConfig(
        system_monitor_interval_millis=500,
        framework_profile_params=FrameworkProfile(
            detailed_profiling_config=DetailedProfilingConfig(start_step=7, num_steps=1),
            dataloader_profiling_config=DataloaderProfilingConfig(start_step=5, num_steps=1),
            python_profiling_config=PythonProfilingConfig(start_step=9, num_steps=3),
        ),
    )
    assert config.profiling_plan() == expected.profiling_plan()
    parameters = config._to_request_dict()["ProfilingParameters"]
    assert set(parameters) == {
        "DetailedProfilingConfig",
        "PythonProfilingConfig",
        "DataloaderProfilingConfig",
    }


def test_spec_001_target_time_example_reads_duration_in_seconds() -> None:
    plan = _spec_config(SPEC_001_TARGET_TIME).profiling_plan()
    assert plan.detailed == plan.dataloader == plan.python == TimeWindow(12345567789.0, 1.0)
    assert plan.python_timer_at(0) is cProfileTimer.TOTAL_TIME


def test_a_request_may_leave_the_start_step_to_the_running_job() -> None:
    request = {"ProfilingParameters": {"DetailedProfilingConfig": '{"NumSteps": 3}'}}
    config = ProfilerConfig.from_request_dict(request)
    window = config.profiling_plan().detailed
    assert window == StepWindow(None, 3)
    assert isinstance(window, StepWindow)
    assert window.covers(42, first_step=40) and not window.covers(43, first_step=40)
    # Valid JSON comes back as it was sent, not in the SDK's trailing-comma form.
    assert config._to_request_dict()["ProfilingParameters"] == {
        "DetailedProfilingConfig": '{"NumSteps": 3}'
    }


def test_an_empty_sub_config_profiles_nothing() -> None:
    request = {"ProfilingParameters": {"PythonProfilingConfig": "{}"}}
    plan = ProfilerConfig.from_request_dict(request).profiling_plan()
    assert plan.python is None and plan.python_profiler is None


def test_an_unknown_key_is_refused_with_the_closest_one_suggested() -> None:
    request = {
        "ProfilingIntervalInMillis": 500,
        "ProfilingParameters": {
            "DetailedProfilingConfg": '{"StartStep": 5}',
            "PythonProfilingConfig": '{"StartStep": 5, "NumStep": 2}',
        },
    }
    with pytest.raises(ConfigErrors) as caught:
        ProfilerConfig.from_request_dict(request)
    problems = _problems(caught)
    assert problems["ProfilingIntervalInMillis"].suggestion == "ProfilingIntervalInMilliseconds"
    key = "ProfilingParameters.DetailedProfilingConfg"
    assert problems[key].suggestion == "DetailedProfilingConfig"
    key = "ProfilingParameters.PythonProfilingConfig.NumStep"
    assert problems[key].suggestion == "NumSteps"


def test_bad_values_in_a_request_are_named_by_their_path() -> None:
    request = {
        "S3OutputPath": 5,
        "ProfilingIntervalInMilliseconds": 250,
        "DisableProfiler": "no",
        "ProfilingParameters": {
            "RotateMaxFileSizeInBytes": "ten",
            "DetailedProfilingConfig": '{"StartStep": 5 "NumSteps": 1}',
            "DataloaderProfilingConfig": '{"StartStep": "-1", "MetricsRegex": "("}',
            "PythonProfilingConfig": '{"StartStep": 1, "Duration": 5, "ProfilerName": "yappi"}',
        },
    }
    with pytest.raises(ConfigErrors) as caught:
        ProfilerConfig.from_request_dict(request)
    problems = _problems(caught)
    assert set(problems) == {
        "S3OutputPath",
        "ProfilingIntervalInMilliseconds",
        "DisableProfiler",
        "ProfilingParameters.RotateMaxFileSizeInBytes",
        "ProfilingParameters.DetailedProfilingConfig",
        "ProfilingParameters.DataloaderProfilingConfig.StartStep",
        "ProfilingParameters.DataloaderProfilingConfig.MetricsRegex",
        "ProfilingParameters.PythonProfilingConfig",
        "ProfilingParameters.PythonProfilingConfig.ProfilerName",
    }
    assert "at position 16" in problems["ProfilingParameters.DetailedProfilingConfig"].allowed


def test_sagemaker_profiler_settings_do_not_mix_with_framework_profiling() -> None:
    request = {"ProfilingParameters": {"CPUProfilingDuration": "60", "LocalPath": "/x"}}
    with pytest.raises(ConfigErrors) as caught:
        ProfilerConfig.from_request_dict(request)
    assert "ProfilingParameters.LocalPath" in _problems(caught)
    alone = {"ProfilingParameters": {"CPUProfilingDuration": "60"}}
    assert ProfilerConfig.from_request_dict(alone).profile_params == Profiler("60")


def test_update_request_reads_only_what_it_sets() -> None:
    update = ProfilerConfig.from_update_request_dict({"ProfilingIntervalInMilliseconds": 1000})
    assert update.disable_profiler is None
    assert update._to_update_request_dict() == {"ProfilingIntervalInMilliseconds": 1000}
    running = ProfilerConfig(
        s3_output_path="s3://b/p", framework_profile_params=FrameworkProfile(start_step=2)
    )
    updated = running.updated_by(update)
    assert updated.system_monitor_interval_millis == 1000
    assert updated.framework_profile_params == running.framework_profile_params
    assert updated.s3_output_path == "s3://b/p"
    assert updated.disable_profiler is False


def test_update_turning_framework_metrics_off_as_the_sdk_does() -> None:
    # Estimator.update_profiler(disable_framework_metrics=True) sends an empty ProfilingParameters.
    sent = {"DisableProfiler": False, "ProfilingParameters": {}}
    update = ProfilerConfig.from_update_request_dict(sent)
    assert update._to_update_request_dict() == sent
    running = ProfilerConfig(framework_profile_params=FrameworkProfile())
    plan = running.updated_by(update).profiling_plan()
    assert plan.enabled and plan.detailed is plan.dataloader is plan.python is None


def test_update_disabling_the_profiler() -> None:
    sent = ProfilerConfig._to_profiler_disabled_request_dict()
    assert sent == {"DisableProfiler": True}
    update = ProfilerConfig.from_update_request_dict(sent)
    running = ProfilerConfig(framework_profile_params=FrameworkProfile())
    assert not running.updated_by(update).profiling_plan().enabled


def test_update_cannot_move_the_output_path() -> None:
    running = ProfilerConfig(s3_output_path="s3://b/p")
    update = ProfilerConfig.from_update_request_dict({"S3OutputPath": "s3://elsewhere"})
    with pytest.raises(ConfigErrors) as caught:
        running.updated_by(update)
    assert "S3OutputPath" in _problems(caught)


def test_update_request_refuses_unknown_members() -> None:
    with pytest.raises(ConfigErrors) as caught:
        ProfilerConfig.from_update_request_dict({"DisableProfilers": True})
    assert _problems(caught)["DisableProfilers"].suggestion == "DisableProfiler"


def test_metrics_configs_compare_by_what_they_send() -> None:
    assert DetailedProfilingConfig(start_step=5) == DetailedProfilingConfig()
    assert DetailedProfilingConfig(start_step=6) != DetailedProfilingConfig()
    assert DetailedProfilingConfig() != HorovodProfilingConfig(start_step=5)
    parsed = DetailedProfilingConfig.from_request_value('{"StartStep": 5, "NumSteps": 1, }')
    assert parsed == DetailedProfilingConfig()
    assert isinstance(parsed, MetricsConfigBase)

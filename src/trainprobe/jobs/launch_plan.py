"""The launch plan: everything a job's runner needs to start its processes, decided at creation.

``plan_launch`` checks what only this machine can say about a valid request (the entry point
exists, input channels are local directories, several hosts need a Python script), so a bad
request is refused before anything starts; the request's content was checked by
``TrainingJobRequest``. ``write_config_files`` writes what the training, the
system monitor and the rules read:

- ``debughookconfig.json``: the request's DebugHookConfig with ``LocalPath`` set to the job's
  ``debug-output`` (a default one when the request gives debugging rules but no hook config; none
  when it gives neither, and then no hook runs), and ``TrainingRules``, the rules the hook
  judges inside the training (LossSpike, GradientNormSpike; ``trainprobe.config.training_rules``),
  when the job has any;
- ``profilerconfig.json``: the ProfilerConfig in force, with ``ProfilingParameters.LocalPath``
  set to the job's ``profiler-output`` (``{"DisableProfiler": true}`` when the request has none).
  UpdateTrainingJob replaces it, and the system monitor and the training watch it;
- ``tensorboardoutputconfig.json``: ``{"LocalPath": <job>/tensorboard-output}`` when asked for.

The training's environment points at them, as SageMaker's does, and carries the ``SM_*``
variables scripts written for SageMaker read (SM_MODEL_DIR, SM_CHANNEL_<NAME>, SM_HPS, ...),
then the request's Environment.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainprobe import settings
from trainprobe.config.errors import ConfigError
from trainprobe.config.profiler_config import SYSTEM_MONITOR_INTERVAL_DEFAULT
from trainprobe.config.training_job import TrainingJobRequest
from trainprobe.config.training_rules import TRAINING_RULES, training_rules
from trainprobe.jobs.entry_point import decode_hyperparameters, entry_point_from_request
from trainprobe.storage import files
from trainprobe.storage.job_layout import JobLayout, launch_file_of, local_directory, output_root

__all__ = [
    "AUTO_HOOK_VARIABLE",
    "JOB_NAME_VARIABLE",
    "RUNNER_PID_VARIABLE",
    "LaunchPlan",
    "output_roots",
    "plan_launch",
    "profiler_config_file_content",
    "write_config_files",
    "write_profiler_config",
]

AUTO_HOOK_VARIABLE = settings.AUTO_HOOK.name
"""Set to 1 for the training when a hook configuration exists: install the hook automatically."""

RUNNER_PID_VARIABLE = settings.RUNNER_PID.name
"""The job runner's process id: the job's processes stop when it is gone."""

JOB_NAME_VARIABLE = settings.TRAINING_JOB_NAME.name


@dataclass(frozen=True)
class LaunchPlan:
    """How to start one job's processes."""

    job_name: str
    layout: JobLayout
    command: list[str]
    working_dir: str
    environment: dict[str, str]
    """Variables set for the training, over the runner's own environment (each host adds its
    own: ``trainprobe.jobs.runner.hosts``)."""
    instance_count: int = 1
    """The job's hosts (``ResourceConfig.InstanceCount``)."""
    max_runtime_seconds: int | None = None
    debug_rules: list[dict[str, Any]] = field(default_factory=list)
    """The DebugRuleConfigurations entries (``trainprobe.jobs.runner.job_rules`` spreads them over
    evaluator processes)."""
    rules_working_dir: str = "."
    """Where relative custom rule sources are found (the directory the job was created from)."""
    monitor_interval_ms: int = SYSTEM_MONITOR_INTERVAL_DEFAULT
    python: str = sys.executable

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON data."""
        return {
            "job_name": self.job_name,
            "layout": self.layout.to_json(),
            "command": self.command,
            "working_dir": self.working_dir,
            "environment": self.environment,
            "instance_count": self.instance_count,
            "max_runtime_seconds": self.max_runtime_seconds,
            "debug_rules": self.debug_rules,
            "rules_working_dir": self.rules_working_dir,
            "monitor_interval_ms": self.monitor_interval_ms,
            "python": self.python,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LaunchPlan:
        """Read ``to_json``'s form back."""
        return cls(
            job_name=str(data["job_name"]),
            layout=JobLayout.from_json(data["layout"]),
            command=[str(word) for word in data["command"]],
            working_dir=str(data["working_dir"]),
            environment={str(k): str(v) for k, v in data["environment"].items()},
            instance_count=int(data["instance_count"]),
            max_runtime_seconds=data.get("max_runtime_seconds"),
            debug_rules=list(data.get("debug_rules", [])),
            rules_working_dir=str(data.get("rules_working_dir", ".")),
            monitor_interval_ms=int(data.get("monitor_interval_ms", 500)),
            python=str(data.get("python", sys.executable)),
        )

    def write(self) -> None:
        """Save the plan as the job's launch file."""
        _write_json(self.layout.launch_file, self.to_json())

    @classmethod
    def read(cls, job_dir: str) -> LaunchPlan:
        """The plan saved for the job whose directory is ``job_dir``."""
        return cls.from_json(json.loads(files.read_bytes(launch_file_of(job_dir))))


def _write_json(path: str, data: object) -> None:
    files.write_atomic(path, (json.dumps(data, indent=2) + "\n").encode())


def _channels(input_data: object, cwd: str) -> dict[str, str]:
    """SM_CHANNEL_<NAME> for each input channel whose data is a local directory."""
    if not isinstance(input_data, list):
        return {}
    variables = {}
    for index, channel in enumerate(input_data):
        where = f"InputDataConfig[{index}]"
        name = channel.get("ChannelName") if isinstance(channel, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}.ChannelName", name, "a channel name")
        source = channel.get("DataSource") or {}
        uri = (source.get("S3DataSource") or {}).get("S3Uri")
        path = local_directory(uri, f"{where}.DataSource.S3DataSource.S3Uri", cwd=cwd)
        variables[f"SM_CHANNEL_{name.upper()}"] = path
    if variables:
        names = [key.removeprefix("SM_CHANNEL_").lower() for key in variables]
        variables["SM_CHANNELS"] = json.dumps(names)
    return variables


def _has_hook(request: TrainingJobRequest) -> bool:
    return request.debug_hook_config is not None or bool(request.debug_rules)


def plan_launch(
    request: TrainingJobRequest, layout: JobLayout, *, cwd: str, unpack: bool = True
) -> LaunchPlan:
    """The launch plan of the job ``request`` (a validated request) describes; ConfigError for
    what cannot run here. With ``unpack`` False, nothing is written (a source archive is only
    looked into)."""
    other = request.other
    resources = other.get("ResourceConfig") or {}
    count = resources.get("InstanceCount") or 1
    stopping = other.get("StoppingCondition") or {}
    max_runtime = stopping.get("MaxRuntimeInSeconds")
    entry = entry_point_from_request(
        other.get("AlgorithmSpecification"),
        request.hyperparameters,
        cwd=cwd,
        unpack_to=layout.code_dir,
        unpack=unpack,
    )
    if count > 1 and not entry.python:
        raise ConfigError(
            "ResourceConfig.InstanceCount",
            count,
            "1 for an entry point that is not a Python script (several hosts are started "
            "with torchrun, which runs Python scripts)",
        )
    environment = {
        "PYTHONUNBUFFERED": "1",
        JOB_NAME_VARIABLE: request.training_job_name,
        "SM_MODEL_DIR": layout.model_dir,
        "SM_OUTPUT_DATA_DIR": layout.output_data_dir,
        "SM_HPS": json.dumps(
            {
                key: value
                for key, value in decode_hyperparameters(request.hyperparameters).items()
                if not key.startswith("sagemaker_")
            },
            sort_keys=True,
            separators=(",", ":"),
        ),
        settings.PROFILER_CONFIG.name: layout.profiler_config_file,
        settings.SMPROFILER_CONFIG_PATH.name: layout.profiler_config_file,
        **_channels(other.get("InputDataConfig"), cwd),
    }
    if _has_hook(request):
        environment[settings.HOOK_CONFIG.name] = layout.hook_config_file
        environment[settings.SMDEBUG_CONFIG_FILE_PATH.name] = layout.hook_config_file
        environment[AUTO_HOOK_VARIABLE] = "1"
    if request.tensorboard_output_config is not None:
        environment[settings.TENSORBOARD_CONFIG_FILE_PATH.name] = layout.tensorboard_config_file
    environment.update(request.environment)
    profiler = request.profiler_config
    interval = (
        profiler.system_monitor_interval_millis if profiler is not None else None
    ) or SYSTEM_MONITOR_INTERVAL_DEFAULT
    return LaunchPlan(
        job_name=request.training_job_name,
        layout=layout,
        command=entry.command(sys.executable),
        working_dir=entry.working_dir,
        environment=environment,
        instance_count=count,
        max_runtime_seconds=max_runtime,
        debug_rules=[rule.to_debugger_rule_config_dict() for rule in request.debug_rules],
        rules_working_dir=cwd,
        monitor_interval_ms=interval,
    )


def profiler_config_file_content(
    profiler_config: Mapping[str, Any] | None, layout: JobLayout
) -> dict[str, Any]:
    """The profiler config file for the ProfilerConfig request ``profiler_config`` (None: off)."""
    if profiler_config is None:
        return {"DisableProfiler": True}
    content = dict(profiler_config)
    parameters = content.get("ProfilingParameters")
    if isinstance(parameters, Mapping):
        content["ProfilingParameters"] = {**parameters, "LocalPath": layout.profiler_output}
    return content


def write_profiler_config(profiler_config: Mapping[str, Any] | None, layout: JobLayout) -> None:
    """Replace the job's profiler config file (atomically: its watchers never see half)."""
    _write_json(layout.profiler_config_file, profiler_config_file_content(profiler_config, layout))


def write_config_files(
    request: TrainingJobRequest, raw: Mapping[str, Any], layout: JobLayout
) -> None:
    """Write the job's hook, profiler and TensorBoard config files (see the module docstring);
    ``raw`` is the request as given."""
    if _has_hook(request):
        hook = dict(raw.get("DebugHookConfig") or {})
        hook["LocalPath"] = layout.debug_output
        in_training = training_rules(request.debug_rules)
        if in_training:
            hook[TRAINING_RULES] = in_training
        _write_json(layout.hook_config_file, hook)
    write_profiler_config(raw.get("ProfilerConfig"), layout)
    if request.tensorboard_output_config is not None:
        _write_json(layout.tensorboard_config_file, {"LocalPath": layout.tensorboard_output})


def output_roots(raw: Mapping[str, Any], cwd: str, default_root: str) -> dict[str, str | None]:
    """The output roots a request names (OutputDataConfig's, and those of the hook, profiler
    and TensorBoard configs), as local directories or ``s3://`` URLs; ConfigError for other
    URLs."""

    def root(section: str, key: str = "S3OutputPath") -> str | None:
        value = raw.get(section)
        if not isinstance(value, Mapping) or value.get(key) is None:
            return None
        return output_root(value[key], f"{section}.{key}", cwd=cwd)

    return {
        "output_root": root("OutputDataConfig") or os.path.abspath(default_root),
        "debug_root": root("DebugHookConfig"),
        "profiler_root": root("ProfilerConfig"),
        "tensorboard_root": root("TensorBoardOutputConfig"),
    }

"""``Estimator``: the SageMaker Python SDK's estimator for a local training job.

Code written for ``sagemaker.estimator.Estimator`` (or ``sagemaker.pytorch.PyTorch``) with
Debugger runs here with its Debugger arguments unchanged::

    from trainprobe.debugger import Rule, rule_configs
    from trainprobe.estimator import Estimator

    estimator = Estimator(
        entry_point="train.py",
        source_dir="examples/digits",
        hyperparameters={"epochs": 3},
        rules=[Rule.sagemaker(rule_configs.loss_not_decreasing())],
    )
    estimator.fit()
    estimator.latest_training_job.rule_job_summary()

The CreateTrainingJob request is built as the SDK builds it (SageMaker Python SDK 2.x), by
``trainprobe.config.sdk_request``, which ``trainprobe run`` builds its request with too: the
rules split into debugging and profiler rules, a DebuggerHookConfig (with ``output_path`` as its
S3OutputPath) whenever debugging is not turned off with ``debugger_hook_config=False``, the
rules' collections added to it, a ProfilerConfig unless ``disable_profiler`` is set, and, as in
the SDK since 2.x, no profiler rule you did not ask for. The script and its directory travel as
the ``sagemaker_program`` and ``sagemaker_submit_directory`` hyperparameters, every
hyperparameter JSON-encoded, as the SDK's framework estimators send them. ``output_path`` is a
local directory (default ``$TRAINPROBE_HOME/output/``, with the SDK's trailing slash). The job runs
on this machine (``trainprobe.jobs``).

Every argument the SDK's estimators accept is accepted: those that mean nothing on one machine
(``role``, ``image_uri``, ``volume_size``, ``subnets``, ...) are kept as attributes and logged
once (``trainprobe.sdk_arguments``); ``instance_count`` > 1 runs the script as that many hosts
(``algo-1`` ...), each a torchrun node with its own system monitor
(``trainprobe.jobs.runner.hosts``). ``fit(inputs)`` maps input channels (a path, or a dict of
channel name to path or to a ``TrainingInput``-like object with a ``config``) to
``SM_CHANNEL_<NAME>``. ``rule_executor`` (trainprobe's own: ``"dask://HOST:PORT"``) runs the rules
on a Dask cluster, as ``TRAINPROBE_RULE_EXECUTOR`` in ``environment`` does.
``estimator.sagemaker_session.sagemaker_client`` answers describe/list/stop/update for local jobs
(``trainprobe.local_session``). ``sagemaker.pytorch.PyTorch`` is ``trainprobe.estimator.PyTorch``
and ``sagemaker.xgboost.XGBoost`` is ``trainprobe.estimator.XGBoost``, both ``Estimator`` with
their framework's arguments.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from trainprobe import settings
from trainprobe.config.errors import ConfigError
from trainprobe.config.framework_profile import FrameworkProfile
from trainprobe.config.hook_config import DebuggerHookConfig, TensorBoardOutputConfig
from trainprobe.config.profiler_config import ProfilerConfig
from trainprobe.config.request_shapes import MAX_INSTANCE_COUNT
from trainprobe.config.rules import ProfilerRule, Rule
from trainprobe.config.sdk_request import (
    SdkScript,
    TrainingJobSettings,
    create_training_job_request,
    job_name_from_base,
    split_rules,
)
from trainprobe.config.statuses import (
    TrainingJobStatus,
)
from trainprobe.errors import JobError
from trainprobe.jobs import (
    JobStore,
    create_training_job,
    default_output_root,
    describe_training_job,
    stop_training_job,
    update_training_job,
)
from trainprobe.jobs.entry_point import XGBOOST_IMAGE
from trainprobe.jobs.operations.describe import is_final, layout_of, rule_evaluation_statuses
from trainprobe.jobs.operations.progress import LogTail
from trainprobe.local_session import LocalSession
from trainprobe.sdk_arguments import accept_sdk_arguments
from trainprobe.storage.job_layout import JobLayout

__all__ = ["Estimator", "PyTorch", "TrainingJob", "UnexpectedStatusException", "XGBoost"]

MAX_RUN_DEFAULT = 24 * 60 * 60
"""The SDK's default ``max_run``: one day."""

_XGBOOST_VERSION = re.compile(r"^\d+\.\d+(-\d+)?$")

_POLL_SECONDS = 0.5


class UnexpectedStatusException(JobError, ValueError):
    """A job ended in a status other than the one waited for (Failed), as the SDK raises."""

    def __init__(self, message: str, allowed_statuses: list[str], actual_status: str) -> None:
        super().__init__(message)
        self.allowed_statuses = allowed_statuses
        self.actual_status = actual_status


class TrainingJob:
    """A job an estimator started: ``estimator.latest_training_job``, as in the SDK."""

    def __init__(self, name: str, store: JobStore) -> None:
        self.name = name
        self.job_name = name
        self._store = store

    def describe(self) -> dict[str, Any]:
        """The job's DescribeTrainingJob response."""
        return describe_training_job({"TrainingJobName": self.name}, store=self._store)

    def rule_job_summary(self) -> list[dict[str, Any]]:
        """The debugging rules' evaluation statuses, then the profiler rules'."""
        return rule_evaluation_statuses(self.describe())

    def stop(self) -> None:
        """Stop the job (StopTrainingJob)."""
        stop_training_job({"TrainingJobName": self.name}, store=self._store)

    def wait(self, logs: bool = True, out: TextIO | None = None) -> dict[str, Any]:
        """Wait until the job and its rules have finished; with ``logs``, print the training's
        output as it comes. Returns the last description; a failed job raises
        UnexpectedStatusException, as in the SDK."""
        record = self._store.get(self.name)
        tail = LogTail(layout_of(record).training_log) if logs and record is not None else None
        out = out or sys.stdout
        while True:
            description = self.describe()
            if tail is not None:
                for line in tail.new_lines():
                    print(line, file=out, flush=True)
            if is_final(description):
                break
            time.sleep(_POLL_SECONDS)
        if description["TrainingJobStatus"] == TrainingJobStatus.FAILED:
            raise UnexpectedStatusException(
                f"Error for Training job {self.name}: Failed. Reason: "
                f"{description.get('FailureReason', '')}",
                allowed_statuses=[TrainingJobStatus.COMPLETED, TrainingJobStatus.STOPPED],
                actual_status=TrainingJobStatus.FAILED,
            )
        return description


class Estimator:
    """A training script run as a local job, configured as the SDK's estimator is."""

    def __init__(
        self,
        entry_point: str,
        source_dir: str | None = None,
        hyperparameters: Mapping[str, Any] | None = None,
        instance_count: int = 1,
        instance_type: str = "local",
        rules: Sequence[Rule | ProfilerRule] | None = None,
        debugger_hook_config: DebuggerHookConfig | bool | None = None,
        profiler_config: ProfilerConfig | None = None,
        disable_profiler: bool = False,
        tensorboard_output_config: TensorBoardOutputConfig | None = None,
        output_path: str | None = None,
        environment: Mapping[str, str] | None = None,
        max_run: int = MAX_RUN_DEFAULT,
        base_job_name: str | None = None,
        rule_executor: str | None = None,
        store: JobStore | None = None,
        **sdk_arguments: Any,
    ) -> None:
        """As the SDK's; ``store`` is the job store to use (default: the user's)."""
        for name, value in accept_sdk_arguments(type(self).__name__, sdk_arguments).items():
            setattr(self, name, value)
        if (
            not isinstance(instance_count, int)
            or isinstance(instance_count, bool)
            or not 1 <= instance_count <= MAX_INSTANCE_COUNT
        ):
            raise ConfigError(
                "instance_count",
                instance_count,
                f"a whole number from 1 to {MAX_INSTANCE_COUNT} (the hosts algo-1 ... on this "
                "machine)",
            )
        self.entry_point = entry_point
        self.source_dir = source_dir
        self._hyperparameters = dict(hyperparameters or {})
        self.instance_count = instance_count
        self.instance_type = instance_type
        self.rules = list(rules) if rules is not None else None
        self.debugger_hook_config = debugger_hook_config
        self.profiler_config = profiler_config
        self.disable_profiler = disable_profiler
        self.tensorboard_output_config = tensorboard_output_config
        self.output_path = output_path or os.path.join(default_output_root(), "")
        self.environment = dict(environment or {})
        if rule_executor is not None:
            self.environment[settings.RULE_EXECUTOR.name] = rule_executor
        self.max_run = max_run
        self.base_job_name = base_job_name
        self.store = store if store is not None else JobStore()
        self.sagemaker_session = LocalSession(self.store)
        self._inputs: list[dict[str, Any]] = []
        self.latest_training_job: TrainingJob | None = None
        self._current_job_name: str | None = None
        self.debugger_rules: list[Rule] = []
        self.profiler_rules: list[ProfilerRule] = []
        if (
            disable_profiler
            and profiler_config is not None
            and not profiler_config.disable_profiler
        ):
            raise ConfigError(
                "profiler_config.disable_profiler",
                False,
                "True when disable_profiler is True",
            )

    # ----- the request -----

    def hyperparameters(self) -> dict[str, str]:
        """The hyperparameters as sent: JSON-encoded, with the script and its directory."""
        return self._script().encoded_hyperparameters()

    def _script(self) -> SdkScript:
        """The script, relative to its directory (``source_dir`` when given, as in the SDK)."""
        if self.source_dir is not None:
            program, directory = self.entry_point, self.source_dir
        else:
            program = os.path.basename(self.entry_point)
            directory = os.path.dirname(os.path.abspath(self.entry_point))
        return SdkScript(program, os.path.abspath(directory), self._hyperparameters)

    def _hook_config(self) -> DebuggerHookConfig | None:
        if self.debugger_hook_config is False:
            if self.debugger_rules:
                raise ConfigError(
                    "debugger_hook_config", False, "a DebuggerHookConfig when rules are given"
                )
            return None
        hook = self.debugger_hook_config
        if not isinstance(hook, DebuggerHookConfig):
            hook = DebuggerHookConfig(s3_output_path=self.output_path)
        if not hook.s3_output_path:
            hook.s3_output_path = self.output_path
        self.debugger_hook_config = hook
        # The SDK always sends the collections, an empty list when neither the hook nor a rule
        # has one.
        sent = copy.copy(hook)
        sent.collection_configs = list(hook.collection_configs or [])
        return sent

    def _profiler_config(self) -> ProfilerConfig:
        if self.disable_profiler:
            if self.profiler_rules:
                raise ConfigError("rules", "ProfilerRule", "none when disable_profiler is True")
            return ProfilerConfig(disable_profiler=True)
        if self.profiler_config is None:
            self.profiler_config = ProfilerConfig(s3_output_path=self.output_path)
        if not self.profiler_config.s3_output_path:
            self.profiler_config.s3_output_path = self.output_path
        return self.profiler_config

    def _settings(self) -> TrainingJobSettings:
        """The job ``fit`` creates, as the SDK's objects say it."""
        self.debugger_rules, self.profiler_rules = split_rules(self.rules or [])
        return TrainingJobSettings(
            script=self._script(),
            rules=[*self.debugger_rules, *self.profiler_rules],
            debugger_hook_config=self._hook_config(),
            profiler_config=self._profiler_config(),
            tensorboard_output_config=self.tensorboard_output_config,
            output_path=self.output_path,
            instance_count=self.instance_count,
            instance_type=self.instance_type,
            max_run=self.max_run,
            environment=self.environment,
            input_channels=self._inputs,
        )

    def _request(self, job_name: str) -> dict[str, Any]:
        """The CreateTrainingJob request ``fit`` sends for a job named ``job_name``."""
        return create_training_job_request(job_name, self._settings())

    # ----- running -----

    def fit(
        self,
        inputs: str | Mapping[str, Any] | Any | None = None,
        wait: bool = True,
        logs: bool | str = True,
        job_name: str | None = None,
        experiment_config: Mapping[str, str] | None = None,
    ) -> None:
        """Start a training job and, with ``wait``, follow it to the end (``logs``: print the
        training's output; the SDK's "All" or "None" work too). ``inputs`` are the input
        channels (see the module documentation); ``experiment_config`` is accepted and
        ignored (there is no SageMaker Experiments). A failed job raises
        UnexpectedStatusException."""
        accept_sdk_arguments("fit", {"experiment_config": experiment_config})
        self._inputs = input_channels(inputs)
        base = self.base_job_name or os.path.splitext(os.path.basename(self.entry_point))[0]
        name = job_name or job_name_from_base(base)
        self._current_job_name = name
        create_training_job(self._request(name), store=self.store)
        self.latest_training_job = TrainingJob(name, self.store)
        if wait:
            self.latest_training_job.wait(logs=logs not in (False, "None", "none"))

    def _job(self) -> TrainingJob:
        if self.latest_training_job is None:
            raise ConfigError("latest_training_job", None, "a training job: call fit() first")
        return self.latest_training_job

    def rule_job_summary(self) -> list[dict[str, Any]]:
        """The latest job's rule evaluation statuses (debugging, then profiler)."""
        return self._job().rule_job_summary()

    def latest_job_debugger_artifacts_path(self) -> str | None:
        """Where the latest job's tensors are: ``<hook output>/<job>/debug-output``."""
        job = self._job()
        hook = self.debugger_hook_config
        if not isinstance(hook, DebuggerHookConfig) or not hook.s3_output_path:
            return None
        return JobLayout.for_job(job.name, hook.s3_output_path).debug_output

    def latest_job_tensorboard_artifacts_path(self) -> str | None:
        """Where the latest job's TensorBoard files are, when it has a TensorBoardOutputConfig."""
        job = self._job()
        config = self.tensorboard_output_config
        if config is None or not config.s3_output_path:
            return None
        return JobLayout.for_job(job.name, config.s3_output_path).tensorboard_output

    def latest_job_profiler_artifacts_path(self) -> str | None:
        """Where the latest job's profiler data is, unless profiling is off."""
        job = self._job()
        config = self.profiler_config
        if config is None or config.disable_profiler or not config.s3_output_path:
            return None
        return JobLayout.for_job(job.name, config.s3_output_path).profiler_output

    def enable_default_profiling(self) -> None:
        """Turn system monitoring on for the running job, with the default configuration."""
        job = self._job()
        description = job.describe()
        if description.get("ProfilingStatus") == "Enabled":
            raise ConfigError(
                "ProfilingStatus",
                "Enabled",
                "Disabled: profiling is already on; change it with update_profiler()",
            )
        where = (description.get("ProfilerConfig") or {}).get("S3OutputPath") or self.output_path
        self.profiler_config = ProfilerConfig(s3_output_path=where)
        self.profiler_rules = []
        self._update(self.profiler_config._to_request_dict(), None)

    def disable_profiling(self) -> None:
        """Turn profiling off for the running job."""
        job = self._job()
        if job.describe().get("ProfilingStatus") == "Disabled":
            raise ConfigError("ProfilingStatus", "Disabled", "Enabled: profiling is already off")
        self._update(ProfilerConfig._to_profiler_disabled_request_dict(), None)

    def update_profiler(
        self,
        rules: Sequence[ProfilerRule] | None = None,
        system_monitor_interval_millis: int | None = None,
        s3_output_path: str | None = None,
        framework_profile_params: FrameworkProfile | None = None,
        disable_framework_metrics: bool = False,
    ) -> None:
        """Change the running job's profiling: new profiler rules, a new monitoring interval,
        framework profiling on (``framework_profile_params``) or off."""
        self._job()
        if not (
            rules
            or system_monitor_interval_millis
            or s3_output_path
            or framework_profile_params
            or disable_framework_metrics
        ):
            raise ConfigError(
                "update_profiler", None, "a profiler config or profiler rules to update"
            )
        if disable_framework_metrics and framework_profile_params:
            raise ConfigError(
                "framework_profile_params",
                framework_profile_params,
                "None when disable_framework_metrics is True",
            )
        rule_configs = None
        if rules:
            for rule in rules:
                if not isinstance(rule, ProfilerRule):
                    raise ConfigError("rules", rule, "ProfilerRule objects")
            self.profiler_rules = list(rules)
            rule_configs = [rule.to_profiler_rule_config_dict() for rule in rules]
        if disable_framework_metrics:
            framework_profile_params = FrameworkProfile()
            framework_profile_params.profiling_parameters = {}
        self.profiler_config = ProfilerConfig(
            s3_output_path=s3_output_path,
            system_monitor_interval_millis=system_monitor_interval_millis,
            framework_profile_params=framework_profile_params,
        )
        self._update(self.profiler_config._to_request_dict(), rule_configs)

    def _update(
        self, profiler_config: dict[str, Any], rule_configs: list[dict[str, Any]] | None
    ) -> None:
        request: dict[str, Any] = {
            "TrainingJobName": self._job().name,
            "ProfilerConfig": profiler_config,
        }
        if rule_configs:
            request["ProfilerRuleConfigurations"] = rule_configs
        update_training_job(request, store=self.store)


def _channel(name: str, source: Any) -> dict[str, Any]:
    config = getattr(source, "config", None)
    if isinstance(config, Mapping):  # the SDK's TrainingInput
        return {**config, "ChannelName": name}
    if not isinstance(source, str | os.PathLike):
        raise ConfigError(f"inputs[{name!r}]", source, "a path or a TrainingInput")
    uri = os.fspath(source)
    return {
        "ChannelName": name,
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": uri,
                "S3DataDistributionType": "FullyReplicated",
            }
        },
    }


def input_channels(inputs: str | Mapping[str, Any] | Any | None) -> list[dict[str, Any]]:
    """InputDataConfig for ``fit``'s ``inputs``, as the SDK builds it: one path is the
    ``training`` channel; a dict names each channel."""
    if inputs is None:
        return []
    if isinstance(inputs, Mapping):
        return [_channel(str(name), source) for name, source in inputs.items()]
    return [_channel("training", inputs)]


class PyTorch(Estimator):
    """``sagemaker.pytorch.PyTorch``: an ``Estimator`` with the SDK's PyTorch arguments::

        estimator = PyTorch(
            entry_point="train.py", framework_version="2.1", py_version="py310",
            role=role, instance_count=1, instance_type="ml.g4dn.xlarge",
            rules=[Rule.sagemaker(rule_configs.vanishing_gradient())],
        )
        estimator.fit({"training": "data/"})

    ``framework_version``, ``py_version``, ``image_uri`` and ``distribution`` name an image and
    a cluster that do not exist here: the installed PyTorch runs the script, and
    ``instance_count`` hosts are started with torchrun. They are accepted and logged once
    (``trainprobe.sdk_arguments``).
    """

    def __init__(
        self,
        entry_point: str,
        framework_version: str | None = None,
        py_version: str | None = None,
        source_dir: str | None = None,
        hyperparameters: Mapping[str, Any] | None = None,
        image_uri: str | None = None,
        distribution: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """As the SDK's; see ``Estimator`` for the other arguments."""
        super().__init__(
            entry_point,
            source_dir=source_dir,
            hyperparameters=hyperparameters,
            framework_version=framework_version,
            py_version=py_version,
            image_uri=image_uri,
            distribution=distribution,
            **kwargs,
        )


class XGBoost(Estimator):
    """A training script using XGBoost, run as a local job (``sagemaker.xgboost.XGBoost``)::

        estimator = XGBoost(
            entry_point="train.py",
            framework_version="1.7-1",
            hyperparameters={"num_round": 50},
            rules=[Rule.sagemaker(rule_configs.create_xgboost_report())],
        )
        estimator.fit()

    It is ``Estimator`` (the script, its hyperparameters, the Debugger arguments) plus the
    framework: ``framework_version`` (required, as in the SDK) and ``py_version`` name the
    SageMaker XGBoost container the SDK would use, sent as ``AlgorithmSpecification.TrainingImage``
    (``sagemaker-xgboost:<version>``, or ``image_uri`` when given). The script runs on this
    machine's XGBoost, and the hook goes into its ``xgb.train``/``fit`` as the container puts it.
    """

    def __init__(
        self,
        entry_point: str,
        framework_version: str | None = None,
        source_dir: str | None = None,
        hyperparameters: dict[str, Any] | None = None,
        py_version: str = "py3",
        image_uri: str | None = None,
        image_uri_region: str | None = None,
        **kwargs: Any,
    ) -> None:
        """As the SDK's (``image_uri_region``, the region of the SDK's image URI, is kept and
        changes nothing); the other keyword arguments are ``Estimator``'s."""
        if framework_version is None:
            raise ConfigError(
                "framework_version", None, "the XGBoost container's version, e.g. '1.7-1'"
            )
        if not isinstance(framework_version, str) or not _XGBOOST_VERSION.match(framework_version):
            raise ConfigError(
                "framework_version", framework_version, "a version like '1.7-1' or '1.5-1'"
            )
        if py_version != "py3":
            raise ConfigError("py_version", py_version, "'py3' (the XGBoost containers' only one)")
        super().__init__(
            entry_point, source_dir=source_dir, hyperparameters=hyperparameters, **kwargs
        )
        self.framework_version = framework_version
        self.py_version = py_version
        self.image_uri = image_uri or f"{XGBOOST_IMAGE}:{framework_version}"
        self.image_uri_region = image_uri_region

    def training_image_uri(self) -> str:
        """The container the SDK would train in (here, the framework hint of the request)."""
        return self.image_uri

    def _settings(self) -> TrainingJobSettings:
        return dataclasses.replace(super()._settings(), training_image=self.training_image_uri())

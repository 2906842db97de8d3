"""Where a job's files go: SageMaker's output layout, on a local disk.

::

    <output>/<job>/debug-output/          the hook's tensors            (DebugHookConfig)
    <output>/<job>/profiler-output/       system and framework metrics  (ProfilerConfig)
    <output>/<job>/rule-output/<rule>/    each rule's evaluations and status
    <output>/<job>/tensorboard-output/    TensorBoard summaries         (TensorBoardOutputConfig)
    <output>/<job>/output/model/          SM_MODEL_DIR: what the script saves as its model
    <output>/<job>/output/data/           SM_OUTPUT_DATA_DIR
    <output>/<job>/config/                the files the launcher writes for the training, the
                                          system monitor and the rules
    <output>/<job>/logs/                  the training's output, the runner's, each rule's

``<output>`` is OutputDataConfig's S3OutputPath; the hook, profiler and TensorBoard configs may
each name their own root (their S3OutputPath), under which the job's directory is made the same
way. Roots are local directories or ``file://`` URLs.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from trainprobe.config.errors import ConfigError

__all__ = ["JobLayout", "launch_file_of", "local_directory"]

DEBUG_OUTPUT = "debug-output"
PROFILER_OUTPUT = "profiler-output"
RULE_OUTPUT = "rule-output"
TENSORBOARD_OUTPUT = "tensorboard-output"


def launch_file_of(job_dir: str) -> str:
    """The launch plan file of the job whose directory is ``job_dir``."""
    return os.path.join(job_dir, "config", "launch.json")


def local_directory(url: object, field: str, *, cwd: str | None = None) -> str:
    """The absolute local directory that ``url`` (a path or ``file://`` URL) names.

    Relative paths are taken from ``cwd`` (default: the current directory). Other URLs are a
    ConfigError: the job runner writes its outputs to a local disk.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(field, url, "a local directory or a file:// URL")
    text = url.strip()
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif "://" in text:
        raise ConfigError(
            field,
            url,
            "a local directory or a file:// URL: the local job runner writes its outputs to "
            "this machine's disk (object storage outputs are not supported yet)",
        )
    text = os.path.expanduser(text)
    return os.path.normpath(os.path.join(cwd or os.getcwd(), text))


@dataclass(frozen=True)
class JobLayout:
    """The directories and files of one job."""

    job_dir: str
    debug_output: str
    profiler_output: str
    tensorboard_output: str

    @classmethod
    def for_job(
        cls,
        name: str,
        output_root: str,
        *,
        debug_root: str | None = None,
        profiler_root: str | None = None,
        tensorboard_root: str | None = None,
    ) -> JobLayout:
        """The layout of job ``name`` under ``output_root`` (and the other roots, if given)."""
        job_dir = os.path.join(output_root, name)
        return cls(
            job_dir=job_dir,
            debug_output=os.path.join(debug_root or output_root, name, DEBUG_OUTPUT),
            profiler_output=os.path.join(profiler_root or output_root, name, PROFILER_OUTPUT),
            tensorboard_output=os.path.join(
                tensorboard_root or output_root, name, TENSORBOARD_OUTPUT
            ),
        )

    def to_json(self) -> dict[str, Any]:
        """The layout as JSON data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobLayout:
        """Read ``to_json``'s form back."""
        keys = ("job_dir", "debug_output", "profiler_output", "tensorboard_output")
        return cls(**{key: str(data[key]) for key in keys})

    # ----- directories --------------------------------------------------------------------

    @property
    def rule_output(self) -> str:
        """The parent of every rule's output directory."""
        return os.path.join(self.job_dir, RULE_OUTPUT)

    def rule_output_dir(self, rule_name: str) -> str:
        """Where the rule configured as ``rule_name`` writes."""
        return os.path.join(self.rule_output, rule_name)

    @property
    def config_dir(self) -> str:
        """The files the launcher writes for the job's processes."""
        return os.path.join(self.job_dir, "config")

    @property
    def logs_dir(self) -> str:
        """The job's logs."""
        return os.path.join(self.job_dir, "logs")

    @property
    def model_dir(self) -> str:
        """SM_MODEL_DIR: where the script saves its model."""
        return os.path.join(self.job_dir, "output", "model")

    @property
    def output_data_dir(self) -> str:
        """SM_OUTPUT_DATA_DIR: other files the script wants kept."""
        return os.path.join(self.job_dir, "output", "data")

    @property
    def code_dir(self) -> str:
        """Where a packed source directory (``sourcedir.tar.gz``) is unpacked."""
        return os.path.join(self.job_dir, "code")

    # ----- files --------------------------------------------------------------------------

    @property
    def hook_config_file(self) -> str:
        """The hook's DebugHookConfig JSON ($TRAINPROBE_HOOK_CONFIG)."""
        return os.path.join(self.config_dir, "debughookconfig.json")

    @property
    def profiler_config_file(self) -> str:
        """The ProfilerConfig JSON the monitor and the training watch for updates."""
        return os.path.join(self.config_dir, "profilerconfig.json")

    @property
    def tensorboard_config_file(self) -> str:
        """The TensorBoardOutputConfig JSON ($TENSORBOARD_CONFIG_FILE_PATH)."""
        return os.path.join(self.config_dir, "tensorboardoutputconfig.json")

    @property
    def launch_file(self) -> str:
        """The launch plan the job's runner follows."""
        return launch_file_of(self.job_dir)

    @property
    def training_log(self) -> str:
        """The training's standard output and error, interleaved as they came."""
        return os.path.join(self.logs_dir, "training.log")

    @property
    def runner_log(self) -> str:
        """What the job's runner did and when."""
        return os.path.join(self.logs_dir, "runner.log")

    @property
    def monitor_log(self) -> str:
        """The system monitor's messages."""
        return os.path.join(self.logs_dir, "system-monitor.log")

    @property
    def report_log(self) -> str:
        """The profiler report's messages (written when the job ends)."""
        return os.path.join(self.logs_dir, "report.log")

    def rule_log(self, rule_name: str) -> str:
        """The messages of the process evaluating rule ``rule_name``."""
        return os.path.join(self.logs_dir, "rules", f"{rule_name}.log")

    def rule_heartbeat(self, rule_name: str) -> str:
        """The heartbeat file of the process evaluating rule ``rule_name``
        (``trainprobe.jobs.rule_heartbeat``)."""
        return os.path.join(self.logs_dir, "rules", f"{rule_name}.heartbeat")

    def create(self) -> None:
        """Make every directory of the job."""
        for directory in (
            self.job_dir,
            self.debug_output,
            self.profiler_output,
            self.rule_output,
            self.config_dir,
            os.path.join(self.logs_dir, "rules"),
            self.model_dir,
            self.output_data_dir,
        ):
            os.makedirs(directory, exist_ok=True)

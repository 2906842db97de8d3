"""Where a job's files go: SageMaker's output layout, every folder and file named once.

::

    <output>/<job>/debug-output/               the hook's tensors (DebugHookConfig); inside it,
                                               smdebug's layout (``storage.locations``)
    <output>/<job>/profiler-output/            metrics (ProfilerConfig):
        system/incremental/...                   the system monitor's, per host and minute
        framework/...                            the framework profiler's traces and profiles
    <output>/<job>/rule-output/<rule>/         one rule's output (its RuleConfigurationName):
        evaluations.jsonl  actions.jsonl  status.json
        profiler-output/profiler-reports/<Rule>.json   a ProfilerReport's rules' report data
        profiler-output/profiler-report.html|json      the profiler report
    <output>/<job>/tensorboard-output/         TensorBoard summaries (TensorBoardOutputConfig)
    <output>/<job>/output/model/               SM_MODEL_DIR: what the script saves as its model
    <output>/<job>/output/data/                SM_OUTPUT_DATA_DIR
    <output>/<job>/code/                       a packed source directory, unpacked
    <output>/<job>/config/                     the files the launcher writes for the training,
                                               the system monitor and the rules (launch.json...)
    <output>/<job>/logs/                       the training's output, the runner's, each rule's

``<output>`` is OutputDataConfig's S3OutputPath; the hook, profiler and TensorBoard configs may
each name their own root (their S3OutputPath), under which the job's directory is made the same
way. A root is a local directory, a ``file://`` URL or an object storage URL
(``s3://bucket/prefix``). The job's own working files (``code/``, ``config/``, ``logs/``,
``output/``) always stay on this machine: with an object storage output root they go under a
local root instead (``JobLayout.for_job``'s ``local_root``), and only the outputs above (tensors,
metrics, rule output, the report) go to the bucket.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.storage.files import is_url
from trainprobe.storage.object_store import ObjectStoreUnreachable, check_reachable

__all__ = [
    "ACTIONS_FILE",
    "DEBUG_OUTPUT",
    "EVALUATIONS_FILE",
    "FRAMEWORK_METRICS_DIR",
    "PROFILER_OUTPUT",
    "PROFILER_REPORT_HTML",
    "PROFILER_REPORT_JSON",
    "PROFILER_REPORT_RULE",
    "RULE_OUTPUT",
    "RULE_REPORTS_DIR",
    "RULE_REPORT_DIR",
    "STATUS_FILE",
    "SYSTEM_METRICS_DIR",
    "TENSORBOARD_OUTPUT",
    "JobLayout",
    "check_output_root",
    "job_dir_of",
    "launch_file_of",
    "local_directory",
    "output_root",
    "profiler_output_of",
    "rule_output_dir",
    "rule_report_file",
]

DEBUG_OUTPUT = "debug-output"
PROFILER_OUTPUT = "profiler-output"
RULE_OUTPUT = "rule-output"
TENSORBOARD_OUTPUT = "tensorboard-output"

SYSTEM_METRICS_DIR = "system"
"""Under a profiler output: the system monitor's metrics."""
FRAMEWORK_METRICS_DIR = "framework"
"""Under a profiler output: the framework profiler's traces and Python profiles."""

EVALUATIONS_FILE = "evaluations.jsonl"
ACTIONS_FILE = "actions.jsonl"
STATUS_FILE = "status.json"

RULE_REPORT_DIR = PROFILER_OUTPUT
"""Under a ProfilerReport rule's output: where the profiler report and its rules' data go."""
RULE_REPORTS_DIR = f"{RULE_REPORT_DIR}/profiler-reports"
"""Under a rule's output: each profiler rule's report data, ``<Rule>.json``."""
PROFILER_REPORT_HTML = "profiler-report.html"
PROFILER_REPORT_JSON = "profiler-report.json"
PROFILER_REPORT_RULE = "ProfilerReport"
"""The rule that writes the profiler report, and the name of its output when none is given."""

_CONFIG_DIR = "config"
_LOGS_DIR = "logs"
_LAUNCH_FILE = "launch.json"


def rule_output_dir(output_dir: str, rule_name: str) -> str:
    """Where the rule called ``rule_name`` (its RuleConfigurationName) writes, under a job's
    output directory."""
    return f"{output_dir.rstrip('/')}/{RULE_OUTPUT}/{rule_name}"


def rule_report_file(rule_output: str, rule: str) -> str:
    """The report data profiler rule ``rule`` keeps under the rule output ``rule_output``."""
    return f"{rule_output.rstrip('/')}/{RULE_REPORTS_DIR}/{rule}.json"


def launch_file_of(job_dir: str) -> str:
    """The launch plan file of the job whose directory is ``job_dir``."""
    return os.path.join(job_dir, _CONFIG_DIR, _LAUNCH_FILE)


def job_dir_of(path: str) -> tuple[str, str | None] | None:
    """(job directory, rule output or None) for a path into a job's local output.

    ``path`` may be the job's directory (holding one of its outputs or its launch plan), its
    ``debug-output`` or ``profiler-output``, or one rule's output (``rule-output/<rule>``,
    returned as the second item). None when ``path`` is none of these. An object storage URL is
    read by its shape only: its job's output directory, and its rule output if it names one.
    """
    if is_url(path):
        path = path.rstrip("/")
        parent, base = path.rsplit("/", 1)
        if parent.rsplit("/", 1)[-1] == RULE_OUTPUT:
            return parent.rsplit("/", 1)[0], path
        if base in (DEBUG_OUTPUT, PROFILER_OUTPUT):
            return parent, None
        return None
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if os.path.basename(parent) == RULE_OUTPUT:
        return os.path.dirname(parent), path
    if os.path.basename(path) in (DEBUG_OUTPUT, PROFILER_OUTPUT):
        return parent, None
    outputs = (DEBUG_OUTPUT, PROFILER_OUTPUT, RULE_OUTPUT)
    if any(os.path.isdir(os.path.join(path, name)) for name in outputs):
        return path, None
    if os.path.isfile(launch_file_of(path)):
        return path, None
    return None


def profiler_output_of(out_dir: str) -> str:
    """The profiler output of the job whose output ``out_dir`` a rule watches: ``out_dir``
    itself for a profiler output, else its job's ``profiler-output`` (for a ``debug-output``)."""
    if os.path.basename(out_dir.rstrip("/\\")) == PROFILER_OUTPUT:
        return out_dir
    job = job_dir_of(out_dir)
    if job is None:
        return out_dir
    separator = "/" if is_url(job[0]) else os.sep
    return f"{job[0].rstrip(separator)}{separator}{PROFILER_OUTPUT}"


def local_directory(url: object, field: str, *, cwd: str | None = None) -> str:
    """The absolute local directory that ``url`` (a path or ``file://`` URL) names.

    Relative paths are taken from ``cwd`` (default: the current directory). Other URLs are a
    ConfigError: the job runner writes its outputs to a local disk. So is a path holding NUL,
    and one that is, or lies under, something other than a directory (a file, say).
    """
    if not isinstance(url, str) or not url.strip() or not _is_path_text(url):
        raise ConfigError(field, url, "a local directory or a file:// URL (without NUL)")
    text = url.strip()
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif "://" in text:
        raise ConfigError(
            field,
            url,
            "a local directory or a file:// URL: the local job runner reads it from this "
            "machine's disk",
        )
    text = os.path.expanduser(text)
    path = os.path.normpath(os.path.join(cwd or os.getcwd(), text))
    existing = _nearest_existing(path)
    if not os.path.isdir(existing):
        where = "is" if existing == path else f"lies under {existing}, which is"
        raise ConfigError(field, url, f"a directory: {path} {where} not a directory")
    return path


def _under(root: str, *names: str) -> str:
    """``names`` joined under ``root``, a local directory or an object storage URL."""
    if is_url(root):
        return "/".join((root.rstrip("/"), *names))
    return os.path.join(root, *names)


def _is_path_text(text: str) -> bool:
    """Whether ``text`` can be a path on this machine: no NUL, and encodable."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def _nearest_existing(path: str) -> str:
    """``path`` or the nearest of its parents that exists."""
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory + os.sep)


def _child_towards(parent: str, path: str) -> str:
    """The child of ``parent`` on the way down to ``path`` (which lies under it)."""
    while os.path.dirname(path) != parent:
        path = os.path.dirname(path)
    return path


def writable_directory(path: str, field: str, url: object) -> None:
    """ConfigError unless the directory ``path`` can be made (or written in) by this user."""
    existing = _nearest_existing(path)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(field, url, f"a directory this user can write in: {existing} is not")


def output_root(value: object, field: str, *, cwd: str | None = None) -> str:
    """The output root that ``value`` names: an ``s3://bucket/prefix`` URL (without a trailing
    ``/``), else the local directory ``local_directory`` reads; ConfigError for other URLs."""
    if isinstance(value, str) and is_url(value.strip()):
        url = value.strip().rstrip("/")
        if not url.startswith("s3://"):
            raise ConfigError(
                field, value, "a local directory, a file:// URL or an s3://bucket/prefix URL"
            )
        return url
    return local_directory(value, field, cwd=cwd)


def check_output_root(root: str, field: str) -> None:
    """ConfigError unless the output root ``root`` can be written: a local directory this user
    can make or write in, or object storage whose bucket answers (asked within seconds)."""
    if not is_url(root):
        writable_directory(root, field, root)
        return
    try:
        check_reachable(root)
    except ObjectStoreUnreachable as error:
        raise ConfigError(
            field, root, f"an object storage location that answers: {error}"
        ) from None


@dataclass(frozen=True)
class JobLayout:
    """The directories and files of one job.

    ``job_dir`` is the job's local working directory (its config, logs, code and model);
    ``output_dir`` is ``<output>/<job>``, where its rule outputs go. They are the same directory
    unless the output root is object storage.
    """

    job_dir: str
    debug_output: str
    profiler_output: str
    tensorboard_output: str
    output_dir: str = ""

    def __post_init__(self) -> None:
        if not self.output_dir:
            object.__setattr__(self, "output_dir", self.job_dir)

    @classmethod
    def for_job(
        cls,
        name: str,
        output_root: str,
        *,
        debug_root: str | None = None,
        profiler_root: str | None = None,
        tensorboard_root: str | None = None,
        local_root: str | None = None,
    ) -> JobLayout:
        """The layout of job ``name`` under ``output_root`` (and the other roots, if given).

        When ``output_root`` is object storage, the job's working files go under ``local_root``
        (a local directory; without one, the layout only serves to read the job's outputs)."""
        output_dir = _under(output_root, name)
        job_dir = output_dir
        if is_url(output_root) and local_root is not None:
            job_dir = os.path.join(local_root, name)
        return cls(
            job_dir=job_dir,
            debug_output=_under(debug_root or output_root, name, DEBUG_OUTPUT),
            profiler_output=_under(profiler_root or output_root, name, PROFILER_OUTPUT),
            tensorboard_output=_under(tensorboard_root or output_root, name, TENSORBOARD_OUTPUT),
            output_dir=output_dir,
        )

    def to_json(self) -> dict[str, Any]:
        """The layout as JSON data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobLayout:
        """Read ``to_json``'s form back."""
        keys = ("job_dir", "debug_output", "profiler_output", "tensorboard_output")
        return cls(
            **{key: str(data[key]) for key in keys}, output_dir=str(data.get("output_dir", ""))
        )

    def outputs(self) -> tuple[str, ...]:
        """The directories (or object storage prefixes) that hold the job's outputs."""
        return (self.debug_output, self.profiler_output, self.rule_output)

    # ----- directories --------------------------------------------------------------------

    @property
    def rule_output(self) -> str:
        """The parent of every rule's output directory."""
        return _under(self.output_dir, RULE_OUTPUT)

    def rule_output_dir(self, rule_name: str) -> str:
        """Where the rule configured as ``rule_name`` writes."""
        return rule_output_dir(self.output_dir, rule_name)

    @property
    def config_dir(self) -> str:
        """The files the launcher writes for the job's processes."""
        return os.path.join(self.job_dir, _CONFIG_DIR)

    @property
    def logs_dir(self) -> str:
        """The job's logs."""
        return os.path.join(self.job_dir, _LOGS_DIR)

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
        (``trainprobe.jobs.processes.rule_heartbeat``)."""
        return os.path.join(self.logs_dir, "rules", f"{rule_name}.heartbeat")

    def directories(self) -> tuple[str, ...]:
        """Every local directory the job has from its start (object storage has no
        directories to make: its outputs appear with their first object)."""
        local = (
            self.job_dir,
            self.debug_output,
            self.profiler_output,
            self.rule_output,
            self.config_dir,
            os.path.join(self.logs_dir, "rules"),
            self.model_dir,
            self.output_data_dir,
        )
        return tuple(directory for directory in local if not is_url(directory))

    def blocked(self) -> str | None:
        """A path that is in the way of one of the job's directories (a file where a
        directory must be), or None."""
        for directory in self.directories():
            existing = _nearest_existing(directory)
            if not os.path.isdir(existing):
                return existing
        return None

    def create(self) -> list[str]:
        """Make every directory of the job; the topmost of those that did not exist before, so
        that ``remove`` can take back exactly what this made. An output root this makes is left
        in place (another job may be writing under it): only the job's own directories are
        listed."""
        made: list[str] = []
        for directory in self.directories():
            top = _nearest_existing(directory)
            new = [] if top == directory else [self._owned(_child_towards(top, directory))]
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError:
                self.remove(made + new)
                raise
            made += [path for path in new if not any(_within(path, top) for top in made)]
        return made

    def _owned(self, path: str) -> str:
        """``path``, or the job's own directory under it when ``path`` is above one (a root)."""
        for own in (
            self.job_dir,
            os.path.dirname(self.debug_output),
            os.path.dirname(self.profiler_output),
            os.path.dirname(self.tensorboard_output),
        ):
            if own.startswith(path + os.sep):
                return own
        return path

    @staticmethod
    def remove(made: list[str]) -> None:
        """Take back the directories ``create`` made (and what was written in them)."""
        for directory in reversed(made):
            shutil.rmtree(directory, ignore_errors=True)

"""Every environment variable trainprobe reads, declared once: name, type, default and meaning.

A variable is read when it is used (``STRICT.get()``), never when a module is imported, so a
test or a parent process can set it at any time before. An empty or blank value counts as
unset. A value that cannot be understood is a ``ConfigError`` naming the variable, the value
and what is allowed; nothing falls back silently.

Yes/no variables share one reading: ``1``, ``true``, ``yes``, ``on`` mean yes and ``0``,
``false``, ``no``, ``off`` mean no, in any case.

``docs/environment.md`` is generated from this module: ``python -m trainprobe.settings``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from trainprobe.config.errors import ConfigError

__all__ = [
    "AUTO_HOOK",
    "CURRENT_HOST",
    "FLIGHT_RECORDER",
    "HANG_SECONDS",
    "HOME",
    "HOOK_CONFIG",
    "HYPERPARAMETERS",
    "KINETO_LOG_LEVEL",
    "KINETO_QUIET",
    "MODEL_DIR",
    "PROFILER_CONFIG",
    "RANK",
    "REPORT_EVERY_SECONDS",
    "RULE_CPUS",
    "RULE_EXECUTOR",
    "RULE_MEMORY_LIMIT_MB",
    "RULE_NICENESS",
    "RULE_PROGRESS_TIMEOUT_SECONDS",
    "RUNNER_PID",
    "SMDEBUG_CONFIG_FILE_PATH",
    "SMPROFILER_CONFIG_PATH",
    "SMS_GATEWAY_TOKEN",
    "SMS_GATEWAY_URL",
    "SMTP_FROM",
    "SMTP_HOST",
    "SMTP_PASSWORD",
    "SMTP_PORT",
    "SMTP_USER",
    "STOP_GRACE_SECONDS",
    "STRICT",
    "TENSORBOARD_CONFIG_FILE_PATH",
    "TERM",
    "TRAINING_JOB_NAME",
    "TRAIN_CHANNEL",
    "USE_SMDEBUG",
    "VALIDATION_CHANNEL",
    "VARIABLES",
    "WORLD_SIZE",
    "Variable",
    "child_environment",
    "markdown",
    "parse_flag",
    "set_unless_set",
]

T = TypeVar("T")

KINETO_QUIET = "6"
"""``KINETO_LOG_LEVEL`` above every level of kineto's messages (its ``USDT`` lines are 5)."""

_YES = frozenset({"1", "true", "yes", "on"})
_NO = frozenset({"0", "false", "no", "off"})
FLAG_VALUES = "1, true, yes or on for yes; 0, false, no or off for no"


def parse_flag(text: str) -> bool:
    """A yes/no value, in any case (see the module docstring); ValueError for anything else."""
    word = text.strip().lower()
    if word in _YES:
        return True
    if word in _NO:
        return False
    raise ValueError(FLAG_VALUES)


def _text(text: str) -> str:
    return text


def _count(text: str) -> int:
    if not text.isdigit():
        raise ValueError("a whole number, 0 or more")
    return int(text)


def _bounded_count(text: str, *, most: int) -> int:
    if not text.isdigit() or int(text) > most:
        raise ValueError(f"a whole number from 0 to {most}")
    return int(text)


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError("a port number (1-65535)")
    return int(text)


def _rule_executor(text: str) -> str:
    scheme, _, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    if text == "local" or (
        scheme == "dask" and colon and host and "/" not in address and port.isdigit()
    ):
        return text
    raise ValueError("local, or dask://HOST:PORT (a Dask distributed scheduler)")


def _seconds(text: str, *, least: float = 0.0) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not least <= seconds < float("inf"):  # also refuses NaN
        raise ValueError("a number of seconds, " + ("0 or more" if least == 0 else "more than 0"))
    return seconds


@dataclass(frozen=True)
class Variable(Generic[T]):
    """One environment variable: its name, what it means, and how its text is read."""

    name: str
    kind: str
    """What the value is, in the documentation's words (path, yes/no, seconds...)."""
    default: T
    meaning: str
    parse: Callable[[str], T]
    strip: bool = True
    """Whether surrounding spaces are dropped (not for secrets, which are taken as they are)."""

    def get(self, environ: Mapping[str, str] | None = None) -> T:
        """The value now in ``environ`` (default: this process's environment), else the default.

        ConfigError naming the variable when the value cannot be read.
        """
        text = (os.environ if environ is None else environ).get(self.name, "")
        if self.strip:
            text = text.strip()
        if not text.strip():
            return self.default
        try:
            return self.parse(text)
        except ValueError as error:
            raise ConfigError(f"${self.name}", text, str(error)) from None

    def shown_default(self) -> str:
        """The default as the documentation shows it."""
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return "yes" if self.default else "no"
        if isinstance(self.default, float):
            return f"`{self.default:g}`"
        return f"`{self.default}`"


def _path(name: str, meaning: str, default: str | None = None) -> Variable[str | None]:
    return Variable(name, "path", default, meaning, _text)


# ----- the job store and the job runner -----

HOME: Variable[str] = Variable(
    "TRAINPROBE_HOME",
    "path",
    "~/.trainprobe",
    "trainprobe's home: the job store (`jobs.sqlite`), the default output root (`output/`) and "
    "the scalars `trainprobe ui` has read of each job (`ui-scalars/`).",
    _text,
)
STOP_GRACE_SECONDS: Variable[float] = Variable(
    "TRAINPROBE_STOP_GRACE_SECONDS",
    "seconds",
    10.0,
    "How long a stopped training has to end after SIGTERM before it is killed.",
    _seconds,
)
REPORT_EVERY_SECONDS: Variable[float] = Variable(
    "TRAINPROBE_REPORT_EVERY_SECONDS",
    "seconds",
    600.0,
    "How often the profiler report is rewritten while a long job runs.",
    _seconds,
)
RULE_NICENESS: Variable[int] = Variable(
    "TRAINPROBE_RULE_NICENESS",
    "whole number",
    10,
    "Niceness added to each rule process (0-19), so that rules yield the CPU to the training.",
    lambda text: _bounded_count(text, most=19),
)
RULE_MEMORY_LIMIT_MB: Variable[int] = Variable(
    "TRAINPROBE_RULE_MEMORY_LIMIT_MB",
    "megabytes",
    2048,
    "Memory limit of each rule process (its data and anonymous memory); 0: no limit.",
    _count,
)
RULE_CPUS: Variable[int | None] = Variable(
    "TRAINPROBE_RULE_CPUS",
    "whole number",
    None,
    "How many cores the rule processes share (the highest-numbered ones); unset: a quarter of "
    "the machine's cores, at least one; 0: every core.",
    _count,
)
RULE_PROGRESS_TIMEOUT_SECONDS: Variable[float] = Variable(
    "TRAINPROBE_RULE_PROGRESS_TIMEOUT_SECONDS",
    "seconds",
    120.0,
    "A rule process that shows no progress for this long is ended and its rules end in Error.",
    lambda text: _seconds(text, least=1e-9),
)
RULE_EXECUTOR: Variable[str] = Variable(
    "TRAINPROBE_RULE_EXECUTOR",
    "URL",
    "local",
    "Where a job's rules run: `local` (processes of the job's runner) or `dask://HOST:PORT`, "
    "a long-running task each on that Dask distributed cluster; read from the job request's "
    "Environment, else from the environment of the process that creates the job.",
    _rule_executor,
)
TERM: Variable[str | None] = Variable(
    "TERM",
    "text",
    None,
    "The terminal's type; `dumb` turns `trainprobe run`'s live panel off.",
    _text,
)

# ----- set by the job runner for the training it starts -----

AUTO_HOOK: Variable[bool] = Variable(
    "TRAINPROBE_AUTO_HOOK",
    "yes/no",
    False,
    "Set by a job: install the hook into a PyTorch script that does not create one itself.",
    parse_flag,
)
RUNNER_PID: Variable[int | None] = Variable(
    "TRAINPROBE_RUNNER_PID",
    "process id",
    None,
    "Set by a job: the job runner's process; the training stops when it is gone.",
    _count,
)
TRAINING_JOB_NAME: Variable[str | None] = Variable(
    "TRAINPROBE_TRAINING_JOB_NAME",
    "text",
    None,
    "Set by a job: the name of the training job the script runs in.",
    _text,
)

# ----- the hook inside the training -----

USE_SMDEBUG: Variable[bool] = Variable(
    "USE_SMDEBUG",
    "yes/no",
    True,
    "As on SageMaker: no turns the hook off (no hook from the job's configuration, no "
    "automatic hook); a hook the script constructs itself still runs.",
    parse_flag,
)
FLIGHT_RECORDER: Variable[bool] = Variable(
    "TRAINPROBE_FLIGHT_RECORDER",
    "yes/no",
    True,
    "The flight recorder, armed wherever framework profiling runs: a step much slower than the "
    "median of its mode gets its next steps profiled with torch.profiler. No turns it off "
    "(requests from trainprobe profile and rules are then ignored too).",
    parse_flag,
)
HANG_SECONDS: Variable[float] = Variable(
    "TRAINPROBE_HANG_SECONDS",
    "seconds",
    600.0,
    "With the flight recorder armed, a step running longer than this has its training process "
    "write the Python stacks of all its threads (StalledTrainingRule also asks for them); 0: "
    "only when a rule asks.",
    _seconds,
)
KINETO_LOG_LEVEL: Variable[str | None] = Variable(
    "KINETO_LOG_LEVEL",
    "number",
    None,
    "Read by PyTorch's profiler library (kineto), not by trainprobe: it writes its messages of "
    "this level and above into the training's standard error. Unless it is set, trainprobe sets "
    f"it to `{KINETO_QUIET}` (none of them) before its first profile, so that a profile adds "
    "nothing to the training's output.",
    _text,
)
STRICT: Variable[bool] = Variable(
    "TRAINPROBE_STRICT",
    "yes/no",
    False,
    "Stop the training when saving tensors fails, instead of turning the hook off.",
    parse_flag,
)
HOOK_CONFIG = _path(
    "TRAINPROBE_HOOK_CONFIG", "The hook's DebugHookConfig JSON file (set by a job)."
)
SMDEBUG_CONFIG_FILE_PATH = _path(
    "SMDEBUG_CONFIG_FILE_PATH",
    "smdebug's name for the DebugHookConfig file, read when `TRAINPROBE_HOOK_CONFIG` is unset.",
)
TENSORBOARD_CONFIG_FILE_PATH = _path(
    "TENSORBOARD_CONFIG_FILE_PATH",
    'SageMaker\'s TensorBoard output file (`{"LocalPath": ...}`); when present, the hook '
    "exports TensorBoard events.",
    "/opt/ml/input/config/tensorboardoutputconfig.json",
)
PROFILER_CONFIG = _path(
    "TRAINPROBE_PROFILER_CONFIG",
    "The job's ProfilerConfig JSON file; the hook profiles the framework as it says "
    "(set by a job).",
)
SMPROFILER_CONFIG_PATH = _path(
    "SMPROFILER_CONFIG_PATH",
    "smdebug's name for the ProfilerConfig file, read when `TRAINPROBE_PROFILER_CONFIG` is unset.",
)
CURRENT_HOST: Variable[str | None] = Variable(
    "SM_CURRENT_HOST",
    "text",
    None,
    "Set by a job, as SageMaker sets it: this host's name (`algo-1`), used in the timeline's "
    "node ids; unset: the machine's host name.",
    _text,
)
HYPERPARAMETERS: Variable[str | None] = Variable(
    "SM_HPS",
    "JSON",
    None,
    "Set by a job, as SageMaker sets it: the job's hyperparameters, which the XGBoost hook "
    "records and the built-in XGBoost algorithm trains with.",
    _text,
)
MODEL_DIR: Variable[str] = Variable(
    "SM_MODEL_DIR",
    "path",
    ".",
    "Set by a job, as SageMaker sets it: where the built-in XGBoost algorithm saves its model.",
    _text,
)
TRAIN_CHANNEL: Variable[str | None] = Variable(
    "SM_CHANNEL_TRAIN",
    "path",
    None,
    "Set by a job with a `train` channel: the data the built-in XGBoost algorithm trains on.",
    _text,
)
VALIDATION_CHANNEL: Variable[str | None] = Variable(
    "SM_CHANNEL_VALIDATION",
    "path",
    None,
    "Set by a job with a `validation` channel: the built-in XGBoost algorithm's evaluation data.",
    _text,
)
RANK: Variable[int | None] = Variable(
    "RANK",
    "whole number",
    None,
    "This worker's rank, as `torchrun` sets it, when `torch.distributed` is not initialised.",
    _count,
)
WORLD_SIZE: Variable[int | None] = Variable(
    "WORLD_SIZE",
    "whole number",
    None,
    "The number of workers, as `torchrun` sets it.",
    _count,
)

# ----- rule actions -----

SMTP_HOST: Variable[str | None] = Variable(
    "TRAINPROBE_SMTP_HOST",
    "host name",
    None,
    "The SMTP server the Email action sends through (required for email).",
    _text,
)
SMTP_PORT: Variable[int] = Variable(
    "TRAINPROBE_SMTP_PORT",
    "port",
    25,
    "The SMTP server's port; 465 means SMTP over TLS from the start.",
    _port,
)
SMTP_USER: Variable[str | None] = Variable(
    "TRAINPROBE_SMTP_USER",
    "text",
    None,
    "The SMTP login; when set, the Email action logs in.",
    _text,
    strip=False,
)
SMTP_PASSWORD: Variable[str | None] = Variable(
    "TRAINPROBE_SMTP_PASSWORD",
    "text",
    None,
    "The SMTP password, with `TRAINPROBE_SMTP_USER`.",
    _text,
    strip=False,
)
SMTP_FROM: Variable[str | None] = Variable(
    "TRAINPROBE_SMTP_FROM",
    "email address",
    None,
    "The sender of the Email action's messages (default `trainprobe@<this host's name>`).",
    _text,
)
SMS_GATEWAY_URL: Variable[str | None] = Variable(
    "TRAINPROBE_SMS_GATEWAY_URL",
    "URL",
    None,
    'The HTTP endpoint the SMS action posts `{"to": ..., "message": ...}` to (required for SMS).',
    _text,
)
SMS_GATEWAY_TOKEN: Variable[str | None] = Variable(
    "TRAINPROBE_SMS_GATEWAY_TOKEN",
    "text",
    None,
    "Sent to the SMS gateway as `Authorization: Bearer <token>` when set.",
    _text,
)

VARIABLES: tuple[Variable[object], ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Variable)
)
"""Every variable above, in the order they are declared."""


def set_unless_set(variable: Variable[Any], value: str) -> None:
    """Give ``variable`` the value ``value`` in this process's environment, unless it has one:
    for a library trainprobe runs that reads it (``KINETO_LOG_LEVEL``)."""
    if not os.environ.get(variable.name, "").strip():
        os.environ[variable.name] = value


def child_environment(*additions: Mapping[str, str]) -> dict[str, str]:
    """The environment a child started now with ``additions`` sees: this process's, with each
    addition laid over it in turn. Settings meant for a child are read from this."""
    environment = dict(os.environ)
    for addition in additions:
        environment.update(addition)
    return environment


def markdown() -> str:
    """``docs/environment.md``: every variable, as a table."""
    lines = [
        "# Environment variables",
        "",
        "<!-- Generated by `python -m trainprobe.settings` from src/trainprobe/settings.py;"
        " edit that, not this file. -->",
        "",
        "trainprobe reads these variables when it uses them; a blank value counts as unset, and",
        "a value it cannot read is an error naming the variable. Yes/no variables take "
        + FLAG_VALUES
        + ", in any case.",
        "",
        "| variable | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for variable in VARIABLES:
        meaning = variable.meaning.replace("|", "\\|")
        lines.append(
            f"| `{variable.name}` | {variable.kind} | {variable.shown_default()} | {meaning} |"
        )
    lines += [
        "",
        "A job also gives its training SageMaker's variables (`SM_MODEL_DIR`,",
        "`SM_OUTPUT_DATA_DIR`, `SM_CHANNEL_<NAME>`, `SM_CHANNELS`, `SM_HPS`, `SM_HOSTS`) for",
        "scripts written for SageMaker; trainprobe itself reads only those listed above.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")

"""The flight recorder's captures on disk, and the request that asks the training for one.

Under a profiler output directory, each capture has a folder named by its trigger and the step
it fired at::

    framework/pytorch/flight_recorder/<trigger>-step<step:09>/
        <node>.capture.json                                  what was captured, and why
        <node>.<trigger>-steps<first>-<last>.pt.trace.json   torch.profiler, the captured steps
        <node>.comparison-step<step>.pt.trace.json           one ordinary step, for comparison

``<trigger>`` is ``slow_step`` (a step much slower than its mode's median), ``request`` (the
user: ``trainprobe profile``, UpdateTrainingJob) or ``rule`` (a rule's ProfileNextSteps action).
The traces are Chrome trace JSON as torch.profiler exports it: Perfetto (ui.perfetto.dev) and
chrome://tracing open them as they are. ``<node>.capture.json`` is written last, atomically, so a
reader that finds it finds the traces it names (or the reason one was dropped).

A request is ``profile_request.json`` in the profiler output: who asks, for how many steps, and
when. Each new request replaces the file; the training captures once per new request.
"""

from __future__ import annotations

import json
import posixpath
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from trainprobe.config.actions import MAX_PROFILED_STEPS
from trainprobe.config.errors import ConfigError
from trainprobe.storage import files
from trainprobe.storage.job_layout import FRAMEWORK_METRICS_DIR
from trainprobe.storage.locations import join
from trainprobe.storage.modes import ModeKeys, step_in_words

__all__ = [
    "CAPTURES_DIR",
    "MANIFEST_SUFFIX",
    "PROFILE_REQUEST_FILE",
    "TRIGGERS",
    "Capture",
    "CapturedStep",
    "ProfileRequest",
    "capture_dir",
    "check_capture_steps",
    "comparison_trace_name",
    "list_captures",
    "load_profile_request",
    "steps_trace_name",
    "write_capture",
    "write_profile_request",
]

CAPTURES_DIR = f"{FRAMEWORK_METRICS_DIR}/pytorch/flight_recorder"
MANIFEST_SUFFIX = ".capture.json"
PROFILE_REQUEST_FILE = "profile_request.json"
TRIGGERS = ("slow_step", "request", "rule")


def check_capture_steps(steps: object, field_name: str = "steps") -> int:
    """``steps`` as a number of steps to capture; ConfigError naming ``field_name`` if not."""
    if (
        isinstance(steps, bool)
        or not isinstance(steps, int)
        or not 1 <= steps <= MAX_PROFILED_STEPS
    ):
        raise ConfigError(
            field_name, steps, f"a whole number of steps from 1 to {MAX_PROFILED_STEPS}"
        )
    return steps


def capture_dir(trigger: str, step: int) -> str:
    """The folder of the capture ``trigger`` started at global step ``step``, relative."""
    return f"{CAPTURES_DIR}/{trigger}-step{step:09d}"


def steps_trace_name(node_id: str, trigger: str, first: int, last: int) -> str:
    """The file name of a capture's trace of steps ``first`` to ``last``."""
    return f"{node_id}.{trigger}-steps{first}-{last}.pt.trace.json"


def comparison_trace_name(node_id: str, step: int) -> str:
    """The file name of a capture's trace of its ordinary comparison step."""
    return f"{node_id}.comparison-step{step}.pt.trace.json"


@dataclass
class CapturedStep:
    """One step of a capture, or the slow step that triggered it: global step, mode (its name in
    lower case), when, and its step within the mode (None where not recorded)."""

    step: int
    mode: str
    start_us: float
    end_us: float
    mode_step: int | None = None

    @property
    def duration_s(self) -> float:
        """How long the step took, start to the next step's start."""
        return (self.end_us - self.start_us) / 1e6

    def words(self) -> str:
        """The step as the training counts it: ``TRAIN step 40 (step 59)``."""
        return step_in_words(self.step, ModeKeys.__members__.get(self.mode.upper()), self.mode_step)


@dataclass
class Capture:
    """One capture of one training process, as ``<node>.capture.json`` records it.

    ``folder`` is the capture's folder (relative to the profiler output); ``trace`` and
    ``comparison_trace`` are file names inside it, None when not written (``dropped`` says why).
    ``slow_step`` is the step that triggered a slow-step capture, with its mode's median and the
    threshold it crossed; ``ordinary`` the last step of its mode before it that was not slow, which
    no profiler ran in: the slow step is explained against it (``comparison`` is profiled, as the
    captured steps are, for their operators).
    """

    trigger: str
    reason: str
    trigger_step: int
    node: str
    folder: str
    steps: list[CapturedStep] = field(default_factory=list)
    trace: str | None = None
    comparison: CapturedStep | None = None
    comparison_trace: str | None = None
    slow_step: CapturedStep | None = None
    ordinary: CapturedStep | None = None
    median_s: float | None = None
    threshold_s: float | None = None
    dropped: list[str] = field(default_factory=list)
    written_at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        """The capture as its manifest file holds it."""
        data = asdict(self)
        for key in ("steps", "comparison", "slow_step", "ordinary"):
            value = getattr(self, key)
            if isinstance(value, list):
                data[key] = [_step_json(step) for step in value]
            elif value is not None:
                data[key] = _step_json(value)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Capture:
        """Read a manifest's form back; ValueError when it is not one."""
        try:
            return cls(
                trigger=str(data["trigger"]),
                reason=str(data.get("reason", "")),
                trigger_step=int(data["trigger_step"]),
                node=str(data["node"]),
                folder=str(data["folder"]),
                steps=[_step_from(item) for item in data.get("steps") or []],
                trace=_name(data.get("trace")),
                comparison=_step_from(data["comparison"]) if data.get("comparison") else None,
                comparison_trace=_name(data.get("comparison_trace")),
                slow_step=_step_from(data["slow_step"]) if data.get("slow_step") else None,
                ordinary=_step_from(data["ordinary"]) if data.get("ordinary") else None,
                median_s=_number(data.get("median_s")),
                threshold_s=_number(data.get("threshold_s")),
                dropped=[str(item) for item in data.get("dropped") or []],
                written_at=float(data.get("written_at", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a flight recorder capture: {error}") from None

    def trace_path(self, profiler_output: str, name: str | None) -> str | None:
        """Where the trace file ``name`` of this capture is, under ``profiler_output``."""
        if name is None:
            return None
        return join(profiler_output, f"{self.folder}/{name}")


def _step_json(step: CapturedStep) -> dict[str, Any]:
    return {**asdict(step), "duration_s": step.duration_s}


def _step_from(data: Any) -> CapturedStep:
    mode_step = data.get("mode_step")
    return CapturedStep(
        int(data["step"]),
        str(data["mode"]),
        float(data["start_us"]),
        float(data["end_us"]),
        None if mode_step is None else int(mode_step),
    )


def _name(value: Any) -> str | None:
    """A file name from a manifest: a plain name, never a path that leaves the capture."""
    if value is None:
        return None
    name = str(value)
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(f"{name!r} is not a file name")
    return name


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def write_capture(profiler_output: str, capture: Capture) -> str:
    """Write ``capture``'s manifest (atomically) into its folder; returns the file's path."""
    path = join(profiler_output, f"{capture.folder}/{capture.node}{MANIFEST_SUFFIX}")
    files.write_atomic(path, json.dumps(capture.to_json(), indent=1).encode())
    return path


def list_captures(profiler_output: str) -> list[Capture]:
    """Every capture under ``profiler_output``, oldest trigger step first; unreadable ones
    are skipped."""
    root = join(profiler_output, CAPTURES_DIR)
    found = []
    for relative in files.list_files(root, MANIFEST_SUFFIX):
        try:
            capture = Capture.from_json(json.loads(files.read_bytes(join(root, relative))))
        except (OSError, ValueError):
            continue
        # The folder named in the file must be the one it lies in.
        if capture.folder != f"{CAPTURES_DIR}/{posixpath.dirname(relative)}":
            continue
        found.append(capture)
    return sorted(found, key=lambda capture: (capture.trigger_step, capture.node))


@dataclass(frozen=True)
class ProfileRequest:
    """A request to capture the next ``steps`` steps: from the user, or a rule's action."""

    steps: int
    trigger: str
    requested_by: str
    time: float

    def to_json(self) -> dict[str, Any]:
        """The request as the file holds it."""
        return asdict(self)


def write_profile_request(
    profiler_output: str, steps: int, *, trigger: str = "request", requested_by: str = "the user"
) -> ProfileRequest:
    """Ask the training profiling into ``profiler_output`` to capture its next ``steps`` steps."""
    if trigger not in TRIGGERS[1:]:
        raise ConfigError("trigger", trigger, "request or rule")
    request = ProfileRequest(check_capture_steps(steps), trigger, requested_by, time.time())
    path = join(profiler_output, PROFILE_REQUEST_FILE)
    files.write_atomic(path, json.dumps(request.to_json()).encode())
    return request


def load_profile_request(profiler_output: str) -> ProfileRequest:
    """The request in ``profiler_output``; OSError when there is none, ValueError (saying why)
    when it is not a valid request."""
    data = json.loads(files.read_bytes(join(profiler_output, PROFILE_REQUEST_FILE)))
    if not isinstance(data, dict):
        raise ValueError("a JSON object is expected")
    try:
        trigger = str(data["trigger"])
        if trigger not in TRIGGERS[1:]:
            raise ValueError(f"trigger {trigger!r} is not request or rule")
        steps = check_capture_steps(data["steps"])
        return ProfileRequest(
            steps, trigger, str(data.get("requested_by", "")), float(data["time"])
        )
    except (KeyError, TypeError, ConfigError) as error:
        raise ValueError(str(error)) from None

"""Following a job from outside: its latest saved step and loss, its log lines, the host's
utilisation, its rules' verdicts.

What a progress display needs and the job's files hold: ``latest_saved_step`` lists only the newest
index directory of the tensor output; ``training_step`` adds the end of the step timeline, which
follows every step where the tensors are saved every few hundred; ``saved_loss`` reads the loss
saved at one step (that step's index only); ``LogTail`` hands out the lines a log file gained since
it last looked (whole lines only); ``latest_system_usage`` takes the newest CPU, memory and GPU
readings of the system monitor; ``rule_verdict`` reads a rule's status and, when it found an issue,
the evidence of its first issue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from trainprobe.analysis.exceptions import MissingCollectionFiles, TensorUnavailableForStep
from trainprobe.analysis.trial import create_trial
from trainprobe.capture.collections import CollectionKeys
from trainprobe.rules.rule import Evidence
from trainprobe.rules.verdict import ISSUES_FOUND
from trainprobe.storage import files, locations
from trainprobe.storage import system_metrics as metrics
from trainprobe.storage.index_file import decode_index
from trainprobe.storage.job_layout import JobLayout
from trainprobe.storage.modes import ModeKeys, step_in_words
from trainprobe.storage.rule_output import read_evaluations, read_status
from trainprobe.storage.trace_file import latest_timeline_step

__all__ = [
    "LogTail",
    "RuleVerdict",
    "SystemUsage",
    "latest_saved_step",
    "latest_system_usage",
    "rule_verdict",
    "saved_loss",
    "training_step",
]


def latest_saved_step(debug_output: str) -> int | None:
    """The highest step with a saved index file under ``debug_output``, or None."""
    index = locations.join(debug_output, locations.INDEX_DIR)
    try:
        for directory in reversed(files.child_names(index)):
            steps = [
                parsed[0]
                for name in files.list_files(locations.join(index, directory), ".json")
                if (parsed := locations.parse_index_file_name(name))
            ]
            if steps:
                return max(steps)
    except OSError:
        pass
    return None


def saved_step_words(debug_output: str, step: int) -> str:
    """A saved step as the training counts it (``TRAIN step 10 (step 20)``), from the mode its
    index file records; ``step N`` when that cannot be read."""
    directory = locations.join(debug_output, locations.index_dir_for_step(step))
    try:
        for name in files.list_files(directory, ".json"):
            parsed = locations.parse_index_file_name(name)
            if parsed is not None and parsed[0] == step:
                path = locations.join(directory, name)
                index = decode_index(files.read_bytes(path), step, parsed[1])
                return step_in_words(step, index.mode, index.mode_step)
    except (OSError, ValueError):
        pass
    return step_in_words(step)


def training_step(layout: JobLayout) -> int | None:
    """How far the training has got: the latest step in its step timeline or its saved
    tensors, whichever is further (None before the first)."""
    steps = [
        step
        for step in (
            latest_saved_step(layout.debug_output),
            latest_timeline_step(layout.profiler_output),
        )
        if step is not None
    ]
    return max(steps, default=None)


def saved_loss(debug_output: str, step: int) -> float | None:
    """The loss the training saved at ``step`` (the first tensor of its ``losses`` collection
    with a value there), or None when there is no tensor output, no losses collection or no
    loss value at that step. Only ``step``'s index files are read."""
    try:
        trial = create_trial(debug_output, range_steps=(step, step + 1), timeout=0)
    except MissingCollectionFiles:
        return None
    if CollectionKeys.LOSSES not in trial.collections():
        return None
    for name in trial.tensor_names(collection=CollectionKeys.LOSSES, step=step):
        try:
            value = np.asarray(trial.tensor(name).value(step))
        except TensorUnavailableForStep:
            continue  # only its reductions or shape were saved
        if value.size == 1:
            return float(value.reshape(-1)[0])
    return None


@dataclass(frozen=True)
class SystemUsage:
    """The newest utilisation readings of the job's hosts (the mean over hosts and GPUs), in
    percent; None where there is no such reading."""

    cpu_percent: float | None
    memory_percent: float | None
    gpu_percent: float | None


_RECENT_SECONDS = 60.0


class _Series(NamedTuple):
    """Which series a system metric reading belongs to: the host, and what it measures."""

    host: str
    type: str
    name: str
    dimension: str


def latest_system_usage(reader: metrics.SystemMetricsReader) -> SystemUsage | None:
    """The newest CPU, memory and GPU utilisation the system monitor wrote, or None before its
    first reading. Keep one ``reader`` for a job: it reads only what its files gained."""
    newest = reader.last_timestamp()
    if newest is None:
        return None
    latest: dict[_Series, float] = {}
    for event in reader.events(newest - _RECENT_SECONDS, newest + 1.0):
        latest[_Series(event.node_id, event.type, event.name, event.dimension)] = event.value

    def mean(type_: str, dimension: str, name: str | None = None) -> float | None:
        values = [
            value
            for series, value in latest.items()
            if series.type == type_
            and series.dimension == dimension
            and (name is None or series.name == name)
        ]
        return sum(values) / len(values) if values else None

    return SystemUsage(
        cpu_percent=mean(metrics.CPU, metrics.CPU_UTILIZATION, metrics.CPU_TOTAL),
        memory_percent=mean(metrics.MEMORY, "", metrics.MEMORY_USED_PERCENT),
        gpu_percent=mean(metrics.GPU, metrics.GPU_UTILIZATION),
    )


class LogTail:
    """The lines a growing file gains, read a whole line at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def new_lines(self) -> list[str]:
        """The complete lines written since the last call (none if the file does not exist)."""
        try:
            with open(self.path, "rb") as file:
                file.seek(self._offset)
                data = file.read()
        except OSError:
            return []
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        return [line.decode("utf-8", "replace") for line in complete]


@dataclass
class RuleVerdict:
    """A rule's status as its output says, with the evidence of its first issue."""

    name: str
    status: str
    details: str
    steps_evaluated: int = 0
    issue_step: int | None = None
    issue_where: str | None = None
    """The issue's step as the training counts it (``TRAIN step 10 (step 20)``)."""
    evidence: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The verdict in words."""
        lines = [f"{self.name}: {self.status}"]
        if self.details:
            lines.append(f"  {self.details}")
        if self.evidence:
            where = self.issue_where or f"step {self.issue_step}"
            lines.append(f"  Evidence at {where}:")
            lines += [f"    - {item}" for item in self.evidence]
        if self.steps_evaluated:
            lines.append(f"  Steps evaluated: {self.steps_evaluated}")
        return lines


_MOST_EVIDENCE = 10


def _describe(item: object) -> str:
    if not isinstance(item, dict) or "message" not in item:
        return str(item)
    step = item.get("step")
    tensor = item.get("tensor")
    mode_step = item.get("mode_step")
    return Evidence(
        message=str(item["message"]),
        tensor=str(tensor) if tensor is not None else None,
        step=step if isinstance(step, int) else None,
        value=item.get("value"),
        threshold=item.get("threshold"),
        mode=_mode(item.get("mode")),
        mode_step=mode_step if isinstance(mode_step, int) else None,
    ).describe()


def _mode(name: object) -> ModeKeys | None:
    """The mode an evaluation or its evidence names (``"TRAIN"``), or None."""
    return ModeKeys.__members__.get(name) if isinstance(name, str) else None


def _where(evaluation: dict[str, Any]) -> str | None:
    """An evaluation's step as the training counts it, or None when it names none."""
    step, mode_step = evaluation.get("step"), evaluation.get("mode_step")
    if not isinstance(step, int):
        return None
    return step_in_words(
        step, _mode(evaluation.get("mode")), mode_step if isinstance(mode_step, int) else None
    )


def rule_verdict(
    rule_output_dir: str, name: str, status: str, details: str, *, counts_steps: bool = True
) -> RuleVerdict:
    """The verdict of the rule writing ``rule_output_dir`` whose reported status is ``status``
    (DescribeTrainingJob's, which knows about lost runners) with ``details``. A profiler rule
    (``counts_steps`` false) evaluates windows of the profile, which its details count."""
    verdict = RuleVerdict(name, status, details)
    written = read_status(rule_output_dir)
    if written is not None and counts_steps:
        verdict.steps_evaluated = written.steps_evaluated
    if status != ISSUES_FOUND:
        return verdict
    for evaluation in read_evaluations(rule_output_dir):
        if evaluation.get("result") == ISSUES_FOUND:
            verdict.issue_step = evaluation.get("step")
            # A profiler rule's evaluations are windows of the profile, not steps.
            verdict.issue_where = (
                _where(evaluation) if counts_steps else f"window {evaluation.get('step')}"
            )
            evidence = [_describe(item) for item in evaluation.get("evidence", [])]
            verdict.evidence = evidence[:_MOST_EVIDENCE]
            if len(evidence) > _MOST_EVIDENCE:
                verdict.evidence.append(f"... and {len(evidence) - _MOST_EVIDENCE} more")
            break
    return verdict

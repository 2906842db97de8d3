"""Following a running job on the terminal: plain ``[trainprobe]`` lines, or the live panel.

``PlainFollower`` prints what changed since its last look: the training's new output, the job's
status, the step (every few seconds) and each rule's status. ``LiveFollower`` draws the live
panel (``trainprobe.cli.live_view``) under the training's output from the snapshots that
``JobProgress`` gathers from the job's files. Both end with the summary ``trainprobe run``
prints.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from trainprobe.cli.live_view import JobSnapshot, LiveView, RuleStatus
from trainprobe.config.statuses import TERMINAL_JOB_STATUSES, RuleEvaluationStatus
from trainprobe.jobs.operations.describe import rule_evaluation_statuses
from trainprobe.jobs.operations.progress import (
    LogTail,
    latest_saved_step,
    latest_system_usage,
    saved_loss,
    saved_step_words,
    training_step,
)
from trainprobe.storage.hook_overhead import SAVING_STOPPED
from trainprobe.storage.job_layout import JobLayout
from trainprobe.storage.modes import ModeKeys, step_in_words
from trainprobe.storage.rule_output import read_status
from trainprobe.storage.system_metrics import SystemMetricsReader
from trainprobe.storage.training_record import (
    GRADIENT_NORM,
    LEARNING_RATE,
    LOSS,
    TrainingRecord,
    latest_record,
)

__all__ = [
    "PREFIX",
    "Follower",
    "JobProgress",
    "LiveFollower",
    "PlainFollower",
    "saving_stopped",
    "say",
]

log = logging.getLogger(__name__)

PREFIX = "[trainprobe]"
_STEP_EVERY_SECONDS = 2.0


def say(text: str) -> None:
    print(f"{PREFIX} {text}", flush=True)


class PlainFollower:
    """Prints what changed in the job since the last look."""

    def __init__(self, layout: JobLayout, quiet: bool) -> None:
        self.layout = layout
        self.training_log = None if quiet else LogTail(layout.training_log)
        self.status: tuple[str, str] | None = None
        self.rules: dict[str, str] = {}
        self.step: int | None = None
        self._step_shown = 0.0

    def show(self, description: dict[str, Any], *, final: bool = False) -> None:
        if self.training_log is not None:
            for line in self.training_log.new_lines():
                print(line, flush=True)
        status = (description["TrainingJobStatus"], description["SecondaryStatus"])
        if status != self.status:
            self.status = status
            say(f"job {description['TrainingJobName']}: {status[0]} ({status[1]})")
        step = training_step(self.layout)
        now = time.monotonic()
        if step is not None and step != self.step and now - self._step_shown >= _STEP_EVERY_SECONDS:
            self.step, self._step_shown = step, now
            debug_output = self.layout.debug_output
            saved = latest_saved_step(debug_output) == step
            say(saved_step_words(debug_output, step) if saved else f"step {step}")
        for rule in rule_evaluation_statuses(description):
            name, value = rule["RuleConfigurationName"], rule["RuleEvaluationStatus"]
            if self.rules.get(name) != value:
                self.rules[name] = value
                details = (
                    f": {rule['StatusDetails']}"
                    if value == RuleEvaluationStatus.ISSUES_FOUND
                    else ""
                )
                say(f"rule {name}: {value}{details}")

    def finish(self, summary: list[str]) -> None:
        for line in summary:
            print(line)

    def close(self) -> None:
        """Nothing to close: every line is printed as it comes."""


_T = TypeVar("_T")
_RATE_WINDOW_SECONDS = 10.0
_LOSS_EVERY_SECONDS = 1.0
_SPARKLINE_STEPS = 32


def _or_blank(read: Callable[[], _T], what: str) -> _T | None:
    """``read()``, or None when it fails: what the live view cannot gather stays blank."""
    try:
        return read()
    except Exception:
        log.debug("cannot read %s for the live view", what, exc_info=True)
        return None


class JobProgress:
    """Gathers what the live view shows of a running job from its files, one snapshot a poll.

    The step is the latest of the step timeline or the saved tensors (``training_step``), the
    loss the latest of the training record (every TRAIN step's loss, learning rate and gradient
    norm, which the hook keeps: ``storage.training_record``), else the latest saved one;
    steps/s comes from the steps seen over the last ten seconds; the loss is read only when the
    step changes (at most once a second, and once more at the end); the system readings are read
    incrementally. Whatever cannot be read is left None, and the previous loss stays shown.
    """

    def __init__(self, layout: JobLayout, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.layout = layout
        self._clock = clock
        self._started = clock()
        self._steps: deque[tuple[float, int]] = deque()
        self._loss: tuple[str, float] | None = None
        self._loss_read: tuple[float, int] | None = None
        self._record: TrainingRecord | None = None
        self._system = SystemMetricsReader(layout.profiler_output)

    def snapshot(self, description: dict[str, Any], *, final: bool = False) -> JobSnapshot:
        """The job as ``description`` (DescribeTrainingJob's) and its files say now; ``final``
        reads the loss of the last step even if it was read less than a second ago."""
        now = self._clock()
        step = _or_blank(lambda: training_step(self.layout), "the step")
        rate = self._steps_per_second(now, step)
        if description["TrainingJobStatus"] in TERMINAL_JOB_STATUSES:
            rate = None
        saved = _or_blank(lambda: latest_saved_step(self.layout.debug_output), "the saved step")
        if saved is not None or step is not None:
            self._read_loss(now, max(saved or -1, step or -1), final, saved)
        update = self._latest_update()
        usage = _or_blank(lambda: latest_system_usage(self._system), "the system readings")
        debugging = debugging_rule_names(description)
        return JobSnapshot(
            name=description["TrainingJobName"],
            status=description["TrainingJobStatus"],
            secondary_status=description["SecondaryStatus"],
            elapsed_seconds=now - self._started,
            step=step,
            steps_per_second=rate,
            loss=None if self._loss is None else self._loss[1],
            loss_where=None if self._loss is None else self._loss[0],
            recent_losses=self._recent_losses(),
            learning_rate=update[0],
            gradient_norm=update[1],
            cpu_percent=None if usage is None else usage.cpu_percent,
            memory_percent=None if usage is None else usage.memory_percent,
            gpu_percent=None if usage is None else usage.gpu_percent,
            rules=tuple(
                self._rule(rule, counted=rule["RuleConfigurationName"] in debugging)
                for rule in rule_evaluation_statuses(description)
            ),
            saving=saving_stopped(description),
        )

    def _rule(self, rule: dict[str, Any], counted: bool) -> RuleStatus:
        """A rule's row; a debugging rule's counts come from its own ``status.json``."""
        name, value = rule["RuleConfigurationName"], rule["RuleEvaluationStatus"]
        details = (
            rule["StatusDetails"]
            if value
            in (
                RuleEvaluationStatus.ISSUES_FOUND,
                RuleEvaluationStatus.ERROR,
                RuleEvaluationStatus.NO_ISSUES_FOUND,
            )
            else ""
        )
        if not counted:
            return RuleStatus(name, value, details)
        directory = self.layout.rule_output_dir(name)
        written = _or_blank(lambda: read_status(directory), f"the status of rule {name}")
        if written is None:
            return RuleStatus(name, value, details)
        return RuleStatus(
            name,
            value,
            details,
            evaluated=written.steps_evaluated,
            skipped=written.steps_skipped,
            checked=written.tensors_checked,
            unmatched=len(written.unmatched),
        )

    def _steps_per_second(self, now: float, step: int | None) -> float | None:
        steps = self._steps
        if step is not None and (not steps or step > steps[-1][1]):
            steps.append((now, step))
        while len(steps) > 2 and now - steps[0][0] > _RATE_WINDOW_SECONDS:
            steps.popleft()
        if len(steps) < 2 or steps[-1][0] <= steps[0][0]:
            return None
        return (steps[-1][1] - steps[0][1]) / (steps[-1][0] - steps[0][0])

    def _read_loss(self, now: float, step: int, final: bool, saved: int | None) -> None:
        if self._loss_read is not None:
            read_at, read_step = self._loss_read
            if not final and (read_step == step or now - read_at < _LOSS_EVERY_SECONDS):
                return
        self._loss_read = (now, step)
        debug_output = self.layout.debug_output
        record = _or_blank(
            lambda: latest_record(debug_output, _SPARKLINE_STEPS), "the training record"
        )
        if record is not None:
            self._record = record
        recorded = self._latest_recorded_loss()
        if recorded is not None and (saved is None or recorded[0] >= saved):
            self._loss = recorded[1:]
            return
        if saved is None:
            return
        loss = _or_blank(lambda: saved_loss(debug_output, saved), "the loss")
        if loss is not None:
            self._loss = (saved_step_words(debug_output, saved), loss)

    def _latest_recorded_loss(self) -> tuple[int, str, float] | None:
        """(global step, its words, loss) of the latest recorded step with a loss."""
        record = self._record
        if record is None:
            return None
        losses = record.values[LOSS]
        found = [index for index in range(len(record)) if losses[index] == losses[index]]
        if not found:
            return None
        last = found[-1]
        step = int(record.steps[last])
        mode = ModeKeys.__members__.get(record.mode)
        words = step_in_words(step, mode, int(record.mode_steps[last]))
        return step, words, float(losses[last])

    def _recent_losses(self) -> tuple[float, ...]:
        """The losses of the latest recorded steps (at most ``_SPARKLINE_STEPS``)."""
        if self._record is None:
            return ()
        return tuple(float(value) for value in self._record.values[LOSS][-_SPARKLINE_STEPS:])

    def _latest_update(self) -> tuple[float | None, float | None]:
        """The learning rate and gradient norm of the latest recorded step."""
        record = self._record
        if record is None or not len(record):
            return None, None
        rate, norm = record.values[LEARNING_RATE][-1], record.values[GRADIENT_NORM][-1]
        return (float(rate) if rate == rate else None, float(norm) if norm == norm else None)


class LiveFollower:
    """Draws the job in a live panel, the training's output and rule issues scrolling above."""

    def __init__(self, layout: JobLayout, quiet: bool) -> None:
        self.training_log = None if quiet else LogTail(layout.training_log)
        self.progress = JobProgress(layout)
        self.view = LiveView()
        self.rules: dict[str, str] = {}

    def show(self, description: dict[str, Any], *, final: bool = False) -> None:
        if self.training_log is not None:
            self.view.print_output(self.training_log.new_lines())
        for rule in rule_evaluation_statuses(description):
            name, value = rule["RuleConfigurationName"], rule["RuleEvaluationStatus"]
            if self.rules.get(name) != value and value in (
                RuleEvaluationStatus.ISSUES_FOUND,
                RuleEvaluationStatus.ERROR,
            ):
                self.view.print_message(f"{PREFIX} rule {name}: {value}: {rule['StatusDetails']}")
            self.rules[name] = value
        self.view.show(self.progress.snapshot(description, final=final))

    def finish(self, summary: list[str]) -> None:
        self.view.finish(summary)

    def close(self) -> None:
        self.view.close()


class Follower(Protocol):
    """What follows a job: shows each description, then the summary."""

    def show(self, description: dict[str, Any], *, final: bool = False) -> None: ...
    def finish(self, summary: list[str]) -> None: ...
    def close(self) -> None: ...


def debugging_rule_names(description: dict[str, Any]) -> set[str]:
    """The debugging rules of a DescribeTrainingJob response: they count steps, where a profiler
    rule counts windows of the profile."""
    return {
        rule["RuleConfigurationName"] for rule in description.get("DebugRuleEvaluationStatuses", [])
    }


def saving_stopped(description: dict[str, Any]) -> str | None:
    """Where and why the hook stopped saving, as the job's description says it (its runner puts
    it in the status message); None when it did not."""
    for transition in reversed(description.get("SecondaryStatusTransitions", [])):
        message = str(transition.get("StatusMessage", ""))
        start = message.find(SAVING_STOPPED)
        if start >= 0:
            return message[start:]
    return None

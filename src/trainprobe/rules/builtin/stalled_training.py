"""StalledTrainingRule: a watchdog that fires when no new step has been written for ``threshold``
seconds.

A runner that waits for new steps should call its ``check_progress()`` while it waits: a stalled
job writes no step, so ``invoke_at_step`` alone would only notice the stall once the job moves
again.

When it finds a job stalled now, it first asks the job's training processes where they are (the
flight recorder's hang watch writes the Python stacks of all their threads into the job's
profiler output, ``trainprobe.storage.training_stacks``), waits up to
``STACKS_WAIT_SECONDS`` for them, and says where each is stuck in its finding; its actions
(StopTraining) run after that. A training without framework profiling has no hang watch: the
finding then says only that the training stalled.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from trainprobe.analysis.trial import Trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters, number
from trainprobe.storage.job_layout import profiler_output_of
from trainprobe.storage.step_reader import step_written_at
from trainprobe.storage.training_end import training_has_ended
from trainprobe.storage.training_stacks import read_stacks, request_stacks, where_stuck

__all__ = ["STACKS_WAIT_SECONDS", "StalledTrainingRule"]

STACKS_WAIT_SECONDS = 5.0
"""How long a stalled job's training processes have to write their stacks."""
_OTHER_PROCESSES_SECONDS = 1.5
"""After the first process's stacks, how long the others have (their watches wake every second)."""


class StalledTrainingRule(BuiltinRule):
    """Fires when no new step has been written for ``threshold`` seconds.

    ``invoke_at_step`` compares when each step was written with when the previous one was, so
    a finished job shows where it stalled; ``check_progress`` compares the latest step with the
    clock, for a job that is stalled now. ``stop_training_on_fire`` and
    ``training_job_name_prefix`` say whether (and which job) to stop when it fires; the runner
    acts on them, as on a StopTraining action.
    """

    reads_tensors = False  # it judges when steps were written, not what they hold

    def __init__(
        self,
        base_trial: Trial,
        threshold: int | str = 1800,
        stop_training_on_fire: bool | str = False,
        training_job_name_prefix: str | None = None,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "StalledTrainingRule",
            {
                "threshold": threshold,
                "stop_training_on_fire": stop_training_on_fire,
                "training_job_name_prefix": training_job_name_prefix,
            },
        )
        self.threshold = parameters.integer("threshold")
        self.stop_training_on_fire = parameters.flag("stop_training_on_fire")
        self.training_job_name_prefix = parameters.optional_text("training_job_name_prefix")
        self.started = time.time()
        self._previous: tuple[int, float] | None = None

    def written_at(self, step: int) -> float | None:
        """When ``step`` was written (its latest index file), or None when that is not known."""
        return step_written_at(self.base_trial.path, step, self.base_trial.workers())

    def invoke_at_step(self, step: int) -> bool:
        """Whether more than ``threshold`` seconds passed between the previous step and
        ``step`` being written."""
        written = self.written_at(step)
        if written is None:
            raise self.insufficient(f"cannot tell when {self.step_words(step)} was written")
        previous = self._previous
        self._previous = (step, written)
        if previous is None:
            return False
        gap = written - previous[1]
        if gap <= self.threshold:
            return False
        self.record(
            message=(
                f"no step was written for {number(gap)} s, between "
                f"{self.step_words(previous[0])} and {self.step_words(step)} (threshold "
                f"{self.threshold} s)"
            ),
            step=step,
            value=gap,
            threshold=self.threshold,
        )
        return True

    def check_progress(self, now: float | None = None) -> bool:
        """Whether the job, still running, has written no step for more than ``threshold``
        seconds (counted from the rule's start when it has written none)."""
        if training_has_ended(self.base_trial.path):
            return False
        now = time.time() if now is None else now
        steps = self.base_trial.steps(show_incomplete_steps=True)
        last_step = steps[-1] if steps else None
        written = self.written_at(last_step) if last_step is not None else None
        idle = now - (written if written is not None else self.started)
        if idle <= self.threshold:
            return False
        since = (
            f"since {self.step_words(last_step)} was written"
            if written is not None and last_step is not None
            else "since the rule started"
        )
        where = self.where_stuck()
        self.record(
            message=(
                f"no new step for {number(idle)} s {since} (threshold {self.threshold} s): "
                "the training looks stalled" + (f"; where it is: {where}" if where else "")
            ),
            step=last_step,
            value=idle,
            threshold=self.threshold,
        )
        return True

    def where_stuck(self) -> str:
        """Where the job's training processes are, from the stacks they write when asked; ''
        when none answers in time (or the trial is not a job's)."""
        path = self.base_trial.path
        output = profiler_output_of(path)
        if output == path:
            return ""
        try:
            asked = request_stacks(output)
        except OSError:
            return ""
        deadline = time.monotonic() + STACKS_WAIT_SECONDS
        while time.monotonic() < deadline:
            if read_stacks(output, since=asked):
                time.sleep(_OTHER_PROCESSES_SECONDS)
                return where_stuck(read_stacks(output, since=asked))
            time.sleep(0.2)
        return ""

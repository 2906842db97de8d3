"""The runner: follows a job's tensors as they are written, and evaluates rules on them.

``RuleRunner(definition, trial_path, output_dir="<job>/rule-output").run()`` returns the
rule's verdict once it is known; ``RuleRunner([d1, d2, ...], ...)`` runs several rules on one
job in one process, reading each new step once for all of them (a rule that fails ends in
Error and the others go on; built-in rules also share the values they read,
``Trial.keep_values``). For each rule (see ``trainprobe.rules.evaluator``):

1. The runner waits for the first tensors (``no_data_timeout`` seconds at most; a training
   that ends without saving any is reported at once), then builds the rule.
2. It hands the rule every saved, complete step in global-step order, once each; the rule's
   modes, start_step and end_step choose which it evaluates. It looks for new steps the
   moment an index file arrives (inotify, on Linux; every ``ARRIVAL_POLL_INTERVAL`` seconds
   too, a fallback), elsewhere every ``poll_interval`` seconds, re-listing the output only
   when a ``stat`` says something may have changed (``trainprobe.storage.output_changes``).
3. A rule's run ends with its verdict: IssuesFound, NoIssuesFound once the training has ended
   and every step is read (the trial's NoMoreData is the normal end), Error, or Stopped after
   ``stop()`` (status Stopping meanwhile) or Ctrl-C.

Each rule writes ``<output_dir>/<RuleConfigurationName>/``: its evaluations, actions and status
(``trainprobe.storage.rule_output``).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable, Sequence

from trainprobe.analysis.exceptions import MissingCollectionFiles, TrainprobeAnalysisError
from trainprobe.analysis.trial import Trial, create_trial
from trainprobe.config.errors import ConfigError
from trainprobe.rules.actions.stop_training import StopTrainingCallback
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.evaluator import RuleEvaluator, no_steps_message
from trainprobe.rules.following import RuleFollowing, check_unique_names, for_rule, rule_directory
from trainprobe.rules.verdict import ERROR, Evaluation, Verdict
from trainprobe.storage.output_changes import OutputChangeWatch
from trainprobe.storage.training_end import training_has_ended

__all__ = [
    "DEFAULT_NO_DATA_TIMEOUT",
    "DEFAULT_POLL_INTERVAL",
    "RuleRunner",
    "run_rule",
]

DEFAULT_POLL_INTERVAL = 0.1
ARRIVAL_POLL_INTERVAL = 0.5
"""How often the runner looks anyway where an arriving index file wakes it (inotify)."""
DEFAULT_NO_DATA_TIMEOUT = 300.0
KEPT_VALUE_BYTES = 256 * 1024 * 1024
"""How many bytes of values the trial keeps for built-in rules evaluated together (the tensors
of a step or more: each rule asking for a tensor another has read gets the same array)."""


class _NoTrial(Exception):
    """The job's tensors cannot be read: every rule ends in Error with this message."""


class RuleRunner(RuleFollowing[RuleEvaluator]):
    """Evaluates ``definitions`` (one or several rules) on the job whose tensors are at
    ``trial_path``.

    ``output_dir`` is the job's rule output directory (``<job>/rule-output``); each rule writes
    into its own sub-directory (None writes nothing). ``every_step`` keeps rules evaluating
    after their first issue; by default built-in rules stop there and custom rules go on.
    ``on_stop_training`` is passed to StopTraining actions (for a job runner that started the
    training itself); ``on_evaluation(name, evaluation)`` sees each evaluation as it happens.
    """

    def __init__(
        self,
        definitions: RuleDefinition | Sequence[RuleDefinition],
        trial_path: str,
        *,
        output_dir: str | None = None,
        every_step: bool | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        no_data_timeout: float = DEFAULT_NO_DATA_TIMEOUT,
        on_stop_training: StopTrainingCallback | None = None,
        on_evaluation: Callable[[str, Evaluation], None] | None = None,
    ) -> None:
        if isinstance(definitions, RuleDefinition):
            definitions = [definitions]
        check_unique_names([definition.name for definition in definitions])
        self.trial_path = trial_path
        self.poll_interval = poll_interval
        self.no_data_timeout = no_data_timeout
        super().__init__(
            [
                RuleEvaluator(
                    definition,
                    trial_path,
                    output_dir=rule_directory(output_dir, definition.name),
                    every_step=every_step,
                    on_stop_training=on_stop_training,
                    on_evaluation=for_rule(on_evaluation, definition.name),
                )
                for definition in definitions
            ]
        )
        self._other_trials: dict[str, Trial] = {}
        self._changes = OutputChangeWatch(trial_path)

    def _unreadable(self, error: Exception) -> str | None:
        return str(error) if isinstance(error, _NoTrial) else None

    # ----- following the job ------------------------------------------------------------

    def stop(self, why: str = "stopped on request") -> None:
        super().stop(why)
        self._changes.interrupt()

    def _follow(self) -> None:
        started = time.monotonic()
        try:
            trial = self._first_trial(started)
            if trial is None:
                return
            for evaluator in self._active():
                paths = evaluator.definition.other_trial_paths
                try:
                    others = [self._other_trial(path) for path in paths]
                except _NoTrial as problem:
                    evaluator.finish(ERROR, str(problem))
                    continue
                evaluator.start(trial, others)
            trial.dynamic_refresh = False
            if len(self.evaluators) > 1 and all(
                evaluator.definition.builtin for evaluator in self.evaluators
            ):
                # Built-in rules never change a value they read: each record is read once.
                trial.keep_values(KEPT_VALUE_BYTES)
            self._follow_steps(trial, started)
        finally:
            self._changes.close()

    def _follow_steps(self, trial: Trial, started: float) -> None:
        """Hand each new complete step to every rule until every verdict is known."""
        changes = self._changes
        # Where an arriving file wakes the runner, the poll is only a fallback.
        sleep = self.poll_interval
        if changes.wakes_on_arrival:
            sleep = max(sleep, ARRIVAL_POLL_INTERVAL)
        last_step, steps_seen, look = -1, 0, True
        while self._active() and not self._stopped():
            if not trial.loaded_all_steps and changes.changed():
                try:
                    trial.refresh_data()
                except TrainprobeAnalysisError as error:
                    raise _NoTrial(f"cannot read {self.trial_path}: {error}") from None
                look = True
            # Steps become complete only when new files are read, so only then is there news.
            steps = trial.steps() if look else []
            look = False
            fresh = steps[bisect_right(steps, last_step) :]
            for step in fresh:
                last_step, steps_seen = step, steps_seen + 1
                for evaluator in self._active():
                    evaluator.consider(trial, step, steps_seen)
                if self._stopped():
                    return
            if trial.loaded_all_steps:
                for evaluator in self._active():
                    evaluator.conclude(steps_seen)
                return
            if not fresh:
                for evaluator in self._active():
                    evaluator.check_idle(trial, last_step if steps_seen else None, steps_seen)
            if steps_seen == 0 and time.monotonic() - started > self.no_data_timeout:
                raise _NoTrial(no_steps_message(self.trial_path, waited=self.no_data_timeout))
            if not self._stop.is_set():
                changes.wait(sleep)

    def _first_trial(self, started: float) -> Trial | None:
        """The job's trial once its first collections file is there (None if stopped first)."""
        while not self._stopped():
            remaining = self.no_data_timeout - (time.monotonic() - started)
            ended = training_has_ended(self.trial_path)
            try:
                return create_trial(self.trial_path, timeout=0)
            except MissingCollectionFiles:
                if ended:
                    raise _NoTrial(
                        f"No tensors were saved: the training writing {self.trial_path} ended "
                        "without saving any. Check that the training script registers the "
                        "trainprobe hook (hook.register_module(model)) and that its out_dir is "
                        "this directory."
                    ) from None
                if remaining <= 0:
                    raise _NoTrial(
                        f"No tensors appeared at {self.trial_path} within "
                        f"{self.no_data_timeout:g} s. Check that the training is running with "
                        "the trainprobe hook and that its out_dir is this directory, or allow a "
                        "longer wait."
                    ) from None
                self._changes.wait(min(self.poll_interval, remaining))
            except (ConfigError, TrainprobeAnalysisError) as error:
                raise _NoTrial(f"cannot read {self.trial_path}: {error}") from None
        return None

    def _other_trial(self, path: str) -> Trial:
        if path not in self._other_trials:
            try:
                self._other_trials[path] = create_trial(
                    path, timeout=min(self.no_data_timeout, 60.0)
                )
            except (ConfigError, TrainprobeAnalysisError) as error:
                raise _NoTrial(f"cannot read the other trial at {path}: {error}") from None
        return self._other_trials[path]


def run_rule(
    definition: RuleDefinition,
    trial_path: str,
    *,
    output_dir: str | None = None,
    every_step: bool | None = None,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    no_data_timeout: float = DEFAULT_NO_DATA_TIMEOUT,
    on_stop_training: StopTrainingCallback | None = None,
) -> Verdict:
    """Evaluate one rule on the job at ``trial_path`` and return its verdict (see RuleRunner)."""
    runner = RuleRunner(
        definition,
        trial_path,
        output_dir=output_dir,
        every_step=every_step,
        poll_interval=poll_interval,
        no_data_timeout=no_data_timeout,
        on_stop_training=on_stop_training,
    )
    return runner.run()[0]

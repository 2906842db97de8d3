"""The profiler rule runner: follows a job's profiler output and evaluates profiler rules on it.

``run_profiler_rules(definitions, profiler_output_dir, rule_output_dir)`` returns each rule's
verdict, with the rule engine's statuses, once the job has ended and every window is evaluated.
``ProfilerRuleRunner`` does the same with ``run()`` and can be stopped from another thread. One
runner reads the job for all its rules (a ProfilerReport runs the 11 rules on the same windows).

1. It waits for the job's first data (``no_data_timeout`` seconds at most; a job that ends
   without any is reported at once): system readings or framework events.
2. Each rule's windows start there and are ``scan_interval_us`` long (60 s by default). A window is
   evaluated once its data is complete (``ProfilerTrial.ready_until_us``), so a rule follows a live
   job about one window behind. The runner looks for new data every ``poll_interval`` seconds,
   and for the job's end marker (a local one) every ``END_LOOK_SECONDS`` in between, so that
   the verdicts follow the job's end at once.
3. Once the job has ended (``ProfilerTrial.ended``: the ``training_job_end.ts`` marker, or
   ``job_ended``), the remaining windows up to the newest data are evaluated, the last one ending
   there, and every rule ends: IssuesFound if it ever fired, else NoIssuesFound; Error if it failed
   or there was no data; Stopped after ``stop()`` or Ctrl-C.

``framework_profiling=False`` tells the rules that time steps (MaxInitializationTime, StepOutlier,
Dataloader, OverallFrameworkMetrics) that the job records no framework events, so that a job
without framework profiling does not look as if it never started a step.

Each rule writes ``<rule_output_dir>/<RuleConfigurationName>/``: status, evaluations and actions
(``trainprobe.storage.rule_output``) and its report data
(``profiler-output/profiler-reports/<Rule>.json``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from trainprobe.config.rules import ProfilerRule as ProfilerRuleConfig
from trainprobe.rules.actions.stop_training import StopTrainingCallback
from trainprobe.rules.following import RuleFollowing, check_unique_names, for_rule, rule_directory
from trainprobe.rules.profiler_rules.definition import ProfilerRuleDefinition
from trainprobe.rules.profiler_rules.evaluator import ProfilerRuleEvaluator
from trainprobe.rules.profiler_rules.trial import DEFAULT_FRAMEWORK_WAIT, ProfilerTrial
from trainprobe.rules.verdict import ERROR, Evaluation, Verdict
from trainprobe.storage import files

__all__ = [
    "DEFAULT_NO_DATA_TIMEOUT",
    "DEFAULT_POLL_INTERVAL",
    "ProfilerRuleRunner",
    "run_profiler_rules",
]

DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_NO_DATA_TIMEOUT = 300.0
END_LOOK_SECONDS = 0.1
"""How often the runner looks for a local job's end marker between its looks for data."""

Definitions = (
    ProfilerRuleDefinition
    | ProfilerRuleConfig
    | Sequence[ProfilerRuleDefinition | ProfilerRuleConfig]
)


def _definitions(given: Definitions) -> list[ProfilerRuleDefinition]:
    listed = [given] if isinstance(given, ProfilerRuleDefinition | ProfilerRuleConfig) else given
    found = [
        item
        if isinstance(item, ProfilerRuleDefinition)
        else ProfilerRuleDefinition.from_config(item)
        for item in listed
    ]
    check_unique_names([definition.name for definition in found])
    return found


class ProfilerRuleRunner(RuleFollowing[ProfilerRuleEvaluator]):
    """Evaluates profiler rules on the job whose profiler output is ``profiler_output_dir`` (see
    the module docstring for the parameters)."""

    def __init__(
        self,
        definitions: Definitions,
        profiler_output_dir: str,
        *,
        rule_output_dir: str | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        no_data_timeout: float = DEFAULT_NO_DATA_TIMEOUT,
        framework_wait: float = DEFAULT_FRAMEWORK_WAIT,
        framework_profiling: bool = True,
        job_ended: Callable[[], bool] | None = None,
        on_stop_training: StopTrainingCallback | None = None,
        on_evaluation: Callable[[str, Evaluation], None] | None = None,
    ) -> None:
        self.profiler_output_dir = profiler_output_dir
        self.poll_interval = poll_interval
        self.no_data_timeout = no_data_timeout
        self.trial = ProfilerTrial(
            profiler_output_dir,
            framework_wait_s=framework_wait,
            framework_profiling=framework_profiling,
            job_ended=job_ended,
        )
        super().__init__(
            [
                ProfilerRuleEvaluator(
                    definition,
                    profiler_output_dir,
                    output_dir=rule_directory(rule_output_dir, definition.name),
                    on_stop_training=on_stop_training,
                    on_evaluation=for_rule(on_evaluation, definition.name),
                )
                for definition in _definitions(definitions)
            ]
        )

    def _unreadable(self, error: Exception) -> str | None:
        if isinstance(error, OSError):
            return f"cannot read {self.profiler_output_dir}: {error}"
        return None

    def _follow(self) -> None:
        trial = self.trial
        started = time.monotonic()
        while self._active() and not self._stopped():
            ended = (
                trial.ended()
            )  # before reading, so that no data written before the end is missed
            trial.refresh()
            if trial.first_us is None:
                if ended or time.monotonic() - started > self.no_data_timeout:
                    why = (
                        "the job ended without"
                        if ended
                        else (f"no data appeared within {self.no_data_timeout:g} s: found no")
                    )
                    for evaluator in self._active():
                        evaluator.finish(
                            ERROR,
                            f"{why} system metrics or framework events under "
                            f"{self.profiler_output_dir}. Check that the system monitor or "
                            "framework profiling runs and writes there.",
                        )
                    return
                self._wait()
                continue
            for evaluator in self._active():
                evaluator.start(trial.first_us)
            self._evaluate_ready(ended)
            if ended:
                for evaluator in self._active():
                    evaluator.conclude()
                return
            starts = [e.next_start_us for e in self._active() if e.next_start_us is not None]
            if starts:
                trial.forget_before(min(starts))
            self._wait()

    def _wait(self) -> None:
        """Until the next look for data: ``poll_interval``, cut short by a stop, or by the
        job's end marker where looking for it costs only a ``stat`` (a local job)."""
        if files.is_url(self.profiler_output_dir):
            self._stop.wait(self.poll_interval)
            return
        deadline = time.monotonic() + self.poll_interval
        while not self._stop.is_set() and not self.trial.ended():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(min(left, END_LOOK_SECONDS))

    def _evaluate_ready(self, ended: bool) -> None:
        trial = self.trial
        ready = trial.ready_until_us()
        data_end = trial.data_end_us()
        for evaluator in self._active():
            while not evaluator.finished and not self._stop.is_set():
                assert evaluator.next_start_us is not None
                start, end = evaluator.next_start_us, evaluator.next_end_us
                if ended:
                    last = data_end if data_end is not None else start
                    if start > last or (start == last and evaluator.windows):
                        break
                    final = end >= last
                    if final:
                        end = last + 1  # the newest reading, at ``last``, belongs in it
                elif ready is None or end > ready:
                    break
                else:
                    final = False
                window = trial.window(evaluator.windows, start, end, final=final)
                evaluator.take(window)
                if final:
                    break


def run_profiler_rules(
    definitions: Definitions,
    profiler_output_dir: str,
    rule_output_dir: str | None,
    *,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    no_data_timeout: float = DEFAULT_NO_DATA_TIMEOUT,
    framework_wait: float = DEFAULT_FRAMEWORK_WAIT,
    framework_profiling: bool = True,
    job_ended: Callable[[], bool] | None = None,
    on_stop_training: StopTrainingCallback | None = None,
) -> list[Verdict]:
    """Evaluate profiler rules on the job at ``profiler_output_dir`` until it has ended, writing
    each rule's output under ``rule_output_dir`` (see ProfilerRuleRunner); the verdicts, in the
    order of ``definitions``."""
    runner = ProfilerRuleRunner(
        definitions,
        profiler_output_dir,
        rule_output_dir=rule_output_dir,
        poll_interval=poll_interval,
        no_data_timeout=no_data_timeout,
        framework_wait=framework_wait,
        framework_profiling=framework_profiling,
        job_ended=job_ended,
        on_stop_training=on_stop_training,
    )
    return runner.run()

"""``ProfilerRuleEvaluator``: one profiler rule's evaluation of one job, window by window.

It uses the rule engine's statuses, verdict and output (``trainprobe.rules.verdict``,
``trainprobe.storage.rule_output``) with windows in place of steps: the window's number is the
evaluation's ``step`` (as the integers smdebug's invoker handed its profiler rules were), and each
line of ``evaluations.jsonl`` also holds the window's ``window_start_us`` and ``window_end_us``.

- The status is InProgress while the job runs, and counts the windows evaluated (a window is
  evaluated once its data is complete, ``scan_interval_us`` after it began). When the rule first
  fires the status becomes IssuesFound at once (the evaluation goes on: its report keeps
  counting) and the rule's actions run; at the end it is IssuesFound if the rule ever fired,
  else NoIssuesFound.
- A rule that fails ends in Error, saying what failed and where; the other rules go on.
- After each window the rule's report data is written, atomically, to
  ``<output_dir>/profiler-output/profiler-reports/<Rule>.json`` (one file per rule a
  ProfilerReport runs), where SageMaker's profiler report reads it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from trainprobe.config.errors import ConfigError
from trainprobe.rules.actions import Notice, RuleActions
from trainprobe.rules.actions.stop_training import StopTrainingCallback
from trainprobe.rules.failure import describe_failure
from trainprobe.rules.profiler_rules.definition import ProfilerRuleDefinition
from trainprobe.rules.profiler_rules.report import ProfilerReport
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.window import Window
from trainprobe.rules.rule_run import RuleRun
from trainprobe.rules.verdict import (
    ERROR,
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    STOPPED,
    Evaluation,
)
from trainprobe.storage import files
from trainprobe.storage.job_layout import rule_report_file

__all__ = ["ProfilerRuleEvaluator"]

log = logging.getLogger(__name__)


class ProfilerRuleEvaluator(RuleRun):
    """One profiler rule on the job at ``profiler_output_dir``; writes into ``output_dir``
    (``<job>/rule-output/<name>``; None writes nothing)."""

    kind = "profiler rule"

    def __init__(
        self,
        definition: ProfilerRuleDefinition,
        profiler_output_dir: str,
        *,
        output_dir: str | None = None,
        on_stop_training: StopTrainingCallback | None = None,
        on_evaluation: Callable[[Evaluation], None] | None = None,
    ) -> None:
        super().__init__(definition.name, output_dir)
        self.definition = definition
        self.profiler_output_dir = profiler_output_dir
        self.output_dir = output_dir
        self.on_stop_training = on_stop_training
        self.on_evaluation = on_evaluation
        self.rule: WindowRule | None = None
        self.scan_interval_us = float(definition.scan_interval_us)
        self.next_start_us: float | None = None
        self.windows = 0

    @property
    def next_end_us(self) -> float:
        """The end of the next window to evaluate."""
        assert self.next_start_us is not None
        return self.next_start_us + self.scan_interval_us

    # ----- life cycle -----------------------------------------------------------------------

    def begin(self) -> None:
        """Say the rule is waiting for data; build it and its actions (Error if they fail)."""
        self._set_status(IN_PROGRESS, f"waiting for profiler data at {self.profiler_output_dir}")
        try:
            self._actions = RuleActions.from_config(
                self.definition.actions,
                out_dir=self.profiler_output_dir,
                on_stop_training=self.on_stop_training,
            )
            self.rule = self.definition.build()
        except ConfigError as error:
            self.finish(ERROR, f"ConfigError: {error}")
        except Exception as error:
            self.finish(
                ERROR,
                f"{self.definition.rule_to_invoke} could not be built: {describe_failure(error)}",
            )

    def start(self, first_us: float) -> None:
        """The job's data begins at ``first_us``: windows start there."""
        if self.finished or self.next_start_us is not None:
            return
        self.next_start_us = first_us
        self._set_status(IN_PROGRESS, self._progress())

    def finish_stopped(self, why: str) -> None:
        """End the run as Stopped, saying how far it got."""
        self.finish(STOPPED, f"{why} after {self.windows} evaluated window(s)")

    # ----- one window ------------------------------------------------------------------------

    def take(self, window: Window) -> None:
        """Evaluate ``window``, write its evaluation and the report data, and move on."""
        rule = self.rule
        if self.finished or rule is None:
            return
        started_at, started = time.time(), time.perf_counter()
        try:
            fired = rule.evaluate(window)
        except Exception as error:
            rule.take_evidence()
            detail = describe_failure(error)
            for report in rule.reports():
                report.error = report.error or detail
            self._write_reports(rule)
            self.finish(
                ERROR,
                f"{self.definition.rule_to_invoke} failed in window {window.index}: {detail}",
            )
            return
        self.windows += 1
        self.next_start_us = window.end_us
        evaluation = Evaluation(
            step=window.index,
            mode=None,
            mode_step=None,
            result=ISSUES_FOUND if fired else NO_ISSUES_FOUND,
            evidence=tuple(rule.take_evidence()),
            seconds=time.perf_counter() - started,
            time=started_at,
        )
        self._write_reports(rule)
        line = evaluation.to_json()
        line.update(window_start_us=window.start_us, window_end_us=window.end_us)
        self._write_evaluation(window.index, line)
        if self.on_evaluation is not None and not self._written_before(window.index):
            self.on_evaluation(evaluation)
        self.verdict.steps_evaluated += 1
        if fired:
            self.verdict.issues.append(evaluation)
            if len(self.verdict.issues) == 1:
                self._first_issue(evaluation)
            else:
                self._set_status(ISSUES_FOUND, self._details())
        elif not self.verdict.issues:
            self._set_status(IN_PROGRESS, self._progress())

    def _progress(self) -> str:
        """What an InProgress status says: how far the evaluation got, and when it goes on."""
        seconds = self.scan_interval_us / 1e6
        return (
            f"evaluating {self.profiler_output_dir}: {self.windows} window(s) evaluated; the next "
            f"once its {seconds:g} s of data are complete, the last at the job's end"
        )

    def conclude(self) -> None:
        """The job has ended and every window is evaluated: end with the verdict."""
        if self.finished:
            return
        if not self.windows:
            self.finish(ERROR, f"no profiler data to evaluate at {self.profiler_output_dir}")
        elif self.verdict.issues:
            self.finish(ISSUES_FOUND, self._details())
        else:
            self.finish(NO_ISSUES_FOUND, self._details())

    def _first_issue(self, evaluation: Evaluation) -> None:
        self._set_status(ISSUES_FOUND, self._details())
        notice = Notice(
            rule=self.definition.name,
            trial_path=self.profiler_output_dir,
            step=None,
            evidence=evaluation.evidence,
        )
        self._run_actions(notice, evaluation, "window")

    def _details(self) -> str:
        rule = self.rule
        name = self.definition.rule_to_invoke
        if rule is None:
            return name
        if isinstance(rule, ProfilerReport):
            fired = rule.triggered_rules()
            text = f"{name} evaluated {self.windows} window(s)"
            if fired:
                listed = ", ".join(
                    f"{found.rule_name} ({found.report.rule_triggered} window(s))"
                    for found in fired
                )
                text += f"; {len(fired)} of {len(rule.rules)} rules found issues: {listed}"
            else:
                text += f" with {len(rule.rules)} rules and found no issue"
            if rule.failed:
                text += "; failed: " + ", ".join(rule.failed)
            return text
        triggered = rule.report.rule_triggered
        text = f"{name} fired in {triggered} of {self.windows} window(s)"
        if not triggered:
            text = f"{name} evaluated {self.windows} window(s) and found no issue"
        return f"{text}: {rule.report.recommendation}"

    def _write_reports(self, rule: WindowRule) -> None:
        if self.output_dir is None:
            return
        for report in rule.reports():
            data = json.dumps(report.to_json(), indent=2, allow_nan=False) + "\n"
            files.write_atomic(rule_report_file(self.output_dir, report.rule), data.encode())

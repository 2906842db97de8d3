"""``RuleEvaluator``: one rule's evaluation of one job, step by step, and its output.

The runner (``trainprobe.rules.runner``) follows the job and hands each saved step to every
evaluator; the evaluator decides whether its rule wants the step (its modes, start_step,
end_step), evaluates it, writes the evaluation, and ends its rule's run with a status:

- IssuesFound when the condition is met (built-in rules stop at the first issue, as on
  SageMaker, unless ``every_step``; custom rules go on, as smdebug's ``invoke_rule`` does);
- NoIssuesFound when every step is read, at least one tensor was checked at one step, and no
  issue was found;
- Error when the rule fails (what failed and where: for a custom rule, the line in the user's
  file), or when it checked no tensor at all (the reason says what it looked for, what the job
  saved, and what to configure to save what it needs);
- Stopping, then Stopped, when stopped.

A step the rule cannot judge (a tensor not saved at it, or InsufficientInformationForRuleInvocation)
is skipped. Every status counts the steps evaluated and skipped and names the patterns that
matched nothing (while in progress, refreshed at most every ``PROGRESS_SECONDS``). When the
rule first finds an issue, the status is written first and the actions
run after; their outcomes are recorded and never change the verdict.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from trainprobe.analysis.exceptions import (
    NoMoreData,
    ShapeUnavailableForStep,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from trainprobe.analysis.trial import Trial
from trainprobe.config import catalogue
from trainprobe.config.errors import ConfigError
from trainprobe.rules.actions import Notice, RuleActions
from trainprobe.rules.actions.stop_training import StopTrainingCallback
from trainprobe.rules.custom import CustomRuleError
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.failure import describe_failure
from trainprobe.rules.missing_data import (
    FUNCTIONAL_ACTIVATIONS,
    mentions_activations,
    nothing_checked,
)
from trainprobe.rules.rule import (
    InsufficientInformationForRuleInvocation,
    Rule,
    RuleEvaluationConditionMet,
    counted,
    coverage,
    take_evidence,
)
from trainprobe.rules.rule_run import RuleRun
from trainprobe.rules.verdict import (
    ERROR,
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    SKIPPED,
    STOPPED,
    Evaluation,
)
from trainprobe.storage.modes import ModeKeys, step_in_words

__all__ = ["RuleEvaluator"]

log = logging.getLogger(__name__)

PROGRESS_SECONDS = 1.0
"""How often, at most, an InProgress status is rewritten with new counts."""

# The trial's "this step cannot be read" errors: the step is skipped, as smdebug's invoker does.
_STEP_NOT_JUDGED = (
    TensorUnavailable,
    TensorUnavailableForStep,
    ShapeUnavailableForStep,
    StepUnavailable,
    NoMoreData,
)


class RuleEvaluator(RuleRun):
    """One rule, evaluated on the job at ``trial_path``; writes into ``output_dir`` (its own
    directory, ``<job>/rule-output/<name>``; None writes nothing)."""

    def __init__(
        self,
        definition: RuleDefinition,
        trial_path: str,
        *,
        output_dir: str | None = None,
        every_step: bool | None = None,
        on_stop_training: StopTrainingCallback | None = None,
        on_evaluation: Callable[[Evaluation], None] | None = None,
    ) -> None:
        super().__init__(definition.name, output_dir)
        self.definition = definition
        self.trial_path = trial_path
        self.every_step = (not definition.builtin) if every_step is None else bool(every_step)
        self.on_stop_training = on_stop_training
        self.on_evaluation = on_evaluation
        self.rule: Rule | None = None
        self._last_unjudged: str | None = None
        self._steps_in_modes = 0
        self._last_step: tuple[int, ModeKeys | None, int | None] | None = None
        self._progress_at = 0.0

    @property
    def status(self) -> str:
        """The current status."""
        return self.verdict.status

    # ----- life cycle -------------------------------------------------------------------

    def begin(self) -> None:
        """Say the rule is waiting for data, and check its actions."""
        self._set_status(IN_PROGRESS, f"waiting for tensors at {self.trial_path}")
        try:
            self._actions = RuleActions.from_config(
                self.definition.actions,
                out_dir=self.trial_path,
                on_stop_training=self.on_stop_training,
            )
        except ConfigError as error:
            self.finish(ERROR, f"ConfigError: {error}")

    def start(self, trial: Trial, other_trials: Sequence[Trial] = ()) -> None:
        """Build the rule for ``trial``; a rule that cannot be built ends in Error."""
        if self.finished:
            return
        try:
            self.rule = self.definition.build(trial, other_trials)
        except CustomRuleError as error:
            self.finish(ERROR, str(error))
            return
        except ConfigError as error:
            self.finish(ERROR, f"ConfigError: {error}")
            return
        except Exception as error:
            detail = describe_failure(error)
            self.finish(ERROR, f"{self.definition.rule_to_invoke} could not be built: {detail}")
            return
        action_str = getattr(self.rule, "action_str", None)
        if not len(self._actions) and isinstance(action_str, str) and action_str.strip():
            # smdebug's rules carry their actions themselves: Rule(base_trial, action_str).
            try:
                self._actions = RuleActions.from_config(
                    action_str,
                    out_dir=self.trial_path,
                    on_stop_training=self.on_stop_training,
                )
            except ConfigError as error:
                self.finish(ERROR, f"the rule's action_str: ConfigError: {error}")
                return
        self._set_status(IN_PROGRESS, f"evaluating {self.trial_path}")

    def finish_stopped(self, why: str) -> None:
        """End the run as Stopped, saying how far it got."""
        self._count_coverage()
        text = f"{why}: {self._counts()}"
        if self.verdict.issues:
            text += f"; issues found at {self.verdict.issues[0].where}"
        self.finish(STOPPED, text)

    # ----- one step ---------------------------------------------------------------------

    def consider(self, trial: Trial, step: int, steps_seen: int) -> None:
        """Evaluate ``step`` if the rule wants it; ends the run when the verdict is known."""
        rule = self.rule
        if self.finished or rule is None:
            return
        definition = self.definition
        if definition.start_step is not None and step < definition.start_step:
            return
        if definition.end_step is not None and step >= definition.end_step:
            self.conclude(steps_seen)
            return
        mode, mode_step = trial.mode_modestep(step)
        if rule.modes is not None and mode not in rule.modes:
            return
        self._steps_in_modes += 1
        self._last_step = (step, mode, mode_step)
        evaluated = self._evaluate(rule, step, mode, mode_step)
        if evaluated is None:
            return
        self._take(*evaluated, steps_seen)

    def check_idle(self, trial: Trial, last_step: int | None, steps_seen: int) -> None:
        """While no new step arrives: a rule that watches for stalls (``check_progress``, as
        StalledTrainingRule has) is asked whether the job has gone quiet for too long."""
        rule = self.rule
        check = getattr(rule, "check_progress", None)
        if self.finished or rule is None or not callable(check):
            return
        started_at = time.time()
        try:
            stalled = bool(check())
        except Exception as error:
            take_evidence(rule)
            detail = describe_failure(error, prefer_file=self.definition.user_file)
            self._fail(f"{self.definition.rule_to_invoke} failed: {detail}")
            return
        if not stalled:
            return
        mode, mode_step = (None, None) if last_step is None else trial.mode_modestep(last_step)
        evaluation = Evaluation(
            step=-1 if last_step is None else last_step,
            mode=mode,
            mode_step=mode_step,
            result=ISSUES_FOUND,
            evidence=tuple(take_evidence(rule)),
            reason=None,
            seconds=0.0,
            time=started_at,
        )
        self._take(evaluation, False, steps_seen)

    def _take(self, evaluation: Evaluation, end_of_rule: bool, steps_seen: int) -> None:
        """Record one evaluation and act on its result."""
        self._write_evaluation(evaluation.step, evaluation.to_json())
        if self.on_evaluation is not None and not self._written_before(evaluation.step):
            self.on_evaluation(evaluation)
        if evaluation.result == SKIPPED:
            self.verdict.steps_skipped += 1
            self._progress()
            return
        self.verdict.steps_evaluated += 1
        self._progress()
        if evaluation.result == ISSUES_FOUND:
            self.verdict.issues.append(evaluation)
            if len(self.verdict.issues) == 1:
                self._first_issue(evaluation)
            if not self.every_step or end_of_rule:
                self.finish(ISSUES_FOUND, self._issue_details())
        elif end_of_rule:
            self.conclude(steps_seen)

    def _progress(self) -> None:
        """Refresh the InProgress status with the counts so far (at most every second)."""
        now = time.monotonic()
        if self.finished or self.verdict.issues or now - self._progress_at < PROGRESS_SECONDS:
            return
        self._progress_at = now
        self._count_coverage()
        self._set_status(IN_PROGRESS, f"evaluating {self.trial_path}: {self._counts()}")

    def _count_coverage(self) -> None:
        if self.rule is None:
            return
        seen = coverage(self.rule)
        self.verdict.tensors_checked = len(seen.tensors_read)
        self.verdict.unmatched = [lookup.describe() for lookup in seen.unmatched()]

    def _counts(self, reason: bool = True) -> str:
        """The counts every status carries: steps evaluated and skipped (with the last
        reason unless not ``reason``), tensors checked, patterns that matched nothing."""
        verdict = self.verdict
        text = (
            f"{verdict.steps_evaluated} step(s) evaluated, {verdict.tensors_checked} tensor(s) "
            f"checked, {verdict.steps_skipped} step(s) skipped"
        )
        if verdict.steps_skipped and self._last_unjudged and reason:
            text += f" (last: {self._last_unjudged})"
        if verdict.unmatched:
            text += f"; matched nothing: {'; '.join(verdict.unmatched)}"
        return text

    def _evaluate(
        self, rule: Rule, step: int, mode: ModeKeys | None, mode_step: int | None
    ) -> tuple[Evaluation, bool] | None:
        started_at = time.time()
        started = time.perf_counter()
        result: str = NO_ISSUES_FOUND
        reason, end_of_rule = None, False
        try:
            if rule.evaluate(step):
                result = ISSUES_FOUND
        except RuleEvaluationConditionMet as met:
            result, end_of_rule = ISSUES_FOUND, met.end_of_rule
        except InsufficientInformationForRuleInvocation as error:
            result, reason = SKIPPED, error.message
            self._last_unjudged = reason
        except _STEP_NOT_JUDGED as error:
            result, reason = SKIPPED, str(error)
            self._last_unjudged = reason
        except ConfigError as error:
            take_evidence(rule)
            self._fail(self._config_error_details(error, step_in_words(step, mode, mode_step)))
            return None
        except Exception as error:
            take_evidence(rule)
            detail = describe_failure(error, prefer_file=self.definition.user_file)
            where = step_in_words(step, mode, mode_step)
            self._fail(f"{self.definition.rule_to_invoke} failed at {where}: {detail}")
            return None
        evaluation = Evaluation(
            step=step,
            mode=mode,
            mode_step=mode_step,
            result=result,
            evidence=tuple(take_evidence(rule)),
            reason=reason,
            seconds=time.perf_counter() - started,
            time=started_at,
        )
        return evaluation, end_of_rule

    def _fail(self, text: str) -> None:
        """End in Error with ``text`` and the counts so far."""
        self._count_coverage()
        self.finish(ERROR, f"{text} ({self._counts()})")

    def _first_issue(self, evaluation: Evaluation) -> None:
        self._set_status(ISSUES_FOUND, self._issue_details())
        notice = Notice(
            rule=self.definition.name,
            trial_path=self.trial_path,
            step=evaluation.step,
            evidence=evaluation.evidence,
            where=evaluation.where,
        )
        self._run_actions(notice, evaluation, "step")

    # ----- the end ----------------------------------------------------------------------

    def conclude(self, steps_seen: int) -> None:
        """Every step is read: end with the verdict (Error when no step could be judged)."""
        if self.finished:
            return
        self._judge_end(steps_seen)
        if self.finished:
            return
        verdict, name = self.verdict, self.definition.rule_to_invoke
        self._count_coverage()
        rule = self.rule
        reads = rule is None or getattr(rule, "reads_tensors", True)
        if verdict.issues:
            self.finish(ISSUES_FOUND, self._issue_details())
        elif verdict.steps_evaluated > 0 and (verdict.tensors_checked > 0 or not reads):
            text = f"{name} found no issue: {self._counts()}"
            if verdict.unmatched and mentions_activations(" ".join(verdict.unmatched)):
                text += f". {FUNCTIONAL_ACTIVATIONS}"
            self.finish(NO_ISSUES_FOUND, text)
        elif verdict.steps_evaluated > 0 or self._last_unjudged is not None:
            self.finish(ERROR, self._nothing_checked())
        elif self._steps_in_modes == 0 and steps_seen > 0:
            self.finish(ERROR, self._no_step_in_range(steps_seen))
        else:
            self.finish(ERROR, no_steps_message(self.trial_path))

    def _judge_end(self, steps_seen: int) -> None:
        """Every step is read: a rule that judges what only the end completes (a built-in loss
        rule's last evaluation pass, ``judge_at_end``) judges it now, as one more evaluation of
        the last step it was handed, or of the step its first evidence names where that is later
        (the hook's record of every step reaches past the saved steps). It returns None when
        there was nothing left to judge."""
        rule, last = self.rule, self._last_step
        judge = getattr(rule, "judge_at_end", None)
        if rule is None or last is None or not callable(judge):
            return
        started_at, started = time.time(), time.perf_counter()
        try:
            with counted(rule):
                judged = judge()
        except InsufficientInformationForRuleInvocation as error:
            self._last_unjudged = error.message  # what it waits for, as of the end
            return
        except Exception as error:
            take_evidence(rule)
            detail = describe_failure(error, prefer_file=self.definition.user_file)
            self._fail(f"{self.definition.rule_to_invoke} failed at the training's end: {detail}")
            return
        if judged is None:
            return
        step, mode, mode_step = last
        evidence = tuple(take_evidence(rule))
        later = [item for item in evidence if item.step is not None and item.step > step]
        if later:
            step, mode, mode_step = later[0].step or step, later[0].mode, later[0].mode_step
        evaluation = Evaluation(
            step=step,
            mode=mode,
            mode_step=mode_step,
            result=ISSUES_FOUND if judged else NO_ISSUES_FOUND,
            evidence=evidence,
            seconds=time.perf_counter() - started,
            time=started_at,
        )
        self._take(evaluation, False, steps_seen)

    def _nothing_checked(self) -> str:
        rule = self.rule
        seen = coverage(rule) if rule is not None else None
        looked_for = seen.unmatched() if seen is not None else []
        trial = rule.base_trial if rule is not None else None
        collections: list[str] = []
        if self.definition.builtin:
            with contextlib.suppress(ConfigError):
                spec = catalogue.get(self.definition.rule_to_invoke)
                collections = [need.name for need in spec.collections]
        text = nothing_checked(
            self.definition.rule_to_invoke,
            trial,
            looked_for,
            self._last_unjudged,
            collections=[name for name in collections if name not in ("losses",)],
        )
        return f"{text} ({self._counts(reason=not looked_for)})"

    def _no_step_in_range(self, steps_seen: int) -> str:
        name, definition = self.definition.rule_to_invoke, self.definition
        modes = self.rule.modes if self.rule is not None else None
        if modes is not None:
            wanted = ", ".join(mode.name for mode in modes)
            return (
                f"{name} evaluates {wanted} steps, and the job saved none of them "
                f"({steps_seen} step(s) of other modes or out of range). Save them: call the "
                "hook's set_mode() in that phase, with a save config that covers it."
            )
        return (
            f"The job saved no step from start_step {definition.start_step} to end_step "
            f"{definition.end_step} ({steps_seen} step(s) outside that range)."
        )

    def _issue_details(self) -> str:
        first = self.verdict.issues[0]
        text = f"{self.definition.rule_to_invoke} found an issue at {first.where}"
        if first.evidence:
            text += ": " + "; ".join(item.describe() for item in first.evidence[:3])
        if len(self.verdict.issues) > 1:
            text += f" (issues at {len(self.verdict.issues)} steps in all)"
        self._count_coverage()
        return f"{text} ({self._counts()})"

    def _config_error_details(self, error: ConfigError, where: str) -> str:
        name = self.definition.rule_to_invoke
        if error.field == "collection" and isinstance(error.value, str):
            return (
                f"{name} needs the collection {error.value!r}, which the job does not save: "
                f"save it with CollectionConfig({error.value!r}) ({error})"
            )
        return f"{name} failed at {where}: ConfigError: {error}"


def no_steps_message(trial_path: str, waited: float | None = None) -> str:
    """Why a rule has nothing to evaluate: the job saved no step (within ``waited`` seconds)."""
    if waited is not None:
        return (
            f"The job at {trial_path} saved no step within {waited:g} s (it wrote its "
            "collections file, but no step yet). Check the hook's save_config, or allow a "
            "longer wait."
        )
    return (
        f"The job at {trial_path} saved no step. Check the hook's save_config and that the "
        "model's forward ran with the hook registered."
    )

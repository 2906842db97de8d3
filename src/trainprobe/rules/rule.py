"""``Rule``: the base class of every rule, built-in or custom (smdebug's custom-rule API).

A rule looks at the tensors of a trial, one saved step at a time, and says whether its
condition is met. Subclass it and implement ``invoke_at_step``; the runner
(``trainprobe.rules.runner``) feeds it the saved steps in order, one instance for the whole
job, so state kept on ``self`` carries from step to step::

    from trainprobe.rules import Rule

    class ImproperActivation(Rule):
        def __init__(self, base_trial, threshold="10.0"):
            super().__init__(base_trial, other_trials=None)
            self.threshold = float(threshold)

        def invoke_at_step(self, step):
            for name in self.base_trial.tensor_names(regex=".*relu_output"):
                value = self.base_trial.tensor(name).reduction_value(step, "mean")
                if value > self.threshold:
                    self.record(message="mean activation too high", tensor=name,
                                step=step, value=value, threshold=self.threshold)
                    return True
            return False

``record`` keeps the evidence of the evaluation in progress (which tensor, its value, the
threshold); the runner writes it next to the verdict. A rule that cannot judge a step yet
raises ``InsufficientInformationForRuleInvocation`` with a message that says what is missing;
the runner skips the step, and reports the message if no step could ever be judged.

``Rule.invoke(step)`` and ``RuleEvaluationConditionMet`` keep smdebug's way of calling a rule
by hand working.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

from trainprobe.analysis.exceptions import TensorUnavailable
from trainprobe.analysis.read_log import ReadLog
from trainprobe.analysis.tensor import Tensor
from trainprobe.analysis.trial import Trial
from trainprobe.errors import RuleError
from trainprobe.storage.modes import ModeKeys, step_in_words

__all__ = [
    "Evidence",
    "InsufficientInformationForRuleInvocation",
    "RequiredTensors",
    "RequiredTensorsForTrial",
    "Rule",
    "RuleEvaluationConditionMet",
    "counted",
    "coverage",
    "json_ready",
    "no_refresh",
    "refresh",
    "take_evidence",
]

_LARGEST_LISTED_ARRAY = 16


class RuleEvaluationConditionMet(RuleError):
    """Raised by ``Rule.invoke`` when the rule's condition is met at ``step``.

    ``end_of_rule=True`` says no later step needs evaluating.
    """

    def __init__(self, rule_name: str, step: int, end_of_rule: bool = False) -> None:
        self.rule_name = rule_name
        self.step = step
        self.end_of_rule = end_of_rule
        super().__init__(
            f"Evaluation of the rule {rule_name} at step {step} resulted in the condition being met"
        )


class InsufficientInformationForRuleInvocation(RuleError):
    """A rule cannot judge this step: the data it needs is not there (yet).

    Raise it as ``InsufficientInformationForRuleInvocation(message)`` (or smdebug's
    ``(rule_name, message)``), with a message that tells the user what to save, e.g. "no tensors
    in collection gradients: save it with CollectionConfig('gradients')". The runner skips the
    step; if the rule could not judge any step by the end of the training, the rule ends in
    Error with this message.
    """

    def __init__(self, *args: str) -> None:
        if len(args) >= 2:
            self.rule_name: str | None = args[0]
            self.message = args[1]
        else:
            self.rule_name = None
            self.message = args[0] if args else "not enough data to evaluate the rule"
        super().__init__(self.message)

    def __str__(self) -> str:
        if self.rule_name:
            return f"Insufficient information to invoke rule {self.rule_name}: {self.message}"
        return self.message


@dataclass(frozen=True)
class Evidence:
    """What a rule saw while evaluating a step: a message and, where known, the tensor, the step
    (global, with its mode and the mode's step), its value and the threshold it was compared
    with (values already JSON-ready)."""

    message: str
    tensor: str | None = None
    step: int | None = None
    value: object = None
    threshold: object = None
    mode: ModeKeys | None = None
    mode_step: int | None = None

    def to_json(self) -> dict[str, object]:
        """The evidence as a JSON object; absent fields are left out."""
        found: dict[str, object] = {"message": self.message}
        for key in ("tensor", "step", "value", "threshold", "mode_step"):
            item = getattr(self, key)
            if item is not None:
                found[key] = item
        if self.mode is not None:
            found["mode"] = self.mode.name
        return found

    def describe(self) -> str:
        """One line for people: ``message (tensor X at TRAIN step 3: value 1e-09, threshold
        1e-07)``; what the message already says is not repeated."""
        said = self.message
        parts = []
        if self.tensor is not None and self.tensor not in said:
            parts.append(f"tensor {self.tensor}")
        if self.step is not None and f"step {self.step}" not in said:
            parts.append(f"at {step_in_words(self.step, self.mode, self.mode_step)}")
        numbers = []
        for label, item in (("value", self.value), ("threshold", self.threshold)):
            if item is not None and not any(text in said for text in _spellings(item)):
                numbers.append(f"{label} {_short(item)}")
        where = " ".join(parts)
        if numbers:
            where = f"{where}: {', '.join(numbers)}" if where else ", ".join(numbers)
        return f"{said} ({where})" if where else said


def _short(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _spellings(value: object) -> tuple[str, ...]:
    """How a message may already spell ``value``: as ``_short`` does, as it is, and for a float
    to the 4 significant digits the built-in rules' messages use."""
    if isinstance(value, float):
        return (_short(value), str(value), f"{value:.4g}")
    return (_short(value), str(value))


def json_ready(value: object) -> object:
    """``value`` as plain JSON data: numpy scalars become numbers, small arrays lists, large
    arrays a summary (shape, min, max, mean), and NaN/infinity the strings "nan", "inf", "-inf"
    (strict JSON readers refuse the bare words)."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.generic):
        return json_ready(value.item())
    if isinstance(value, np.ndarray):
        if value.size <= _LARGEST_LISTED_ARRAY:
            return json_ready(value.tolist())
        summary: dict[str, object] = {"shape": list(value.shape), "dtype": str(value.dtype)}
        if np.issubdtype(value.dtype, np.number):
            as_float = value.astype(np.float64, copy=False)
            summary.update(
                min=json_ready(float(np.min(as_float))),
                max=json_ready(float(np.max(as_float))),
                mean=json_ready(float(np.mean(as_float))),
            )
        return summary
    if isinstance(value, dict):
        return {str(key): json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_ready(item) for item in value]
    if isinstance(value, ModeKeys):
        return value.name
    return str(value)


_Trials = TypeVar("_Trials", Trial, list[Trial], Sequence[Trial])


def _each(trials: Trial | Iterable[Trial]) -> list[Trial]:
    return [trials] if isinstance(trials, Trial) else list(trials)


@contextlib.contextmanager
def _dynamic_refresh(trials: _Trials, on: bool) -> Iterator[_Trials]:
    saved = [(trial, trial.dynamic_refresh) for trial in _each(trials)]
    for trial, _ in saved:
        trial.dynamic_refresh = on
    try:
        yield trials
    finally:
        for trial, before in saved:
            trial.dynamic_refresh = before


def no_refresh(trials: _Trials) -> contextlib.AbstractContextManager[_Trials]:
    """Within the block, the trials (one or a list) answer from what they have read: no
    re-listing of files. ``with no_refresh(trial) as t:`` gives back what it was given.

    A rule sees the same steps from the start to the end of one evaluation, and a step is not
    paid for with a directory listing per query.
    """
    return _dynamic_refresh(trials, False)


def refresh(trials: _Trials) -> contextlib.AbstractContextManager[_Trials]:
    """Within the block, the trials (one or a list) look for new steps at every query."""
    return _dynamic_refresh(trials, True)


class RequiredTensorsForTrial:
    """The tensors (and their steps) a rule declared it needs from one trial."""

    def __init__(self, trial: Trial) -> None:
        self.trial = trial
        self._steps: dict[str, list[int]] = {}
        self._tensors: dict[str, Tensor] = {}

    def add(self, name: str, steps: Sequence[int], should_match_regex: bool = False) -> None:
        """Need ``name`` (or every tensor matching it, as a regex) at ``steps``.

        Raises TensorUnavailable for an exact name the trial has never saved.
        """
        if should_match_regex:
            names = self.trial.tensor_names(regex=[name])
        else:
            if not self.trial.has_tensor(name):
                raise TensorUnavailable(name)
            names = [name]
        for found in names:
            self._steps.setdefault(found, []).extend(steps)
            if found not in self._tensors:
                self._tensors[found] = self.trial.tensor(found)

    def get_tensor_steps(self, name: str) -> list[int]:
        """The steps ``name`` is needed at."""
        return self._steps[name]

    def get_names(self) -> list[str]:
        """The names of the tensors needed."""
        return list(self._steps)

    def get(self) -> list[Tensor]:
        """The tensors needed."""
        return list(self._tensors.values())

    def clear(self) -> None:
        """Forget every requirement (done before each step)."""
        self._steps.clear()
        self._tensors.clear()

    def fetch(self) -> None:
        """Wait until every needed step is written, then read each needed value once.

        Raises what the trial raises: StepUnavailable or NoMoreData for a step that will never
        come, TensorUnavailableForStep for a value that was not saved at a step.
        """
        needed = sorted({step for steps in self._steps.values() for step in steps})
        if needed:
            with refresh(self.trial):
                self.trial.wait_for_steps(needed)
        for name, steps in self._steps.items():
            for step in steps:
                self._tensors[name].value(step)


class RequiredTensors:
    """The tensors a rule needs, per trial; fill it in ``Rule.set_required_tensors``."""

    def __init__(self, base_trial: Trial, other_trials: Sequence[Trial] | None = None) -> None:
        self.base_trial = base_trial
        trials = [base_trial, *(other_trials or [])]
        self._per_trial = {id(trial): RequiredTensorsForTrial(trial) for trial in trials}

    def _for(self, trial: Trial | None) -> RequiredTensorsForTrial:
        chosen = self.base_trial if trial is None else trial
        found = self._per_trial.get(id(chosen))
        if found is None:
            found = self._per_trial[id(chosen)] = RequiredTensorsForTrial(chosen)
        return found

    def add(
        self,
        name: str,
        steps: Sequence[int],
        trial: Trial | None = None,
        should_match_regex: bool = False,
    ) -> None:
        """Need ``name`` at ``steps`` from ``trial`` (the base trial by default)."""
        self._for(trial).add(name, steps, should_match_regex=should_match_regex)

    def get_tensor_steps(self, name: str, trial: Trial | None = None) -> list[int]:
        """The steps ``name`` is needed at."""
        return self._for(trial).get_tensor_steps(name)

    def get_names(self, trial: Trial | None = None) -> list[str]:
        """The names of the tensors needed from ``trial``."""
        return self._for(trial).get_names()

    def get(self, trial: Trial | None = None) -> list[Tensor]:
        """The tensors needed from ``trial``."""
        return self._for(trial).get()

    def clear(self) -> None:
        """Forget every requirement, for every trial."""
        for required in self._per_trial.values():
            required.clear()

    def fetch(self) -> None:
        """Wait for and read everything required, trial by trial."""
        for required in self._per_trial.values():
            required.fetch()


class Rule(abc.ABC):
    """The base class of rules: implement ``invoke_at_step(step) -> bool``.

    ``base_trial`` is the job being watched; ``other_trials`` are trials to compare with. The
    documented SageMaker template, ``super().__init__(base_trial, other_trials=None)``, works;
    so does smdebug's ``super().__init__(base_trial, action_str, other_trials)``. ``action_str``
    (the SDK's ``action_json``) is what to do when the rule fires; the runner carries it out.

    ``modes`` (a class attribute) names the modes whose saved steps the runner feeds the rule;
    None feeds every saved step, in global-step order. Steps passed to ``invoke_at_step`` are
    always global steps.
    """

    modes: ClassVar[tuple[ModeKeys, ...] | None] = None
    reads_tensors: ClassVar[bool] = True
    """Whether the rule judges tensors. A rule that does (every built-in debugging rule, every
    custom rule unless it says otherwise) passes only after reading at least one tensor."""

    def __init__(
        self,
        base_trial: Trial,
        other_trials: Sequence[Trial] | str | None = None,
        action_str: str | Sequence[Trial] | None = "",
    ) -> None:
        # smdebug's order was (base_trial, action_str, other_trials): accept it too.
        if isinstance(other_trials, str):
            other_trials, action_str = (
                None if isinstance(action_str, str) else action_str,
                other_trials,
            )
        self.base_trial = base_trial
        self.other_trials: list[Trial] = list(other_trials or [])
        self.trials: list[Trial] = [base_trial, *self.other_trials]
        self.action_str: str = action_str if isinstance(action_str, str) else ""
        self.rule_name: str = type(self).__name__
        self.req_tensors = RequiredTensors(base_trial, self.other_trials)
        self.logger = logging.getLogger(f"trainprobe.rules.{self.rule_name}")
        # smdebug's profiler rules fill this in; the report reads it.
        self.report: dict[str, Any] = {
            "RuleTriggered": 0,
            "Violations": 0,
            "Details": {},
            "Datapoints": 0,
            "RuleParameters": "",
        }
        self._evidence: list[Evidence] = []
        self.coverage = ReadLog()

    def set_required_tensors(self, step: int) -> None:  # noqa: B027 (optional, as in smdebug)
        """Optionally declare, through ``self.req_tensors.add``, what ``step`` needs: the runner
        waits for it and reads it before ``invoke_at_step``."""

    @abc.abstractmethod
    def invoke_at_step(self, step: int) -> bool:
        """Whether the rule's condition is met at global ``step``."""

    def record(
        self,
        *,
        message: str,
        tensor: str | None = None,
        step: int | None = None,
        value: object = None,
        threshold: object = None,
    ) -> None:
        """Keep evidence of the evaluation in progress: the runner writes it into the rule's
        output with the step's result, and the verdict shows it."""
        if "_evidence" not in self.__dict__:
            self._evidence = []
        mode, mode_step = (None, None) if step is None else self._mode_modestep(int(step))
        self._evidence.append(
            Evidence(
                message=str(message),
                tensor=tensor,
                step=None if step is None else int(step),
                value=json_ready(value),
                threshold=json_ready(threshold),
                mode=mode,
                mode_step=mode_step,
            )
        )

    def step_words(self, step: int) -> str:
        """Global ``step`` of the base trial as the training counts it, for a message:
        ``TRAIN step 10 (step 20)`` (``trainprobe.storage.modes.step_in_words``)."""
        return step_in_words(step, *self._mode_modestep(step))

    def _mode_modestep(self, step: int) -> tuple[ModeKeys | None, int | None]:
        trial = self.__dict__.get("base_trial")
        if not isinstance(trial, Trial):
            return None, None
        return trial.mode_modestep(step)

    def evaluate(self, step: int) -> bool:
        """Evaluate the rule at ``step``, a step known to be written: declare and fetch the
        required tensors, then ``invoke_at_step``, without re-listing the trials' files."""
        log, seen = ReadLog(), coverage(self)
        try:
            with no_refresh(self.trials), _watching(self.trials, log):
                self.req_tensors.clear()
                self.set_required_tensors(step)
                self.req_tensors.fetch()
                result = bool(self.invoke_at_step(step))
        except RuleEvaluationConditionMet:
            raise
        except BaseException:
            # A step that could not be judged checked nothing, but what it looked for counts.
            log.tensors_read.clear()
            raise
        finally:
            seen.merge(log)
        return result

    def invoke(self, step: int) -> None:
        """smdebug's call: wait for ``step``, evaluate, and raise RuleEvaluationConditionMet when
        the condition is met. Actions are carried out by the runner, not here."""
        self.base_trial.wait_for_steps([step])
        if self.evaluate(step):
            raise RuleEvaluationConditionMet(self.rule_name, step)


@contextlib.contextmanager
def _watching(trials: Iterable[Trial], log: ReadLog) -> Iterator[None]:
    saved = [(trial, trial.read_log) for trial in trials]
    for trial, _ in saved:
        trial.read_log = log
    try:
        yield
    finally:
        for trial, before in saved:
            trial.read_log = before


def coverage(rule: Rule) -> ReadLog:
    """What ``rule`` has read and looked for over its run (only steps it could judge count)."""
    found = rule.__dict__.get("coverage")
    if not isinstance(found, ReadLog):
        found = rule.coverage = ReadLog()
    return found


@contextlib.contextmanager
def counted(rule: Rule) -> Iterator[None]:
    """What ``rule`` reads and looks for within counts in its coverage, as within ``evaluate``
    (for what it judges outside a step: at the training's end)."""
    log, seen = ReadLog(), coverage(rule)
    try:
        with no_refresh(rule.trials), _watching(rule.trials, log):
            yield
    finally:
        seen.merge(log)


def take_evidence(rule: Rule) -> list[Evidence]:
    """The evidence ``rule`` recorded since the last call (the runner's side of ``record``)."""
    found = rule.__dict__.get("_evidence") or []
    rule._evidence = []
    return list(found)

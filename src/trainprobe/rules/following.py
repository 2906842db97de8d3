"""What both rule runners do around following a job: start every rule, stop them on request or
at Ctrl-C, end them all in Error when the job's data cannot be read, and give the verdicts.

``RuleRunner`` (debugging rules, step by step) and ``ProfilerRuleRunner`` (profiler rules,
window by window) each bring their own ``_follow`` and say which failures end every rule.
``on_progress``, when set, is called each time the following goes round (at least every poll
interval, and after each step or window): a job's runner learns from it that the rules are not
stuck (``trainprobe.jobs.processes.rule_heartbeat``). ``take_up`` continues the runs of rules that
an earlier process left unfinished.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from trainprobe.config.errors import ConfigError
from trainprobe.config.statuses import RuleEvaluationStatus
from trainprobe.rules.verdict import ERROR, Evaluation, Verdict

__all__ = ["FollowedRule", "RuleFollowing", "check_unique_names", "for_rule", "rule_directory"]


class FollowedRule(Protocol):
    """One rule's run, as the runners drive it (``trainprobe.rules.rule_run.RuleRun``)."""

    finished: bool
    verdict: Verdict

    def take_up(self) -> None: ...
    def begin(self) -> None: ...
    def stop(self) -> None: ...
    def finish(self, status: RuleEvaluationStatus, details: str) -> None: ...
    def finish_stopped(self, why: str) -> None: ...


Run = TypeVar("Run", bound=FollowedRule)


class RuleFollowing(Generic[Run]):
    """Runs ``evaluators`` over a job that ``_follow`` walks until every verdict is known."""

    def __init__(self, evaluators: list[Run]) -> None:
        self.evaluators = evaluators
        self._stop = threading.Event()
        self._why = "stopped on request"
        self.on_progress: Callable[[], None] | None = None

    def stop(self, why: str = "stopped on request") -> None:
        """Stop every rule (callable from another thread): Stopping now, Stopped soon after,
        saying ``why``."""
        self._why = why
        self._stop.set()
        for evaluator in self._active():
            evaluator.stop()

    def finish_unfinished(self, why: str) -> None:
        """End every rule still running as Stopped, saying ``why`` (callable from another
        thread: the last word of a process about to end)."""
        for evaluator in self._active():
            evaluator.finish_stopped(why)

    def take_up(self) -> None:
        """Take up the runs an earlier process began and did not finish (killed, out of
        memory): what it evaluated is evaluated again but not written again (``RuleRun``)."""
        for evaluator in self.evaluators:
            evaluator.take_up()

    def run(self) -> list[Verdict]:
        """Follow the job until every rule's verdict is known; the verdicts, in order."""
        for evaluator in self.evaluators:
            evaluator.begin()
        try:
            self._follow()
        except KeyboardInterrupt:
            for evaluator in self._active():
                evaluator.finish_stopped("interrupted")
        except Exception as error:
            reason = self._unreadable(error)
            if reason is None:
                raise
            for evaluator in self._active():
                evaluator.finish(ERROR, reason)
        return [evaluator.verdict for evaluator in self.evaluators]

    def _follow(self) -> None:
        raise NotImplementedError

    def _unreadable(self, error: Exception) -> str | None:
        """Why every rule ends in Error when following failed with ``error``; None lets it
        propagate."""
        return None

    def _active(self) -> list[Run]:
        return [evaluator for evaluator in self.evaluators if not evaluator.finished]

    def _stopped(self) -> bool:
        if self.on_progress is not None:
            self.on_progress()
        if not self._stop.is_set():
            return False
        for evaluator in self._active():
            evaluator.finish_stopped(self._why)
        return True


def check_unique_names(names: Sequence[str]) -> None:
    """ConfigError naming the first rule name (RuleConfigurationName) given to two rules."""
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError("RuleConfigurationName", duplicates[0], "a name used by one rule only")


def rule_directory(output_dir: str | None, name: str) -> str | None:
    """Where the rule ``name`` writes under a runner's ``output_dir`` (None: nowhere)."""
    return os.path.join(output_dir, name) if output_dir is not None else None


def for_rule(
    callback: Callable[[str, Evaluation], None] | None, name: str
) -> Callable[[Evaluation], None] | None:
    """``callback`` with the rule's name bound, for one rule's evaluator (None stays None)."""
    if callback is None:
        return None

    def call(evaluation: Evaluation) -> None:
        callback(name, evaluation)

    return call

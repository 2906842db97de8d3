"""``WindowRule``: the base class of every profiler rule.

A profiler rule reads a job window after window
(``trainprobe.rules.profiler_rules.window``), keeps what
it needs from one window to the next on ``self``, and says for each window whether it fired::

    class TooManySteps(WindowRule):
        rule_name = "..."                    # its name in the catalogue

        def evaluate_window(self, window):
            ...                              # update state, self.report, self.record(...)
            return fired

        def recommendation(self):
            return "what the user should change, in plain words"

Its parameters come from the catalogue (``trainprobe.config.catalogue``): the constructor takes them
as Python values or as the strings of ``RuleParameters``, fills in the defaults and raises
ConfigError naming ``<Rule>.<parameter>`` for a bad one. ``self.report`` (a ``RuleReport``) holds
the rule's report data; ``evaluate`` counts the windows and the windows in which the rule fired,
and refreshes the recommendation after each. ``record`` keeps evidence of the window in progress
for the verdict, as debugging rules do.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from trainprobe.config import catalogue
from trainprobe.rules.profiler_rules.report_data import RuleReport, json_safe
from trainprobe.rules.profiler_rules.window import Window
from trainprobe.rules.rule import Evidence

__all__ = ["WindowRule"]


class WindowRule(abc.ABC):
    """A profiler rule (see the module docstring)."""

    rule_name: ClassVar[str] = ""

    def __init__(self, **parameters: object) -> None:
        self.spec = catalogue.get(self.rule_name)
        self.parameters = self.spec.effective_parameters(parameters, field_prefix=self.rule_name)
        self.report = RuleReport(self.rule_name, self.spec.description, dict(self.parameters))
        self._evidence: list[Evidence] = []

    # ----- what each rule implements ---------------------------------------------------------

    @abc.abstractmethod
    def evaluate_window(self, window: Window) -> bool:
        """Take in one window; True when the rule fires in it."""

    @abc.abstractmethod
    def recommendation(self) -> str:
        """What the data so far says the user should do, in plain words."""

    # ----- what the evaluator calls ----------------------------------------------------------

    def evaluate(self, window: Window) -> bool:
        """Evaluate ``window`` and update the report; True when the rule fired in it."""
        fired = bool(self.evaluate_window(window))
        report = self.report
        report.windows += 1
        if report.first_window_start_us is None:
            report.first_window_start_us = window.start_us
        report.last_window_end_us = window.end_us
        if fired:
            report.rule_triggered += 1
        report.recommendation = self.recommendation()
        return fired

    def reports(self) -> list[RuleReport]:
        """The reports this rule writes (one file each): its own."""
        return [self.report]

    def record(self, message: str, value: Any = None, threshold: Any = None) -> None:
        """Keep a piece of evidence for the window being evaluated."""
        self._evidence.append(
            Evidence(message=message, value=json_safe(value), threshold=json_safe(threshold))
        )

    def take_evidence(self) -> list[Evidence]:
        """The evidence recorded since the last call, handed over once."""
        taken, self._evidence = self._evidence, []
        return taken

    # ----- typed parameters ------------------------------------------------------------------

    def number(self, name: str) -> float:
        """A numeric parameter's value."""
        value = self.parameters[name]
        if not isinstance(value, int | float):
            raise TypeError(f"{self.rule_name}.{name} is {value!r}, not a number")
        return float(value)

    def count(self, name: str) -> int:
        """An integer parameter's value."""
        return int(self.number(name))

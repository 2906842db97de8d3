"""ProfilerReport: every profiler rule on the same windows, with ``<Rule>_<param>`` overrides.

``ProfilerReport(CPUBottleneck_threshold=20, StepOutlier_stddev="5")`` builds the 11 rules with the
defaults of the catalogue, overridden where a ``<Rule>_<parameter>`` key says so (the catalogue
checks each, as SageMaker's rulesconfig does: an unknown rule or parameter is a ConfigError that
suggests the nearest name). Under the report every rule reads the report's windows
(``scan_interval_us``), so a ``<Rule>_scan_interval_us`` override is accepted but has no effect.

It fires in a window when one of its rules does. A rule that fails is set aside with its error
(in its report's ``Error``), and the others go on. ``reports()`` gives the 11 reports the evaluator
writes as ``profiler-reports/<Rule>.json``.
"""

from __future__ import annotations

from typing import Any

from trainprobe.rules.failure import describe_failure
from trainprobe.rules.profiler_rules.builtin import PROFILER_RULE_CLASSES
from trainprobe.rules.profiler_rules.report_data import RuleReport
from trainprobe.rules.profiler_rules.rule import WindowRule
from trainprobe.rules.profiler_rules.window import Window

__all__ = ["ProfilerReport"]


class ProfilerReport(WindowRule):
    """Runs every profiler rule and fires if any rule does (see the module docstring)."""

    rule_name = "ProfilerReport"

    def __init__(self, **parameters: object) -> None:
        super().__init__(**parameters)
        overrides = self.spec.overrides_by_rule(self.parameters)
        self.overrides = overrides
        self.rules: list[WindowRule] = [
            rule_class(**overrides.get(name, {}))
            for name, rule_class in PROFILER_RULE_CLASSES.items()
        ]
        self.failed: dict[str, str] = {}

    def evaluate_window(self, window: Window) -> bool:
        fired = []
        for rule in self.rules:
            if rule.rule_name in self.failed:
                continue
            try:
                if rule.evaluate(window):
                    fired.append(rule.rule_name)
            except Exception as error:
                detail = describe_failure(error)
                self.failed[rule.rule_name] = detail
                rule.report.error = detail
                continue
            for evidence in rule.take_evidence():
                self.record(
                    f"{rule.rule_name}: {evidence.message}", evidence.value, evidence.threshold
                )
        self.report.violations = sum(rule.report.violations for rule in self.rules)
        self.report.datapoints = max((rule.report.datapoints for rule in self.rules), default=0)
        self.report.details = self._details()
        return bool(fired)

    def _details(self) -> dict[str, Any]:
        return {
            rule.rule_name: {
                "RuleTriggered": rule.report.rule_triggered,
                "Violations": rule.report.violations,
                "Datapoints": rule.report.datapoints,
                "Recommendation": rule.report.recommendation,
                **({"Error": rule.report.error} if rule.report.error else {}),
            }
            for rule in self.rules
        }

    def triggered_rules(self) -> list[WindowRule]:
        """The rules that fired in some window so far."""
        return [rule for rule in self.rules if rule.report.rule_triggered]

    def recommendation(self) -> str:
        fired = self.triggered_rules()
        text = (
            "No rule found an issue."
            if not fired
            else " ".join(f"{rule.rule_name}: {rule.report.recommendation}" for rule in fired)
        )
        if self.failed:
            text += " Failed: " + "; ".join(f"{name}: {why}" for name, why in self.failed.items())
        return text

    def reports(self) -> list[RuleReport]:
        """The report of each of the 11 rules."""
        return [rule.report for rule in self.rules]

"""What a profiler rule reports: how often it fired, on how much data, why, and what to change.

``RuleReport.to_json()`` is the rule's ``profiler-reports/<Rule>.json``. Its first five keys are
the ones SageMaker's profiler report reads (reference/smdebug.md §5.3): ``RuleTriggered`` (windows
in which the rule fired), ``Violations``, ``Datapoints``, ``RuleParameters`` (``"name:value"``
lines) and ``Details`` (the rule's evidence: statistics, per-node and per-GPU figures). trainprobe
adds the rule's ``Description``, a ``Recommendation`` in plain words, the typed ``Parameters``,
the ``Windows`` evaluated, the time span they covered (``FirstWindowStartUs``,
``LastWindowEndUs``) and, for a rule that failed, its ``Error``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainprobe.config.catalogue.model import format_value

__all__ = ["RuleReport", "json_safe"]


def json_safe(value: Any) -> Any:
    """``value`` with numpy numbers made Python numbers, tuples made lists, and NaN or infinite
    floats made None: JSON without NaN, as every rule output is."""
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    item = getattr(value, "item", None)
    if callable(item):
        return json_safe(item())
    return str(value)


@dataclass
class RuleReport:
    """One profiler rule's report data, kept up to date window by window."""

    rule: str
    description: str
    parameters: dict[str, object]
    rule_triggered: int = 0
    violations: int = 0
    datapoints: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    recommendation: str = ""
    windows: int = 0
    first_window_start_us: float | None = None
    last_window_end_us: float | None = None
    error: str | None = None

    def rule_parameters_text(self) -> str:
        """The parameters as SageMaker's report writes them: ``name:value`` lines."""
        return "".join(f"{name}:{format_value(value)}\n" for name, value in self.parameters.items())

    def to_json(self) -> dict[str, Any]:
        """The report as ``profiler-reports/<Rule>.json`` holds it."""
        data: dict[str, Any] = {
            "RuleTriggered": self.rule_triggered,
            "Violations": self.violations,
            "Datapoints": self.datapoints,
            "RuleParameters": self.rule_parameters_text(),
            "Details": json_safe(self.details),
            "Rule": self.rule,
            "Description": self.description,
            "Recommendation": self.recommendation,
            "Parameters": json_safe(self.parameters),
            "Windows": self.windows,
            "FirstWindowStartUs": json_safe(self.first_window_start_us),
            "LastWindowEndUs": json_safe(self.last_window_end_us),
        }
        if self.error is not None:
            data["Error"] = self.error
        return data

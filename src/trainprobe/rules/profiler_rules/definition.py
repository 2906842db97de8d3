"""``ProfilerRuleDefinition``: one profiler rule to run on a job, checked before anything runs.

From a rule configuration (``trainprobe.debugger.ProfilerRule.sagemaker(rule_configs.X())``, or a
``ProfilerRuleConfigurations`` entry of a request) or by name with parameters::

    ProfilerRuleDefinition.for_builtin("ProfilerReport", {"CPUBottleneck_threshold": "20"})
    ProfilerRuleDefinition.from_config(ProfilerRule.sagemaker(rule_configs.CPUBottleneck()))

The catalogue types and checks the parameters (a ConfigError names the field and suggests the
nearest valid name); ``action_json`` is parsed at once. Custom profiler rules (a rule class in a
file of the user's) are not supported yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trainprobe.config import catalogue
from trainprobe.config.actions import Action, ActionList, parse_actions
from trainprobe.config.errors import ConfigError
from trainprobe.config.rules import ProfilerRule as ProfilerRuleConfig
from trainprobe.rules.profiler_rules.builtin import PROFILER_RULE_CLASSES
from trainprobe.rules.profiler_rules.report import ProfilerReport
from trainprobe.rules.profiler_rules.rule import WindowRule

__all__ = ["ProfilerRuleDefinition", "profiler_rule_class"]


def profiler_rule_class(name: str) -> type[WindowRule]:
    """The class of the built-in profiler rule ``name`` (a catalogue name)."""
    if name == ProfilerReport.rule_name:
        return ProfilerReport
    found = PROFILER_RULE_CLASSES.get(name)
    if found is None:
        raise ConfigError(
            "rule_to_invoke",
            name,
            "a built-in profiler rule: "
            + ", ".join([*PROFILER_RULE_CLASSES, ProfilerReport.rule_name]),
        )
    return found


@dataclass(frozen=True)
class ProfilerRuleDefinition:
    """One profiler rule: its configuration name, the rule, its typed parameters and actions."""

    name: str
    rule_to_invoke: str
    parameters: Mapping[str, object] = field(default_factory=dict)
    actions: str | Action | ActionList | None = None

    @classmethod
    def for_builtin(
        cls,
        rule: str,
        raw_parameters: Mapping[str, object] | None = None,
        *,
        name: str | None = None,
        actions: str | Action | ActionList | None = None,
    ) -> ProfilerRuleDefinition:
        """The built-in profiler rule ``rule`` (any case) with ``raw_parameters`` (strings or
        Python values; ``rule_to_invoke`` and ``action_json`` are recognised)."""
        spec = catalogue.get(rule, field="rule")
        if spec.kind != "profiler":
            raise ConfigError(
                "rule",
                rule,
                f"{spec.name} is a debugging rule: it reads tensors, not profiler data",
            )
        raw = dict(raw_parameters or {})
        parameters = spec.convert(raw)
        action_json = spec.engine_keys(raw).get("action_json")
        if actions is None and action_json is not None:
            actions = parse_actions(action_json)
        return cls(
            name=name or spec.name,
            rule_to_invoke=spec.name,
            parameters=parameters,
            actions=actions,
        )

    @classmethod
    def from_config(cls, rule: ProfilerRuleConfig) -> ProfilerRuleDefinition:
        """The definition of a profiler rule configured as the SageMaker SDK does."""
        parameters = dict(rule.rule_parameters or {})
        if rule.spec is None:
            raise ConfigError(
                f"{rule.name}.rule_parameters",
                parameters.get("rule_to_invoke"),
                "a built-in profiler rule (custom profiler rules are not supported yet)",
            )
        return cls.for_builtin(rule.spec.name, parameters, name=rule.name)

    @classmethod
    def from_request_dict(cls, request: Mapping[str, object]) -> ProfilerRuleDefinition:
        """The definition of one ``ProfilerRuleConfigurations`` entry of a request."""
        return cls.from_config(ProfilerRuleConfig.from_request_dict(request))

    @property
    def scan_interval_us(self) -> int:
        """The length of the rule's windows, in microseconds."""
        spec = catalogue.get(self.rule_to_invoke)
        value = self.parameters.get("scan_interval_us", spec.defaults()["scan_interval_us"])
        assert isinstance(value, int)
        return value

    def build(self) -> WindowRule:
        """A fresh rule object for one job."""
        return profiler_rule_class(self.rule_to_invoke)(**self.parameters)

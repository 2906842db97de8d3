"""``RuleDefinition``: everything the runner needs to build one rule for one job.

A definition comes from a rule configuration (``trainprobe.debugger.Rule``, from
``Rule.sagemaker`` or ``Rule.custom`` or a request), or is made directly for a built-in rule by
name or a custom rule by file. Bad input (an unknown rule, a parameter out of range, an
``action_json`` that does not parse) raises ConfigError here, before anything runs. What can
only fail once the rule runs (the user's file, the trial) fails in ``build``.

Built-in rules get their parameters typed by the catalogue; custom rules get them as the
strings of ``RuleParameters``, as smdebug passes them.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainprobe.analysis.trial import Trial
from trainprobe.config import catalogue
from trainprobe.config.actions import Action, ActionList, parse_actions
from trainprobe.config.catalogue.model import is_engine_key
from trainprobe.config.errors import ConfigError
from trainprobe.config.rules import Rule as RuleConfig
from trainprobe.rules.custom import build_custom_rule, load_rule_class
from trainprobe.rules.rule import Rule

__all__ = ["RuleDefinition", "builtin_rule_class"]

_OTHER_TRIAL = re.compile(r"other_trial_(\d+)")


def builtin_rule_class(name: str) -> type[Rule]:
    """The class implementing the built-in rule ``name`` (a catalogue name)."""
    try:
        from trainprobe.rules import builtin
    except ImportError as error:
        raise ConfigError(
            "rule_to_invoke", name, f"built-in rules cannot be loaded ({error})"
        ) from None
    registry: dict[str, type[Rule]] = getattr(builtin, "BUILTIN_RULES", {})
    found = registry.get(name)
    if not registry:
        raise ConfigError("rule_to_invoke", name, "built-in rules are not available yet")
    if found is None:
        raise ConfigError(
            "rule_to_invoke",
            name,
            "a rule trainprobe can evaluate on saved tensors: " + ", ".join(sorted(registry)),
        )
    return found


def _step_bound(raw: Mapping[str, object], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        raise ConfigError(key, value, "expected an integer >= 0 (a step number)") from None


def _other_trial_paths(raw: Mapping[str, object]) -> tuple[str, ...]:
    numbered = []
    for key, value in raw.items():
        match = _OTHER_TRIAL.fullmatch(key)
        if match is not None:
            numbered.append((int(match.group(1)), str(value)))
    return tuple(path for _, path in sorted(numbered))


@dataclass(frozen=True)
class RuleDefinition:
    """One rule to run: its configuration name, the rule, its parameters and actions.

    ``rule_to_invoke`` is the built-in rule's catalogue name or the custom rule's class name;
    ``source`` is the custom rule's file (None for a built-in rule). ``start_step`` and
    ``end_step`` bound the global steps evaluated (``start <= step < end``);
    ``other_trial_paths`` are other jobs' tensor outputs to compare with.
    """

    name: str
    rule_to_invoke: str
    parameters: Mapping[str, object] = field(default_factory=dict)
    source: str | None = None
    actions: str | Action | ActionList | None = None
    start_step: int | None = None
    end_step: int | None = None
    other_trial_paths: tuple[str, ...] = ()
    rule_class: type[Rule] | None = None

    @property
    def builtin(self) -> bool:
        """Whether this is a built-in rule (neither a source file nor a class of the user's)."""
        return self.source is None and self.rule_class is None

    @property
    def user_file(self) -> str | None:
        """The file holding the user's rule code (None for a built-in rule): errors are
        located in it."""
        if self.rule_class is not None:
            try:
                return inspect.getsourcefile(self.rule_class)
            except TypeError:
                return None
        if self.source is not None and "://" not in self.source:
            return os.path.abspath(os.path.expanduser(self.source))
        return self.source

    @classmethod
    def for_builtin(
        cls,
        rule: str,
        raw_parameters: Mapping[str, object] | None = None,
        *,
        name: str | None = None,
        actions: str | Action | ActionList | None = None,
    ) -> RuleDefinition:
        """Built-in rule ``rule`` (a catalogue name, any case, or the ``rule_configs`` name)
        with ``raw_parameters`` (strings or Python values; engine keys such as
        ``action_json``, ``start_step`` and ``other_trial_0`` are recognised)."""
        spec = catalogue.get(rule, field="rule")
        if spec.kind != "debugging":
            raise ConfigError(
                "rule",
                rule,
                f"{spec.name} is a profiler rule: it reads profiler data, not tensors",
            )
        raw = dict(raw_parameters or {})
        builtin_rule_class(spec.name)
        parameters = spec.effective_parameters(raw)
        engine = spec.engine_keys(raw)
        return cls(
            name=name or spec.name,
            rule_to_invoke=spec.name,
            parameters=parameters,
            actions=_actions(actions, engine.get("action_json")),
            start_step=_step_bound(engine, "start_step"),
            end_step=_step_bound(engine, "end_step"),
            other_trial_paths=_other_trial_paths(engine),
        )

    @classmethod
    def for_custom(
        cls,
        source: str,
        rule_to_invoke: str,
        raw_parameters: Mapping[str, object] | None = None,
        *,
        name: str | None = None,
        actions: str | Action | ActionList | None = None,
    ) -> RuleDefinition:
        """The class ``rule_to_invoke`` in the file ``source``, built with ``raw_parameters``
        as keyword strings (engine keys are taken out first)."""
        raw = dict(raw_parameters or {})
        engine = {key: value for key, value in raw.items() if is_engine_key(key)}
        parameters = {key: str(value) for key, value in raw.items() if not is_engine_key(key)}
        return cls(
            name=name or rule_to_invoke,
            rule_to_invoke=rule_to_invoke,
            parameters=parameters,
            source=source,
            actions=_actions(actions, engine.get("action_json")),
            start_step=_step_bound(engine, "start_step"),
            end_step=_step_bound(engine, "end_step"),
            other_trial_paths=_other_trial_paths(engine),
        )

    @classmethod
    def for_class(
        cls,
        rule_class: type[Rule],
        parameters: Mapping[str, object] | None = None,
        *,
        name: str | None = None,
        actions: str | Action | ActionList | None = None,
        start_step: int | None = None,
        end_step: int | None = None,
        other_trial_paths: Sequence[str] = (),
    ) -> RuleDefinition:
        """A rule class of your own, already imported, built with ``parameters`` as given."""
        if not (isinstance(rule_class, type) and issubclass(rule_class, Rule)):
            raise ConfigError("rule_class", rule_class, "a subclass of trainprobe.rules.Rule")
        return cls(
            name=name or rule_class.__name__,
            rule_to_invoke=rule_class.__name__,
            parameters=dict(parameters or {}),
            actions=_actions(actions, None),
            start_step=start_step,
            end_step=end_step,
            other_trial_paths=tuple(other_trial_paths),
            rule_class=rule_class,
        )

    @classmethod
    def from_config(cls, rule: RuleConfig) -> RuleDefinition:
        """The definition of a debugging rule configured as the SageMaker SDK does."""
        raw: dict[str, Any] = dict(rule.rule_parameters or {})
        actions = rule.actions
        if rule.spec is None:
            source = raw.get("source_s3_uri")
            to_invoke = raw.get("rule_to_invoke")
            if not isinstance(source, str) or not isinstance(to_invoke, str):
                raise ConfigError(
                    "rule_parameters",
                    raw,
                    "a custom rule needs source and rule_to_invoke (Rule.custom)",
                )
            return cls.for_custom(source, to_invoke, raw, name=rule.name, actions=actions)
        return cls.for_builtin(rule.spec.name, raw, name=rule.name, actions=actions)

    def build(self, base_trial: Trial, other_trials: Sequence[Trial] = ()) -> Rule:
        """Build the rule for ``base_trial``: CustomRuleError when the user's file fails,
        whatever the constructor raises for a built-in rule."""
        if self.rule_class is not None:
            source = inspect.getsourcefile(self.rule_class)
            return build_custom_rule(
                self.rule_class, base_trial, self.parameters, other_trials, source=source
            )
        if self.source is not None:
            rule_class = load_rule_class(self.source, self.rule_to_invoke)
            parameters = {key: str(value) for key, value in self.parameters.items()}
            return build_custom_rule(
                rule_class, base_trial, parameters, other_trials, source=self.source
            )
        rule_class = builtin_rule_class(self.rule_to_invoke)
        arguments: dict[str, object] = dict(self.parameters)
        if other_trials and "other_trials" in inspect.signature(rule_class).parameters:
            arguments["other_trials"] = list(other_trials)
        construct: Callable[..., Rule] = rule_class
        return construct(base_trial, **arguments)


def _actions(
    given: str | Action | ActionList | None, action_json: object
) -> str | Action | ActionList | None:
    if given is not None:
        return given
    if action_json is None:
        return None
    # Checked now so that a bad action_json is reported before anything runs.
    return parse_actions(action_json)

"""What a built-in rule is, as data: its parameters, their types, defaults and valid values.

A rule's parameters reach it as strings (``"20.0"``, ``"True"``, ``"a,b"``, ``"None"``): that is
how the SageMaker request carries them. ``RuleSpec.convert`` turns them into typed values and
checks them against the catalogue, reporting every problem at once.

Keys in ``RuleParameters`` that are not rule parameters (the *engine keys*) are recognised and
left out of the converted parameters; ``RuleSpec.engine_keys`` returns them:

- ``rule_to_invoke`` names the rule; when present it must name this rule.
- ``action_json`` (what to do when the rule fires) is parsed by ``trainprobe.config.actions``.
- ``source_s3_uri`` belongs to custom rules; ``other_trial_<i>`` are the other trials to compare
  with (``Rule.sagemaker(other_trials_s3_input_paths=...)``).
- ``start_step`` and ``end_step`` bound the steps the runner evaluates (integers >= 0), unless the
  rule declares a parameter of that name (Overfit's ``start_step`` is a rule parameter).
- ``base_trial`` is rejected: the runner always sets it to the job being watched.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from trainprobe.config.errors import ConfigError, ConfigErrors, closest
from trainprobe.config.regexes import compile_problem
from trainprobe.config.true_false import true_or_false

__all__ = [
    "ENGINE_KEYS",
    "FRAMEWORKS",
    "AlternativeDefault",
    "CollectionNeed",
    "ParamType",
    "Parameter",
    "RuleSpec",
    "format_value",
    "is_engine_key",
    "raise_if_any",
]

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "xgboost")
"""Framework names a rule can apply to, in the words ``trainprobe rules list --framework`` takes."""

ENGINE_KEYS = ("rule_to_invoke", "action_json", "source_s3_uri", "start_step", "end_step")
_OTHER_TRIAL = re.compile(r"other_trial_\d+")
_STEP_KEYS = ("start_step", "end_step")


def raise_if_any(errors: Sequence[ConfigError]) -> None:
    """Raise the one error, or all of them together; do nothing when there are none."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


class ParamType(str, Enum):
    """How a parameter's string is read."""

    STRING = "string"
    FLOAT = "float"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    STRING_LIST = "string list"
    FLOAT_LIST = "float list"


_TYPE_WORDS = {
    ParamType.STRING: "a string",
    ParamType.FLOAT: "a number",
    ParamType.INTEGER: "an integer",
    ParamType.BOOLEAN: "True or False",
    ParamType.STRING_LIST: "a list of strings or a comma-separated string",
    ParamType.FLOAT_LIST: "a list of numbers or a comma-separated string of numbers",
}


@dataclass(frozen=True)
class AlternativeDefault:
    """A default another source gives for the same parameter, kept so the report can say so."""

    value: object
    source: str


@dataclass(frozen=True)
class CollectionNeed:
    """A tensor collection a rule reads, with the parameters smdebug-rulesconfig attaches to it."""

    name: str
    parameters: tuple[tuple[str, str], ...] = ()

    def parameter_dict(self) -> dict[str, str]:
        """The collection parameters as a fresh dict (e.g. ``{"save_interval": "500"}``)."""
        return dict(self.parameters)

    def to_request_dict(self) -> dict[str, object]:
        """The ``CollectionConfigurations`` entry of a request for this collection."""
        return {"CollectionName": self.name, "CollectionParameters": self.parameter_dict()}


def _check_compiles(converted: object, value: object, field: str) -> None:
    """A parameter named ``*regex`` holds regular expressions: each must compile."""
    patterns = converted if isinstance(converted, tuple) else (converted,)
    for pattern in patterns:
        if not isinstance(pattern, str):
            continue
        problem = compile_problem(pattern)
        if problem is not None:
            raise ConfigError(
                field, value, f"regular expressions that compile; {pattern!r} does not ({problem})"
            )


def _number(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Parameter:
    """One rule parameter: its type, default, valid values, and what it means.

    ``source`` says where the default comes from; ``alternatives`` lists the defaults other
    sources give. ``in_rulesconfig`` is False for a parameter that smdebug-rulesconfig's class
    does not send by default (trainprobe accepts it, but only sends it when it is given).
    ``supplied_by`` is a pattern of other keys that also supply a required parameter.
    """

    name: str
    type: ParamType
    default: object
    meaning: str
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    choices: tuple[str, ...] = ()
    source: str = "spec"
    alternatives: tuple[AlternativeDefault, ...] = ()
    notes: str = ""
    in_rulesconfig: bool = True
    supplied_by: str = ""

    @property
    def nullable(self) -> bool:
        """Whether ``None`` (or the string ``"None"``) is a valid value: the default is None."""
        return self.default is None and not self.required

    @property
    def range_text(self) -> str:
        """The valid range or choices in words, or "" when any value of the type is valid."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            left = "<" if self.min_exclusive else "<="
            right = "<" if self.max_exclusive else "<="
            return f"{_number(low)} {left} x {right} {_number(high)}"
        if low is not None:
            return f"x {'>' if self.min_exclusive else '>='} {_number(low)}"
        if high is not None:
            return f"x {'<' if self.max_exclusive else '<='} {_number(high)}"
        return ""

    @property
    def allowed(self) -> str:
        """What this parameter accepts, in words, for error messages and ``rules show``."""
        text = _TYPE_WORDS[self.type]
        if self.range_text:
            text += f" ({self.range_text})"
        if self.nullable:
            text += ", or None"
        return f"expected {text}"

    def default_text(self) -> str:
        """The default as it would be written in ``RuleParameters``."""
        return format_value(self.default)

    def convert(self, value: object, field: str) -> object:
        """``value`` (a string from a request, or a Python value) as this parameter's type.

        Raises ConfigError naming ``field`` when the value has the wrong type or is out of range.
        """
        if value is None or (isinstance(value, str) and value.strip() == "None"):
            if self.nullable:
                return None
            raise ConfigError(field, value, self.allowed)
        converted = _CONVERTERS[self.type](value)
        if converted is _INVALID:
            raise ConfigError(field, value, self.allowed)
        self._check_range(converted, value, field)
        if self.name.endswith("regex"):
            _check_compiles(converted, value, field)
        return converted

    def _check_range(self, converted: object, value: object, field: str) -> None:
        if self.choices:
            if converted not in self.choices:
                raise ConfigError(
                    field, value, self.allowed, suggestion=closest(str(converted), self.choices)
                )
            return
        items = converted if isinstance(converted, tuple) else (converted,)
        numbers = [item for item in items if isinstance(item, int | float)]
        if not all(self._in_range(float(number)) for number in numbers):
            raise ConfigError(field, value, self.allowed)

    def _in_range(self, number: float) -> bool:
        low, high = self.minimum, self.maximum
        if low is not None and (number < low or (self.min_exclusive and number == low)):
            return False
        return not (high is not None and (number > high or (self.max_exclusive and number == high)))


def format_value(value: object) -> str:
    """A typed value written back as a ``RuleParameters`` string (lists comma-separated)."""
    if isinstance(value, tuple | list):
        return ",".join(format_value(item) for item in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


_INVALID = object()


def _to_bool(value: object) -> object:
    parsed = true_or_false(value)
    return _INVALID if parsed is None else parsed


def _to_float(value: object) -> object:
    if isinstance(value, bool):
        return _INVALID
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return _INVALID
    else:
        return _INVALID
    return number if math.isfinite(number) else _INVALID


def _to_int(value: object) -> object:
    if isinstance(value, bool):
        return _INVALID
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    number = _to_float(value)
    if isinstance(number, float) and number.is_integer():
        return int(number)
    return _INVALID


def _to_string(value: object) -> object:
    return value if isinstance(value, str) else _INVALID


def _items(value: object) -> list[object] | None:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, list | tuple):
        return list(value)
    return None


def _to_string_list(value: object) -> object:
    items = _items(value)
    if items is None or not all(isinstance(item, str) for item in items):
        return _INVALID
    return tuple(items)


def _to_float_list(value: object) -> object:
    items = _items(value)
    if items is None:
        return _INVALID
    numbers = [_to_float(item) for item in items]
    if any(number is _INVALID for number in numbers):
        return _INVALID
    return tuple(numbers)


_CONVERTERS = {
    ParamType.STRING: _to_string,
    ParamType.FLOAT: _to_float,
    ParamType.INTEGER: _to_int,
    ParamType.BOOLEAN: _to_bool,
    ParamType.STRING_LIST: _to_string_list,
    ParamType.FLOAT_LIST: _to_float_list,
}


@dataclass(frozen=True)
class RuleSpec:
    """One built-in rule as the catalogue knows it.

    ``kind`` is "debugging" or "profiler"; ``sdk_name`` is the ``rule_configs`` function
    (``vanishing_gradient``) or class (``CPUBottleneck``). ``group`` is the smdebug-rulesconfig
    rule group (UNIVERSAL, DEEP_LEARNING, DL_APPLICATION, XGBOOST) where there is one.
    ``one_of`` holds groups of parameters: of each group, at least one must be set (a default
    counts).
    ``runs`` lists the rules a report rule (ProfilerReport) runs and accepts
    ``<Rule>_<parameter>`` overrides for. ``example`` holds the values a ready-to-use example
    needs beyond the defaults (from the spec's example configurations). ``in_training`` marks a
    rule the hook also judges inside the training, on every step (LossSpike,
    GradientNormSpike): it alone takes the actions SkipStep and Rollback.
    """

    name: str
    kind: str
    sdk_name: str
    description: str
    parameters: tuple[Parameter, ...] = ()
    collections: tuple[CollectionNeed, ...] = ()
    frameworks: tuple[str, ...] = FRAMEWORKS
    group: str | None = None
    one_of: tuple[tuple[str, ...], ...] = ()
    runs: tuple[RuleSpec, ...] = ()
    example: tuple[tuple[str, str], ...] = ()
    in_training: bool = False

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The parameter names, in the catalogue's order."""
        return tuple(parameter.name for parameter in self.parameters)

    def parameter(self, name: str, *, field: str | None = None) -> Parameter:
        """The parameter called ``name``; ConfigError with the closest name when there is none.

        The error's field is ``field``, by default ``<Rule>.<name>``.
        """
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        raise ConfigError(
            field or f"{self.name}.{name}",
            name,
            self._parameters_allowed(),
            suggestion=closest(name, self.parameter_names),
        )

    def defaults(self) -> dict[str, object]:
        """Every parameter's default, by name."""
        return {parameter.name: parameter.default for parameter in self.parameters}

    def convert(
        self, raw: Mapping[str, object], *, field_prefix: str = "RuleParameters"
    ) -> dict[str, object]:
        """The rule parameters in ``raw``, typed and validated; engine keys are left out.

        Every problem is reported (ConfigError, or ConfigErrors for several), each naming its
        field as ``<field_prefix>.<key>``.
        """
        converted, errors = self.check(raw, field_prefix=field_prefix)
        raise_if_any(errors)
        return converted

    def effective_parameters(
        self, raw: Mapping[str, object], *, field_prefix: str = "RuleParameters"
    ) -> dict[str, object]:
        """The defaults, updated with the converted values from ``raw``."""
        return {**self.defaults(), **self.convert(raw, field_prefix=field_prefix)}

    def check(
        self, raw: Mapping[str, object], *, field_prefix: str = "RuleParameters"
    ) -> tuple[dict[str, object], list[ConfigError]]:
        """Like ``convert``, but returns the problems instead of raising them."""
        converted: dict[str, object] = {}
        errors: list[ConfigError] = []
        for key, value in raw.items():
            where = f"{field_prefix}.{key}" if field_prefix else str(key)
            try:
                result = self._convert_key(str(key), value, where)
            except ConfigError as error:
                errors.append(error)
                continue
            if result is not None:
                converted[result[0]] = result[1]
        errors += self._check_required(raw, converted, field_prefix)
        return converted, errors

    def engine_keys(self, raw: Mapping[str, object]) -> dict[str, object]:
        """The keys of ``raw`` that are for the runner, not the rule (see the module docstring)."""
        return {
            key: value
            for key, value in raw.items()
            if key not in self.parameter_names and is_engine_key(key)
        }

    def overrides_by_rule(self, converted: Mapping[str, object]) -> dict[str, dict[str, object]]:
        """For a report rule: its converted ``<Rule>_<parameter>`` overrides, grouped by rule."""
        grouped: dict[str, dict[str, object]] = {}
        for key, value in converted.items():
            rule_name, _, parameter = key.partition("_")
            if parameter and any(spec.name == rule_name for spec in self.runs):
                grouped.setdefault(rule_name, {})[parameter] = value
        return grouped

    def _convert_key(self, key: str, value: object, where: str) -> tuple[str, object] | None:
        if key in self.parameter_names:
            return key, self.parameter(key).convert(value, where)
        if key == "base_trial":
            raise ConfigError(where, value, "base_trial is always the job the rule watches")
        if key == "rule_to_invoke":
            if not isinstance(value, str) or value.lower() != self.name.lower():
                raise ConfigError(where, value, f"this configuration is for {self.name}")
            return None
        if key in _STEP_KEYS:
            step = _to_int(value)
            if not isinstance(step, int) or step < 0:
                raise ConfigError(where, value, "expected an integer >= 0 (a step number)")
            return None
        if is_engine_key(key):
            if not isinstance(value, str):
                raise ConfigError(where, value, "expected a string")
            return None
        if self.runs:
            return self._convert_override(key, value, where)
        raise ConfigError(
            where, key, self._parameters_allowed(), suggestion=closest(key, self._known_keys())
        )

    def _convert_override(self, key: str, value: object, where: str) -> tuple[str, object]:
        rule_name, _, parameter_name = key.partition("_")
        by_lower = {spec.name.lower(): spec for spec in self.runs}
        spec = by_lower.get(rule_name.lower())
        if spec is None or not parameter_name:
            suggestion = closest(key, self._override_keys())
            allowed = (
                f"expected a parameter of {self.name} ({', '.join(self.parameter_names)}) or "
                f"<Rule>_<parameter> for a rule it runs ({', '.join(s.name for s in self.runs)})"
            )
            raise ConfigError(where, key, allowed, suggestion=suggestion)
        for parameter in spec.parameters:
            if parameter.name == parameter_name.lower():
                return f"{spec.name}_{parameter.name}", parameter.convert(value, where)
        raise ConfigError(
            where,
            key,
            f"expected {spec.name}_<parameter> with a parameter of {spec.name}: "
            + ", ".join(spec.parameter_names),
            suggestion=closest(key, [f"{spec.name}_{name}" for name in spec.parameter_names]),
        )

    def _check_required(
        self, raw: Mapping[str, object], converted: Mapping[str, object], field_prefix: str
    ) -> list[ConfigError]:
        errors = []
        for parameter in self.parameters:
            if not parameter.required or parameter.name in raw:
                continue
            if parameter.supplied_by and any(
                re.fullmatch(parameter.supplied_by, str(key)) for key in raw
            ):
                continue
            where = f"{field_prefix}.{parameter.name}" if field_prefix else parameter.name
            needed = f"{self.name} requires it ({parameter.meaning.rstrip('.')})"
            if parameter.notes:
                needed += f"; {parameter.notes}"
            errors.append(ConfigError(where, None, needed))
        effective = {**self.defaults(), **converted}
        for group in self.one_of:
            if not any(effective.get(name) not in (None, False, ()) for name in group):
                errors.append(
                    ConfigError(
                        field_prefix or self.name,
                        {key: raw[key] for key in group if key in raw},
                        f"{self.name} needs at least one of {', '.join(group)}",
                    )
                )
        return errors

    def _known_keys(self) -> list[str]:
        return [*self.parameter_names, *ENGINE_KEYS]

    def _override_keys(self) -> list[str]:
        keys = list(self.parameter_names)
        for spec in self.runs:
            keys += [f"{spec.name}_{name}" for name in spec.parameter_names]
        return keys

    def _parameters_allowed(self) -> str:
        if not self.parameters:
            return f"{self.name} takes no parameters"
        return f"expected a parameter of {self.name}: {', '.join(self.parameter_names)}"


def is_engine_key(key: str) -> bool:
    """Whether ``key`` is for the runner rather than the rule (see the module docstring)."""
    return key in ENGINE_KEYS or _OTHER_TRIAL.fullmatch(key) is not None

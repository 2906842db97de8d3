"""The catalogue of built-in rules: the one place that lists them, their parameters and defaults.

``rule_configs``, ``Rule``/``ProfilerRule`` validation, the request parser, the rule engine, the
report and ``trainprobe rules`` all read it::

    from trainprobe.config import catalogue

    spec = catalogue.get("VanishingGradient")
    spec.effective_parameters({"threshold": "1e-6"})   # {"threshold": 1e-06}
"""

from __future__ import annotations

from trainprobe.config.catalogue.debugging import DEBUGGING_RULES
from trainprobe.config.catalogue.model import (
    ENGINE_KEYS,
    FRAMEWORKS,
    AlternativeDefault,
    CollectionNeed,
    Parameter,
    ParamType,
    RuleSpec,
    raise_if_any,
)
from trainprobe.config.catalogue.profiler import PROFILER_REPORT, PROFILER_RULES
from trainprobe.config.catalogue.replicas import REPLICA_RULES
from trainprobe.config.catalogue.spikes import SPIKE_RULES
from trainprobe.config.errors import ConfigError, closest

__all__ = [
    "ENGINE_KEYS",
    "FRAMEWORKS",
    "AlternativeDefault",
    "CollectionNeed",
    "ParamType",
    "Parameter",
    "RuleSpec",
    "all_rules",
    "debugging_rules",
    "get",
    "profiler_rules",
    "raise_if_any",
]

_DEBUGGING = (*DEBUGGING_RULES, *SPIKE_RULES, *REPLICA_RULES)
_ALL = (*_DEBUGGING, *PROFILER_RULES, PROFILER_REPORT)
_BY_NAME = {spec.name: spec for spec in _ALL}
_BY_LOWER = {spec.name.lower(): spec for spec in _ALL}
_BY_SDK_NAME = {spec.sdk_name: spec for spec in _ALL}


def get(name: str, *, field: str = "rule_to_invoke") -> RuleSpec:
    """The built-in rule called ``name``.

    The exact name wins, then a case-insensitive match, then the ``rule_configs`` name
    (``vanishing_gradient``). Anything else raises ConfigError on ``field``, suggesting the
    closest rule name.
    """
    if not isinstance(name, str):
        raise ConfigError(field, name, "expected the name of a built-in rule, as a string")
    spec = _BY_NAME.get(name) or _BY_LOWER.get(name.lower()) or _BY_SDK_NAME.get(name)
    if spec is None:
        raise ConfigError(
            field,
            name,
            f"expected one of the {len(_ALL)} built-in rules (`trainprobe rules list` shows them)",
            suggestion=closest(name, _BY_NAME),
        )
    return spec


def debugging_rules() -> tuple[RuleSpec, ...]:
    """SageMaker's 20 debugging rules and CreateXgboostReport, in the catalogue's order, then
    trainprobe's: the in-training rules LossSpike and GradientNormSpike, and
    ReplicaDivergence."""
    return _DEBUGGING


def profiler_rules() -> tuple[RuleSpec, ...]:
    """The 11 profiler rules, then ProfilerReport."""
    return (*PROFILER_RULES, PROFILER_REPORT)


def all_rules() -> tuple[RuleSpec, ...]:
    """Every built-in rule: the debugging rules, then the profiler rules."""
    return _ALL

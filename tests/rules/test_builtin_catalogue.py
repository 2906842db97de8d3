"""The built-in rule classes agree with the catalogue: names, parameters, defaults, conversion."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from builtin_trials import TrialBuilder

from trainprobe.config import catalogue
from trainprobe.config.errors import ConfigError
from trainprobe.rules import Rule
from trainprobe.rules.builtin import BUILTIN_RULES, LossNotDecreasing, VanishingGradient

NOT_PARAMETERS = ("self", "base_trial", "other_trials", "action_str")
DEBUGGING = [spec.name for spec in catalogue.debugging_rules()]


def test_the_registry_holds_the_debugging_rules_of_the_catalogue() -> None:
    # the spec's 20, CreateXgboostReport, LossSpike, GradientNormSpike, ReplicaDivergence
    assert len(DEBUGGING) == 24
    assert list(BUILTIN_RULES) == DEBUGGING
    for name, rule in BUILTIN_RULES.items():
        assert rule.__name__ == name
        assert issubclass(rule, Rule)


@pytest.mark.parametrize("name", DEBUGGING)
def test_constructor_parameters_and_defaults_are_the_catalogue_s(name: str) -> None:
    spec = catalogue.get(name)
    signature = inspect.signature(BUILTIN_RULES[name])
    parameters = [p for p in signature.parameters.values() if p.name not in NOT_PARAMETERS]
    assert [p.name for p in parameters] == list(spec.parameter_names)
    assert {p.name: p.default for p in parameters} == spec.defaults()
    for keyword in ("other_trials", "action_str"):
        assert signature.parameters[keyword].kind == inspect.Parameter.KEYWORD_ONLY


@pytest.fixture(scope="module")
def trial(tmp_path_factory: pytest.TempPathFactory):
    path: Path = tmp_path_factory.mktemp("trial")
    return TrialBuilder(path).add(0, "CrossEntropyLoss_output_0", 1.0).write()


# The spec's TensorVariance example sets both bounds; the catalogue's example leaves them out,
# and without one the rule could never fire (its constructor says so).
SPEC_EXAMPLE_EXTRAS = {"TensorVariance": {"max_threshold": "10", "min_threshold": "0.00001"}}


@pytest.mark.parametrize("name", DEBUGGING)
def test_every_rule_builds_from_the_strings_of_its_spec_example(name: str, trial) -> None:
    spec = catalogue.get(name)
    raw = {**dict(spec.example), **SPEC_EXAMPLE_EXTRAS.get(name, {})}
    rule = BUILTIN_RULES[name](trial, **spec.effective_parameters(raw), action_str="")
    assert rule.rule_name == name
    assert rule.base_trial is trial


def test_parameters_given_as_strings_are_converted(trial) -> None:
    assert VanishingGradient(trial, threshold="1e-6").threshold == 1e-6
    rule = LossNotDecreasing(trial, tensor_regex="loss, losses", use_losses_collection="False")
    assert rule.tensor_regex == ("loss", "losses")
    assert rule.use_losses_collection is False


def test_a_bad_parameter_names_the_rule_and_the_field(trial) -> None:
    with pytest.raises(ConfigError) as caught:
        VanishingGradient(trial, threshold="small")
    assert caught.value.field == "VanishingGradient.threshold"
    with pytest.raises(ConfigError, match=r"DeadRelu\.tensor_regex"):
        BUILTIN_RULES["DeadRelu"](trial, tensor_regex="([unclosed")

"""The in-training spike rules take their parameters and defaults from the catalogue and their
actions through ``parse_actions``: the hook refuses what the configuration refuses, with the
same words, a rule configured with nothing judges with the catalogue's defaults, and the hook
configuration file's entries and the SDK's ``Rule`` objects give the same rules (one reading,
``capture.in_training_rules``, for the PyTorch and the Keras hooks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trainprobe.pytorch as smd
from trainprobe.capture.in_training_rules import SkipBudget, spike_rule_configs
from trainprobe.capture.spike_window import SpikeSettings
from trainprobe.config import catalogue
from trainprobe.config.actions import parse_actions
from trainprobe.config.errors import ConfigError
from trainprobe.debugger import Rule, rule_configs
from trainprobe.storage.spike_records import SpikeAction


def configuration(rule: str, **parameters: str) -> dict[str, object]:
    return {"RuleConfigurationName": rule, "RuleName": rule, "RuleParameters": parameters}


def test_a_rollback_lr_factor_the_configuration_refuses_is_refused_by_the_hook(
    tmp_path: Path,
) -> None:
    action_json = json.dumps({"name": "Rollback", "steps": "5", "lr_factor": "1.5"})
    with pytest.raises(ConfigError) as by_the_configuration:
        parse_actions(action_json)
    rule = configuration("LossSpike", action_json=action_json)
    with pytest.raises(ConfigError) as by_the_hook:
        smd.Hook(str(tmp_path), training_rules=[rule])
    assert by_the_hook.value.field == "TrainingRules[0].RuleParameters.action_json.lr_factor"
    assert by_the_hook.value.allowed == by_the_configuration.value.allowed
    assert by_the_hook.value.value == by_the_configuration.value.value == "1.5"


@pytest.mark.parametrize(
    ("name", "value"), [("sigma", "-1"), ("window", "1"), ("max_skips", "zero"), ("ratio", "-2")]
)
def test_a_bad_parameter_is_refused_as_the_catalogue_words_it(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        spike_rule_configs([configuration("GradientNormSpike", **{name: value})])
    assert refused.value.field == f"TrainingRules[0].RuleParameters.{name}"
    assert refused.value.allowed == catalogue.get("GradientNormSpike").parameter(name).allowed


def test_a_rule_configured_with_nothing_judges_with_the_catalogues_defaults() -> None:
    [rule] = spike_rule_configs([configuration("LossSpike")])
    defaults = catalogue.get("LossSpike").defaults()
    settings = rule.settings
    assert (settings.window, settings.sigma, settings.warmup, settings.ratio) == (
        defaults["window"],
        defaults["sigma"],
        defaults["warmup_steps"],
        defaults["ratio"],
    )
    assert (rule.max_skips, rule.max_skips_window) == (
        defaults["max_skips"],
        defaults["max_skips_window"],
    )
    assert rule.action is SpikeAction.NONE and rule.rollback is None


def test_each_action_within_the_step_becomes_its_spike_action() -> None:
    actions = {
        json.dumps({"name": "SkipStep"}): SpikeAction.SKIP,
        json.dumps([{"name": "Email", "endpoint": "a@b.io"}, {"name": "StopTraining"}]): (
            SpikeAction.STOP
        ),
        json.dumps({"name": "Rollback", "steps": "7", "lr_factor": "0.5"}): SpikeAction.ROLLBACK,
        json.dumps({"name": "Email", "endpoint": "a@b.io"}): SpikeAction.NONE,
    }
    for action_json, expected in actions.items():
        [rule] = spike_rule_configs([configuration("LossSpike", action_json=action_json)])
        assert rule.action is expected, action_json
    [rollback] = spike_rule_configs(
        [
            configuration(
                "LossSpike",
                action_json=json.dumps({"name": "Rollback", "steps": "7", "lr_factor": "0.5"}),
            )
        ]
    )
    assert rollback.rollback is not None
    assert (rollback.rollback.steps, rollback.rollback.lr_factor) == (7, 0.5)


def test_a_file_entry_and_an_sdk_rule_give_the_same_rule() -> None:
    action = json.dumps([{"name": "SkipStep"}])
    [from_file] = spike_rule_configs([configuration("LossSpike", sigma="5", action_json=action)])
    [from_sdk] = spike_rule_configs(
        [
            Rule.sagemaker(
                rule_configs.loss_spike(),
                rule_parameters={"sigma": "5"},
                actions=rule_configs.ActionList(rule_configs.SkipStep()),
            )
        ]
    )
    assert from_file == from_sdk
    assert from_file.settings == SpikeSettings(window=128, sigma=5.0, warmup=20, ratio=0.0)
    assert from_file.action is SpikeAction.SKIP and from_file.judges_loss


def test_other_rules_are_left_to_their_evaluators_and_the_strongest_action_decides() -> None:
    actions = json.dumps([{"name": "StopTraining"}, {"name": "SkipStep"}])
    found = spike_rule_configs(
        [configuration("ExplodingTensor"), configuration("GradientNormSpike", action_json=actions)]
    )
    assert [(rule.rule, rule.action) for rule in found] == [("GradientNormSpike", SpikeAction.STOP)]


def test_more_skips_than_the_budget_within_its_window_stop_the_training() -> None:
    budget = SkipBudget(max_skips=2, window=10)
    assert budget.allows_another(0) and budget.allows_another(3)
    assert not budget.allows_another(5)  # a third within 10 updates
    assert budget.allows_another(20)  # the earlier ones left the window
    assert budget.too_many("LossSpike") == (
        "LossSpike skipped more than 2 of the last 10 updates; it stops the training instead"
    )

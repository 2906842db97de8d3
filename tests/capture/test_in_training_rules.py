"""The in-training rules a hook is given, read the way the job's configuration reads them: the
hook configuration file's ``TrainingRules`` entries and the SDK's ``Rule`` objects give the same
records, with the catalogue's defaults, and a value the configuration refuses is refused."""

from __future__ import annotations

import json

import pytest

from trainprobe.capture.in_training_rules import SkipBudget, SpikeAction, spike_rule_configs
from trainprobe.capture.spike_window import SpikeSettings
from trainprobe.config.errors import ConfigError
from trainprobe.debugger import Rule, rule_configs


def _entry(rule: str, **parameters: str) -> dict[str, object]:
    return {"RuleConfigurationName": rule, "RuleName": rule, "RuleParameters": parameters}


def test_a_file_entry_and_an_sdk_rule_give_the_same_record() -> None:
    action = json.dumps([{"name": "SkipStep"}])
    [from_file] = spike_rule_configs([_entry("LossSpike", sigma="5", action_json=action)])
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
    assert (from_file.action, from_file.max_skips, from_file.max_skips_window) == (
        SpikeAction.SKIP,
        10,
        100,
    )
    assert from_file.judges_loss


def test_other_rules_are_left_to_their_evaluators_and_the_strongest_action_decides() -> None:
    actions = json.dumps(
        [{"name": "Email", "endpoint": "me@example.com"}, {"name": "StopTraining"}]
    )
    found = spike_rule_configs(
        [_entry("ExplodingTensor"), _entry("GradientNormSpike", action_json=actions)]
    )
    assert [(rule.rule, rule.action) for rule in found] == [("GradientNormSpike", SpikeAction.STOP)]
    [rollback] = spike_rule_configs(
        [_entry("LossSpike", action_json=json.dumps({"name": "Rollback", "steps": "5"}))]
    )
    assert (rollback.action, rollback.rollback_steps, rollback.lr_factor) == (
        SpikeAction.ROLLBACK,
        5,
        1.0,
    )


@pytest.mark.parametrize(
    ("parameters", "field"),
    [
        ({"sigma": "-1"}, "TrainingRules[0].RuleParameters.sigma"),
        ({"window": "many"}, "TrainingRules[0].RuleParameters.window"),
        (
            {"action_json": json.dumps([{"name": "Rollback", "lr_factor": "1.5"}])},
            "TrainingRules[0].RuleParameters.action_json[0].lr_factor",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_its_field(parameters: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        spike_rule_configs([_entry("LossSpike", **parameters)])
    assert raised.value.field == field


def test_more_skips_than_the_budget_within_its_window_are_refused() -> None:
    budget = SkipBudget(max_skips=2, window=10)
    assert budget.allows_another(0) and budget.allows_another(3)
    assert not budget.allows_another(5)  # a third within 10 updates
    assert budget.allows_another(20)  # the earlier ones left the window
    assert budget.too_many("LossSpike") == (
        "LossSpike skipped more than 2 of the last 10 updates; it stops the training instead"
    )

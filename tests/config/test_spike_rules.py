"""LossSpike and GradientNormSpike as a user configures them: ``rule_configs``, ``Rule.sagemaker``
with SkipStep / Rollback / StopTraining, a request's RuleParameters and action_json, and the
errors for what cannot work (named by field, as SageMaker's SDK names them)."""

from __future__ import annotations

import ast
import json

import pytest

from trainprobe.config import catalogue
from trainprobe.config.actions import after_the_step, parse_actions
from trainprobe.config.errors import ConfigError
from trainprobe.config.training_job import TrainingJobRequest
from trainprobe.debugger import Rule, rule_configs


def as_the_container_reads(serialized: str) -> object:
    """The rule container runs json.loads("<serialized>"): a Python literal, then JSON."""
    return json.loads(ast.literal_eval('"' + serialized + '"'))


def test_a_loss_spike_rule_with_skip_step_is_configured_as_sagemaker_s_rules_are() -> None:
    rule = Rule.sagemaker(
        rule_configs.loss_spike(),
        rule_parameters={"sigma": "4", "window": "64"},
        actions=rule_configs.ActionList(rule_configs.SkipStep()),
    )
    rule.prepare_actions("my-job")
    request = rule.to_debugger_rule_config_dict()

    assert request["RuleConfigurationName"] == "LossSpike"
    parameters = request["RuleParameters"]
    assert parameters["rule_to_invoke"] == "LossSpike"
    assert as_the_container_reads(parameters["action_json"]) == [{"name": "SkipStep"}]
    assert rule.effective_parameters == {
        "tensor_regex": None,
        "window": 64,
        "sigma": 4.0,
        "warmup_steps": 20,
        "ratio": 0.0,
        "max_skips": 10,
        "max_skips_window": 100,
    }
    assert [c.name for c in rule.collection_configs] == ["losses"]
    again = Rule.from_request_dict(request)
    assert again.actions == rule_configs.ActionList(rule_configs.SkipStep())


def test_rollback_serialises_its_steps_and_learning_rate_factor() -> None:
    rule = Rule.sagemaker(
        rule_configs.gradient_norm_spike(),
        actions=rule_configs.Rollback(steps=20, lr_factor=0.5),
    )
    rule.prepare_actions("my-job")
    action_json = rule.rule_parameters["action_json"]

    assert as_the_container_reads(action_json) == {
        "name": "Rollback",
        "steps": "20",
        "lr_factor": "0.5",
    }
    assert as_the_container_reads(rule_configs.Rollback().serialize()) == {
        "name": "Rollback",
        "steps": "50",
        "lr_factor": "1.0",
    }
    read = parse_actions(action_json)
    assert isinstance(read, rule_configs.Rollback)
    assert (read.steps, read.lr_factor) == (20, 0.5)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"steps": 0}, "Rollback.steps"),
        ({"steps": 2.5}, "Rollback.steps"),
        ({"steps": True}, "Rollback.steps"),
        ({"lr_factor": 0}, "Rollback.lr_factor"),
        ({"lr_factor": 1.5}, "Rollback.lr_factor"),
        ({"lr_factor": "nan"}, "Rollback.lr_factor"),
    ],
)
def test_a_rollback_out_of_range_names_the_field(arguments: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        rule_configs.Rollback(**arguments)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_skip_step_and_rollback_are_refused_on_a_rule_the_training_does_not_judge() -> None:
    with pytest.raises(ConfigError) as raised:
        Rule.sagemaker(rule_configs.loss_not_decreasing(), actions=rule_configs.SkipStep())
    assert raised.value.field == "actions"
    assert "LossSpike and GradientNormSpike" in str(raised.value)
    assert "LossNotDecreasing" in str(raised.value)

    with pytest.raises(ConfigError) as raised:
        Rule.custom(
            name="mine",
            image_uri="my-image",
            instance_type="ml.t3.medium",
            volume_size_in_gb=1,
            source="rule.py",
            rule_to_invoke="Mine",
            actions=rule_configs.ActionList(rule_configs.Rollback()),
        )
    assert "a custom rule" in str(raised.value)


def test_one_rule_takes_one_action_for_the_spiking_step() -> None:
    with pytest.raises(ConfigError) as raised:
        Rule.sagemaker(
            rule_configs.loss_spike(),
            actions=rule_configs.ActionList(rule_configs.SkipStep(), rule_configs.StopTraining()),
        )
    assert raised.value.field == "actions"
    assert "at most one of SkipStep, Rollback and StopTraining" in str(raised.value)
    # A notification goes with any of them.
    rule = Rule.sagemaker(
        rule_configs.loss_spike(),
        actions=rule_configs.ActionList(
            rule_configs.StopTraining(), rule_configs.Email("ops@example.com")
        ),
    )
    assert len(rule.actions) == 2  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("parameters", "field"),
    [
        ({"window": "1"}, "rule_parameters.window"),
        ({"sigma": "0"}, "rule_parameters.sigma"),
        ({"warmup_steps": "-1"}, "rule_parameters.warmup_steps"),
        ({"ratio": "-2"}, "rule_parameters.ratio"),
        ({"max_skips": "0"}, "rule_parameters.max_skips"),
        ({"max_skips_window": "ten"}, "rule_parameters.max_skips_window"),
    ],
)
def test_bad_parameters_are_refused_by_field(parameters: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Rule.sagemaker(rule_configs.gradient_norm_spike(), rule_parameters=parameters)
    assert raised.value.field == field


def test_a_misspelt_parameter_gets_a_suggestion() -> None:
    with pytest.raises(ConfigError) as raised:
        Rule.sagemaker(rule_configs.loss_spike(), rule_parameters={"warmup": "5"})
    assert raised.value.suggestion == "warmup_steps"


def _request(rule_parameters: dict[str, str]) -> dict[str, object]:
    return {
        "TrainingJobName": "spiky",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "local"},
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": "LossSpike",
                "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
                "RuleParameters": rule_parameters,
            }
        ],
    }


def test_a_request_s_action_json_is_read_and_checked_against_the_rule() -> None:
    good = TrainingJobRequest.from_request_dict(
        _request(
            {
                "rule_to_invoke": "LossSpike",
                "sigma": "5",
                "action_json": '{"name": "Rollback", "steps": "10", "lr_factor": "0.5"}',
            }
        )
    )
    assert good.debug_rules[0].actions == rule_configs.Rollback(steps=10, lr_factor=0.5)

    with pytest.raises(ConfigError) as raised:
        TrainingJobRequest.from_request_dict(
            _request({"rule_to_invoke": "Overfit", "action_json": '[{"name": "SkipStep"}]'})
        )
    assert "DebugRuleConfigurations[0].RuleParameters.action_json" in str(raised.value)
    assert "only LossSpike and GradientNormSpike take it" in str(raised.value)

    with pytest.raises(ConfigError) as raised:
        TrainingJobRequest.from_request_dict(
            _request(
                {"rule_to_invoke": "LossSpike", "action_json": '{"name": "Rollback", "steps": "0"}'}
            )
        )
    assert "RuleParameters.action_json.steps" in str(raised.value)


def test_an_unknown_action_name_suggests_the_nearest() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_actions('{"name": "skipstep", "steps": "3"}')
    assert raised.value.field == "action_json.steps"
    with pytest.raises(ConfigError) as raised:
        parse_actions('{"name": "SkipSteps"}')
    assert raised.value.suggestion == "SkipStep"


def test_the_evaluator_carries_out_what_the_hook_does_not() -> None:
    actions = rule_configs.ActionList(
        rule_configs.SkipStep(), rule_configs.Email("ops@example.com")
    )
    assert after_the_step(actions) == rule_configs.ActionList(rule_configs.Email("ops@example.com"))
    assert after_the_step(actions.serialize()) == after_the_step(actions)
    assert after_the_step(rule_configs.Rollback()) is None
    assert after_the_step(rule_configs.StopTraining()) == rule_configs.StopTraining()


def test_the_catalogue_describes_both_rules_for_rules_show() -> None:
    for name in ("LossSpike", "GradientNormSpike"):
        spec = catalogue.get(name)
        assert spec.in_training and spec.kind == "debugging"
        assert spec.defaults()["window"] == 128
        assert spec.defaults()["sigma"] == 6.0
        assert spec.defaults()["warmup_steps"] == 20
    assert catalogue.get("loss_spike").name == "LossSpike"

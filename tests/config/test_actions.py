"""Rule actions: their serialised strings, their checks, and reading them back.

The exact strings are compared with smdebug-rulesconfig's in test_rules.py (one SageMaker SDK
subprocess for every comparison). Here: what the rule container does with the string (reference
§4.1/§6: it evaluates it as a Python string literal and parses the JSON), the checks, and
``ActionList.from_json``.
"""

from __future__ import annotations

import ast
import json

import pytest

from trainprobe.config.actions import (
    SMS,
    Action,
    ActionList,
    Email,
    ProfileNextSteps,
    StopTraining,
    Webhook,
    is_valid_action_object,
    parse_actions,
)
from trainprobe.config.errors import ConfigError, ConfigErrors


def as_the_container_reads(serialized: str) -> object:
    """The container runs json.loads("<serialized>"): a Python literal, then JSON."""
    return json.loads(ast.literal_eval('"' + serialized + '"'))


@pytest.mark.parametrize(
    "action",
    [
        StopTraining(),
        StopTraining("my-job-1"),
        Email("someone@example.com"),
        SMS("+14155550100"),
        Webhook("https://hooks.example.com/services/T0/B0/xyz?x=1"),
    ],
)
def test_an_action_serialises_to_what_the_container_parses(action: Action) -> None:
    assert as_the_container_reads(action.serialize()) == action.action_parameters
    assert action.action_parameters["name"] == type(action).__name__.lower()


def test_parameters_come_first_and_the_name_last() -> None:
    assert list(Email("a@b.com").action_parameters) == ["endpoint", "name"]
    assert StopTraining().action_parameters == {"name": "stoptraining"}


def test_an_action_list_serialises_as_a_list() -> None:
    actions = ActionList(StopTraining("job"), Email("a@b.com"), SMS("+15555550100"))
    parsed = as_the_container_reads(actions.serialize())
    assert parsed == [action.action_parameters for action in actions]
    assert actions.serialize() == "[" + ", ".join(a.serialize() for a in actions) + "]"
    assert ActionList().serialize() == "[]"


def test_stop_training_defaults_to_the_job_name() -> None:
    default, given = StopTraining(), StopTraining("other-job")
    actions = ActionList(default, given, Email("a@b.com"))
    actions.update_training_job_prefix_if_not_specified("train-2024-01")
    assert default.action_parameters["training_job_prefix"] == "train-2024-01"
    assert given.action_parameters["training_job_prefix"] == "other-job"
    assert "training_job_prefix" not in actions.actions[2].action_parameters


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: StopTraining("my_job"), "StopTraining.training_job_prefix"),
        (lambda: StopTraining("my job"), "StopTraining.training_job_prefix"),
        (lambda: StopTraining(7), "StopTraining.training_job_prefix"),  # type: ignore[arg-type]
        (lambda: Email("not-an-email"), "Email.email_address"),
        (lambda: Email("a@b"), "Email.email_address"),
        (lambda: Email('a"b@c.com'), "Email.email_address"),
        (lambda: SMS("+1 415 555 0100"), "SMS.phone_number"),
        (lambda: SMS("4155550100"), "SMS.phone_number"),
        (lambda: SMS("+1234567890123456"), "SMS.phone_number"),
        (lambda: Webhook("ftp://example.com/x"), "Webhook.url"),
        (lambda: Webhook("https://"), "Webhook.url"),
        (lambda: Webhook("https://example.com/a b"), "Webhook.url"),
        (lambda: Webhook('https://example.com/"'), "Webhook.url"),
        (lambda: ActionList(Email("a@b.com"), "sms"), "ActionList.actions[1]"),  # type: ignore[arg-type]
    ],
)
def test_bad_actions_name_the_field_and_value(build: object, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build()  # type: ignore[operator]
    assert caught.value.field == field
    assert caught.value.allowed.startswith("expected")


def test_prefix_update_checks_the_job_name() -> None:
    with pytest.raises(ConfigError) as caught:
        StopTraining().update_training_job_prefix_if_not_specified("bad name")
    assert caught.value.field == "training_job_name"


def test_email_addresses_the_sdk_refuses_but_mail_accepts() -> None:
    action = Email("First.Last+ml@example.co.uk")
    assert as_the_container_reads(action.serialize()) == action.action_parameters


def test_the_base_class_is_not_an_action() -> None:
    with pytest.raises(TypeError):
        Action(endpoint="x")


def test_valid_action_objects() -> None:
    assert is_valid_action_object(Email("a@b.com"))
    assert is_valid_action_object(ActionList())
    assert not is_valid_action_object("email")
    assert not is_valid_action_object([Email("a@b.com")])


def test_an_action_list_reads_back_from_its_string() -> None:
    actions = ActionList(
        StopTraining(), Email("a@b.com"), SMS("+15555550100"), Webhook("http://h/x")
    )
    actions.update_training_job_prefix_if_not_specified("job-7")
    parsed = ActionList.from_json(actions.serialize())
    assert parsed == actions
    assert parsed.serialize() == actions.serialize()
    assert [type(action) for action in parsed] == [StopTraining, Email, SMS, Webhook]


def test_plain_json_and_any_case_of_name_are_read() -> None:
    text = '[{"name": "Email", "endpoint": "a@b.com"}, {"name": "STOPTRAINING"}]'
    parsed = ActionList.from_json(text)
    assert parsed == ActionList(Email("a@b.com"), StopTraining())
    assert parsed.actions[1].use_default_training_job_prefix  # type: ignore[attr-defined]


def test_one_action_reads_back_as_one_action() -> None:
    single = parse_actions(SMS("+15555550100").serialize())
    assert single == SMS("+15555550100")
    assert ActionList.from_json(SMS("+15555550100").serialize()) == ActionList(SMS("+15555550100"))


@pytest.mark.parametrize(
    ("text", "field", "suggestion"),
    [
        ("not json", "action_json", None),
        ("42", "action_json", None),
        ('[{"name": "emial", "endpoint": "a@b.com"}]', "action_json[0].name", "email"),
        ('[{"endpoint": "a@b.com"}]', "action_json[0].name", None),
        ('[{"name": "email"}]', "action_json[0].endpoint", None),
        ('[{"name": "email", "endpoint": "nope"}]', "action_json[0].endpoint", None),
        ('[{"name": "sms", "endpont": "+1555"}]', "action_json[0].endpont", "endpoint"),
        ('[{"name": "stoptraining", "training_job_prefix": "a b"}]', None, None),
        ('["email"]', "action_json[0]", None),
    ],
)
def test_bad_action_json_is_reported(text: str, field: str | None, suggestion: str | None) -> None:
    with pytest.raises(ConfigError) as caught:
        ActionList.from_json(text)
    expected = field or "action_json[0].training_job_prefix"
    assert caught.value.field == expected
    assert caught.value.suggestion == suggestion


def test_every_bad_action_in_a_list_is_reported() -> None:
    with pytest.raises(ConfigErrors) as caught:
        ActionList.from_json('[{"name": "sms", "endpoint": "x"}, {"name": "pager"}]')
    assert [error.field for error in caught.value] == [
        "action_json[0].endpoint",
        "action_json[1].name",
    ]


def test_profile_next_steps_reads_back_and_refuses_a_count_out_of_range() -> None:
    action = ProfileNextSteps(steps=3)
    assert action.serialize() == '{\\"steps\\": \\"3\\", \\"name\\": \\"profilenextsteps\\"}'
    assert parse_actions(action.serialize()) == action
    assert parse_actions('{"name": "ProfileNextSteps"}') == ProfileNextSteps(2)
    for bad in (0, 21, "two", True):
        with pytest.raises(ConfigError, match=r"ProfileNextSteps\.steps") as caught:
            ProfileNextSteps(bad)  # type: ignore[arg-type]
        assert "from 1 to 20" in str(caught.value)
    with pytest.raises(ConfigError, match=r"action_json\.steps"):
        parse_actions('{"name": "profilenextsteps", "steps": "50"}')

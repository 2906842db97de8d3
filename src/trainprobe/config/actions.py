"""What to do when a rule fires: stop the training job, send an email or SMS, or call a webhook.

``StopTraining``, ``Email``, ``SMS`` and ``ActionList`` have the names, signatures and serialised
strings of smdebug-rulesconfig's actions, which the SageMaker SDK puts into a rule's
``RuleParameters["action_json"]``. The string is JSON with every quote escaped by a backslash, the
way the rule container reads it; ``ActionList.from_json`` reads that form and plain JSON alike.

``Webhook`` is a trainprobe addition: it POSTs a JSON message (Slack-compatible) to a URL.

Each action checks its value when built and raises ConfigError naming the field: a job prefix of
letters, digits and hyphens; an email address; an E.164 phone number; an http(s) URL. Email
addresses are checked less strictly than smdebug-rulesconfig does (it refuses dots and capitals
in the local part); no accepted value can contain a quote or a backslash, which would break the
serialised string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from trainprobe.config.errors import ConfigError, ConfigErrors, closest
from trainprobe.config.json_bounds import embedded_json

__all__ = [
    "SMS",
    "Action",
    "ActionList",
    "Email",
    "StopTraining",
    "Webhook",
    "is_valid_action_object",
    "parse_actions",
]

_JOB_PREFIX = re.compile(r"[A-Za-z0-9\-]+")
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*\.[A-Za-z0-9]{2,}")
_PHONE = re.compile(r"\+\d{1,15}")
_UNSAFE_IN_URL = re.compile(r"[\s\"\\<>]")


class Action:
    """One thing to do when a rule fires; use StopTraining, Email, SMS or Webhook.

    ``action_parameters`` is what gets serialised: the given values (None left out), then
    ``name``, the action's JSON name.
    """

    json_name: ClassVar[str] = ""

    def __init__(self, **action_parameters: str | None) -> None:
        if not self.json_name:
            raise TypeError("Action is a base class; use StopTraining, Email, SMS or Webhook")
        parameters = {key: value for key, value in action_parameters.items() if value is not None}
        parameters["name"] = self.json_name
        self.action_parameters: dict[str, str] = parameters

    def serialize(self) -> str:
        """The action as the rule container reads it: JSON with backslash-escaped quotes."""
        pairs = [f'\\"{key}\\": \\"{value}\\"' for key, value in self.action_parameters.items()]
        return "{" + ", ".join(pairs) + "}"

    def update_training_job_prefix_if_not_specified(self, training_job_name: str) -> None:
        """Only StopTraining uses the job name; other actions ignore it."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Action):
            return NotImplemented
        return type(self) is type(other) and self.action_parameters == other.action_parameters

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = {key: value for key, value in self.action_parameters.items() if key != "name"}
        arguments = ", ".join(f"{key}={value!r}" for key, value in shown.items())
        return f"{type(self).__name__}({arguments})"


class StopTraining(Action):
    """Stop the training job whose name starts with ``training_job_prefix`` when the rule fires.

    Without a prefix, the job's own name is used (set by ``Rule.prepare_actions``). The prefix
    must match exactly one running job, otherwise nothing is stopped.
    """

    json_name = "stoptraining"

    def __init__(self, training_job_prefix: str | None = None) -> None:
        self.use_default_training_job_prefix = training_job_prefix is None
        if training_job_prefix is not None:
            _check_job_prefix("StopTraining.training_job_prefix", training_job_prefix)
        super().__init__(training_job_prefix=training_job_prefix)

    def update_training_job_prefix_if_not_specified(self, training_job_name: str) -> None:
        """Use ``training_job_name`` as the prefix, unless one was given."""
        if self.use_default_training_job_prefix:
            _check_job_prefix("training_job_name", training_job_name)
            self.action_parameters["training_job_prefix"] = training_job_name


class Email(Action):
    """Send an email to ``email_address`` when the rule fires."""

    json_name = "email"

    def __init__(self, email_address: str) -> None:
        if not isinstance(email_address, str) or not _EMAIL.fullmatch(email_address):
            raise ConfigError(
                "Email.email_address", email_address, "expected an email address: name@domain.tld"
            )
        super().__init__(endpoint=email_address)


class SMS(Action):
    """Send a text message to ``phone_number`` (E.164: + and up to 15 digits) when it fires."""

    json_name = "sms"

    def __init__(self, phone_number: str) -> None:
        if not isinstance(phone_number, str) or not _PHONE.fullmatch(phone_number):
            raise ConfigError(
                "SMS.phone_number",
                phone_number,
                "expected a phone number in E.164 format: + and up to 15 digits, e.g. +14155550100",
            )
        super().__init__(endpoint=phone_number)


class Webhook(Action):
    """POST a JSON message (Slack-compatible: it has a ``text`` field) to ``url`` when it fires.

    A trainprobe addition; the URL must be http or https.
    """

    json_name = "webhook"

    def __init__(self, url: str) -> None:
        if not _is_web_url(url):
            raise ConfigError(
                "Webhook.url", url, "expected an http:// or https:// URL with a host, no spaces"
            )
        super().__init__(endpoint=url)


class ActionList:
    """The actions a rule takes when it fires, serialised together into ``action_json``."""

    def __init__(self, *actions: Action) -> None:
        for index, action in enumerate(actions):
            if not isinstance(action, Action):
                raise ConfigError(
                    f"ActionList.actions[{index}]",
                    action,
                    "expected an action: StopTraining, Email, SMS or Webhook",
                )
        self.actions = actions

    def update_training_job_prefix_if_not_specified(self, training_job_name: str) -> None:
        """Give every StopTraining without a prefix the job's name as its prefix."""
        for action in self.actions:
            action.update_training_job_prefix_if_not_specified(training_job_name)

    def serialize(self) -> str:
        """The list as the rule container reads it: ``[`` + the actions' strings + ``]``."""
        return "[" + ", ".join(action.serialize() for action in self.actions) + "]"

    @classmethod
    def from_json(cls, text: str, *, field: str = "action_json") -> ActionList:
        """Read an ``action_json`` string (one action or a list) back into an ActionList."""
        parsed = parse_actions(text, field=field)
        return parsed if isinstance(parsed, ActionList) else cls(parsed)

    def __iter__(self) -> Iterator[Action]:
        return iter(self.actions)

    def __len__(self) -> int:
        return len(self.actions)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ActionList):
            return NotImplemented
        return list(self.actions) == list(other.actions)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ActionList({', '.join(map(repr, self.actions))})"


def is_valid_action_object(actions: object) -> bool:
    """Whether ``actions`` can be a rule's actions: an Action or an ActionList."""
    return isinstance(actions, Action | ActionList)


def parse_actions(text: object, *, field: str = "action_json") -> Action | ActionList:
    """Read an ``action_json`` string: a JSON object gives an Action, a list an ActionList.

    Accepts the serialised form (quotes escaped by backslashes) and plain JSON, within the
    bounds of ``trainprobe.config.json_bounds``; action names are matched case-insensitively.
    Raises ConfigError, or ConfigErrors for several bad actions.
    """
    if not isinstance(text, str):
        raise ConfigError(field, text, "expected a JSON string of actions")
    try:
        data = embedded_json(text, field)
    except json.JSONDecodeError:
        try:
            data = embedded_json(text.replace('\\"', '"'), field)
        except json.JSONDecodeError:
            raise ConfigError(field, text, "expected a JSON object or list of actions") from None
    if isinstance(data, dict):
        return _action_from_dict(data, field)
    if not isinstance(data, list):
        raise ConfigError(field, text, "expected a JSON object or list of actions")
    actions: list[Action] = []
    errors: list[ConfigError] = []
    for index, item in enumerate(data):
        try:
            actions.append(_action_from_dict(item, f"{field}[{index}]"))
        except ConfigError as error:
            errors.append(error)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)
    return ActionList(*actions)


_BY_NAME: dict[str, type[Action]] = {
    kind.json_name: kind for kind in (StopTraining, Email, SMS, Webhook)
}
_BUILDERS: dict[type[Action], Callable[[Any], Action]] = {
    StopTraining: StopTraining,
    Email: Email,
    SMS: SMS,
    Webhook: Webhook,
}


def _action_from_dict(item: object, field: str) -> Action:
    if not isinstance(item, Mapping):
        raise ConfigError(field, item, 'expected an object such as {"name": "email", ...}')
    name = item.get("name")
    kind = _BY_NAME.get(name.lower()) if isinstance(name, str) else None
    if kind is None:
        raise ConfigError(
            f"{field}.name",
            name,
            f"expected one of {', '.join(_BY_NAME)}",
            suggestion=closest(name, _BY_NAME) if isinstance(name, str) else None,
        )
    value_key = "training_job_prefix" if kind is StopTraining else "endpoint"
    for key in item:
        if key not in ("name", value_key):
            raise ConfigError(
                f"{field}.{key}",
                item[key],
                f"a {kind.json_name} action has only name and {value_key}",
                suggestion=closest(str(key), ("name", value_key)),
            )
    value = item.get(value_key)
    if kind is not StopTraining and value is None:
        raise ConfigError(f"{field}.{value_key}", None, f"a {kind.json_name} action needs it")
    try:
        action = _BUILDERS[kind](value)
    except ConfigError as error:
        raise ConfigError(f"{field}.{value_key}", error.value, error.allowed) from None
    # Keep the order the keys came in, so the action serialises back to the same string.
    action.action_parameters = {key: action.action_parameters[key] for key in item}
    return action


def _check_job_prefix(field: str, value: object) -> None:
    if not isinstance(value, str) or not _JOB_PREFIX.fullmatch(value):
        raise ConfigError(field, value, "expected only letters, digits and hyphens")


def _is_web_url(url: object) -> bool:
    if not isinstance(url, str) or _UNSAFE_IN_URL.search(url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)

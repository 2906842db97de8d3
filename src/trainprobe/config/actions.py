"""What to do when a rule fires: stop the training job, send an email or SMS, call a webhook,
or profile the next steps; for the in-training rules, skip the spiking update or roll back.

``StopTraining``, ``Email``, ``SMS`` and ``ActionList`` have the names, signatures and serialised
strings of smdebug-rulesconfig's actions, which the SageMaker SDK puts into a rule's
``RuleParameters["action_json"]``. The string is JSON with every quote escaped by a backslash, the
way the rule container reads it; ``ActionList.from_json`` reads that form and plain JSON alike.

``Webhook`` is a trainprobe addition: it POSTs a JSON message (Slack-compatible) to a URL.
``ProfileNextSteps`` is one too: the training's flight recorder captures its next steps with
torch.profiler, asked through the job's profiler output as StopTraining asks through its file.
``SkipStep`` and ``Rollback`` are trainprobe additions too, for the rules the hook judges inside
the training (``LossSpike``, ``GradientNormSpike``): the hook carries them out within the step,
before the spiking update (``rules.Rule`` refuses them on any other rule); a rule's evaluator
carries out the others (``after_the_step``).

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
    "ProfileNextSteps",
    "Rollback",
    "SkipStep",
    "StopTraining",
    "Webhook",
    "after_the_step",
    "is_valid_action_object",
    "parse_actions",
    "within_the_step",
]

_JOB_PREFIX = re.compile(r"[A-Za-z0-9\-]+")
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*\.[A-Za-z0-9]{2,}")
_PHONE = re.compile(r"\+\d{1,15}")
_UNSAFE_IN_URL = re.compile(r"[\s\"\\<>]")
MAX_PROFILED_STEPS = 20
"""The most steps one capture of the flight recorder may span (its traces grow every step)."""


_KINDS_IN_WORDS = "StopTraining, Email, SMS, Webhook, ProfileNextSteps, SkipStep or Rollback"


class Action:
    """One thing to do when a rule fires; use StopTraining, Email, SMS, Webhook, SkipStep or
    Rollback.

    ``action_parameters`` is what gets serialised: the given values (None left out), then
    ``name``, the action's JSON name. ``json_keys`` are the keys it has besides ``name``.
    """

    json_name: ClassVar[str] = ""
    json_keys: ClassVar[tuple[str, ...]] = ("endpoint",)

    def __init__(self, **action_parameters: str | None) -> None:
        if not self.json_name:
            raise TypeError(f"Action is a base class; use {_KINDS_IN_WORDS}")
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
    json_keys = ("training_job_prefix",)

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


class ProfileNextSteps(Action):
    """Capture the training's next ``steps`` steps (1 to 20) with torch.profiler when the rule
    fires: the training's flight recorder writes them under the job's profiler output, named by
    the trigger ``rule`` and the step. Needs framework profiling. A trainprobe addition.
    """

    json_name = "profilenextsteps"
    json_keys = ("steps",)

    def __init__(self, steps: int | str = 2) -> None:
        count = _whole_number(steps)
        if count is None or not 1 <= count <= MAX_PROFILED_STEPS:
            raise ConfigError(
                "ProfileNextSteps.steps",
                steps,
                f"a whole number of steps from 1 to {MAX_PROFILED_STEPS}",
            )
        super().__init__(steps=str(count))

    @property
    def steps(self) -> int:
        """How many steps the capture profiles."""
        return int(self.action_parameters["steps"])


class SkipStep(Action):
    """Skip the update of a step whose loss (or gradient norm) spikes: the model and the
    optimizer stay as they were before the step. For LossSpike and GradientNormSpike only; the
    hook does it inside the step. A trainprobe addition.
    """

    json_name = "SkipStep"
    json_keys = ()

    def __init__(self) -> None:
        super().__init__()


class Rollback(Action):
    """On a spike, put the model and the optimizer back to where they were at most ``steps``
    updates before, multiply the learning rates by ``lr_factor`` (0 < lr_factor <= 1), and skip
    the spiking update. For LossSpike and GradientNormSpike only; the hook does it inside the
    step. A trainprobe addition.
    """

    json_name = "Rollback"
    json_keys = ("steps", "lr_factor")

    def __init__(self, steps: int | str = 50, lr_factor: float | str = 1.0) -> None:
        count = _whole_number(steps)
        if count is None or count < 1:
            raise ConfigError("Rollback.steps", steps, "expected an integer >= 1 (updates)")
        factor = _real(lr_factor)
        if factor is None or not 0 < factor <= 1:
            raise ConfigError("Rollback.lr_factor", lr_factor, "expected a number, 0 < x <= 1")
        super().__init__()
        self.action_parameters = {"name": self.json_name, "steps": str(count)}
        self.action_parameters["lr_factor"] = repr(factor)

    @property
    def steps(self) -> int:
        """How many updates back, at most, the snapshot it returns to was taken."""
        return int(self.action_parameters["steps"])

    @property
    def lr_factor(self) -> float:
        """What the learning rates are multiplied by after the rollback."""
        return float(self.action_parameters["lr_factor"])


WITHIN_THE_STEP: tuple[type[Action], ...] = (SkipStep, Rollback, StopTraining)
"""The actions that decide what becomes of a spiking step (at most one per rule)."""


class ActionList:
    """The actions a rule takes when it fires, serialised together into ``action_json``."""

    def __init__(self, *actions: Action) -> None:
        for index, action in enumerate(actions):
            if not isinstance(action, Action):
                raise ConfigError(
                    f"ActionList.actions[{index}]",
                    action,
                    f"expected an action: {_KINDS_IN_WORDS}",
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


def _listed(actions: Action | ActionList | None) -> list[Action]:
    if actions is None:
        return []
    return list(actions) if isinstance(actions, ActionList) else [actions]


def within_the_step(actions: Action | ActionList | None) -> list[Action]:
    """The actions that decide what becomes of a spiking step: SkipStep, Rollback,
    StopTraining (the hook of an in-training rule carries them out)."""
    return [action for action in _listed(actions) if isinstance(action, WITHIN_THE_STEP)]


def after_the_step(
    actions: str | Action | ActionList | None,
) -> Action | ActionList | None:
    """``actions`` (an ``action_json`` string, an Action or an ActionList) without SkipStep
    and Rollback: what a rule's evaluator carries out (the hook did those inside the step).
    None when nothing is left."""
    if isinstance(actions, str):
        actions = parse_actions(actions) if actions.strip() else None
    kept = [a for a in _listed(actions) if not isinstance(a, SkipStep | Rollback)]
    if not kept:
        return None
    return kept[0] if isinstance(actions, Action) else ActionList(*kept)


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


_KINDS = (StopTraining, Email, SMS, Webhook, ProfileNextSteps, SkipStep, Rollback)
_BY_NAME: dict[str, type[Action]] = {kind.json_name.lower(): kind for kind in _KINDS}
_BUILDERS: dict[type[Action], Callable[[dict[str, Any]], Action]] = {
    StopTraining: lambda values: StopTraining(values.get("training_job_prefix")),
    Email: lambda values: Email(values["endpoint"]),
    SMS: lambda values: SMS(values["endpoint"]),
    Webhook: lambda values: Webhook(values["endpoint"]),
    ProfileNextSteps: lambda values: ProfileNextSteps(**values),
    SkipStep: lambda values: SkipStep(),
    Rollback: lambda values: Rollback(**values),
}
_ENDPOINT_NEEDED = (Email, SMS, Webhook)


def _action_from_dict(item: object, field: str) -> Action:
    if not isinstance(item, Mapping):
        raise ConfigError(field, item, 'expected an object such as {"name": "email", ...}')
    name = item.get("name")
    kind = _BY_NAME.get(name.lower()) if isinstance(name, str) else None
    if kind is None:
        raise ConfigError(
            f"{field}.name",
            name,
            f"expected one of {', '.join(kind.json_name for kind in _KINDS)}",
            suggestion=closest(name, [kind.json_name for kind in _KINDS])
            if isinstance(name, str)
            else None,
        )
    keys = kind.json_keys
    for key in item:
        if key not in ("name", *keys):
            has = f"only name and {', '.join(keys)}" if keys else "only a name"
            raise ConfigError(
                f"{field}.{key}",
                item[key],
                f"a {kind.json_name} action has {has}",
                suggestion=closest(str(key), ("name", *keys)),
            )
    if kind in _ENDPOINT_NEEDED and item.get("endpoint") is None:
        raise ConfigError(f"{field}.endpoint", None, f"a {kind.json_name} action needs it")
    values = {key: item[key] for key in keys if item.get(key) is not None}
    try:
        action = _BUILDERS[kind](values)
    except ConfigError as error:
        key = keys[0] if len(keys) == 1 else error.field.rpartition(".")[2]
        raise ConfigError(f"{field}.{key}", error.value, error.allowed) from None
    # Keep the order the keys came in, so the action serialises back to the same string.
    given = [key for key in item if key in action.action_parameters]
    rest = [key for key in action.action_parameters if key not in given]
    action.action_parameters = {key: action.action_parameters[key] for key in (*given, *rest)}
    return action


def _whole_number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _real(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


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

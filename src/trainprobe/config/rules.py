"""``Rule`` and ``ProfilerRule``: which rules watch a job, configured as the SageMaker SDK does.

The classes, class methods, signatures, defaults, attributes and request dictionaries
(``to_debugger_rule_config_dict``, ``to_profiler_rule_config_dict``) are those of
``sagemaker.debugger``. Unlike the SDK, trainprobe checks a rule when it is built, and raises
ConfigError (ConfigErrors for several problems) naming the field:

- the rule's name, which names its output directory (``trainprobe.config.names``);
- a built-in rule's parameters, against the catalogue (names, types, ranges, required ones);
- ``rule_to_invoke`` given to ``Rule.sagemaker`` (it belongs to custom rules);
- a custom rule with ``source`` but no ``rule_to_invoke``, or the reverse;
- actions that are not Action/ActionList, and ``action_json`` that does not parse;
- SkipStep or Rollback on a rule the hook does not judge inside the training (only LossSpike
  and GradientNormSpike take them), and more than one of SkipStep, Rollback and StopTraining
  on one rule (each decides what becomes of the spiking step).

``from_request_dict`` reads one ``DebugRuleConfiguration`` / ``ProfilerRuleConfiguration`` of a
CreateTrainingJob request into the same object, checked the same way, with fields named as in the
request (``RuleParameters.threshold``). A configuration is a custom rule when its
``RuleParameters`` has ``source_s3_uri`` (a local path or URL here) or its image is not the
built-in rules image (or the SDK's placeholder, ``DEFAULT_RULE_EVALUATOR_IMAGE``); otherwise
``rule_to_invoke`` must name a built-in rule of the right kind.
"""

from __future__ import annotations

import abc
import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from trainprobe.config import catalogue, rule_configs
from trainprobe.config.actions import (
    Action,
    ActionList,
    Rollback,
    SkipStep,
    parse_actions,
    within_the_step,
)
from trainprobe.config.catalogue.model import is_engine_key, raise_if_any
from trainprobe.config.errors import ConfigError, closest
from trainprobe.config.hook_config import CollectionConfig
from trainprobe.config.json_bounds import nesting_problem
from trainprobe.config.names import check_rule_name

__all__ = [
    "BUILTIN_RULES_REPOSITORY",
    "PLACEHOLDER_IMAGE",
    "ProfilerRule",
    "Rule",
    "RuleBase",
    "get_default_profiler_rule",
    "get_rule_container_image_uri",
]

PLACEHOLDER_IMAGE = "DEFAULT_RULE_EVALUATOR_IMAGE"
"""The image the SDK gives built-in rules until the job's region is known."""

BUILTIN_RULES_REPOSITORY = "sagemaker-debugger-rules"

# The account that hosts the built-in rules image in each region (as the SageMaker SDK lists them).
_RULE_IMAGE_ACCOUNTS = {
    "af-south-1": "314341159256",
    "ap-east-1": "199566480951",
    "ap-northeast-1": "430734990657",
    "ap-northeast-2": "578805364391",
    "ap-northeast-3": "479947661362",
    "ap-south-1": "904829902805",
    "ap-southeast-1": "972752614525",
    "ap-southeast-2": "184798709955",
    "ca-central-1": "519511493484",
    "cn-north-1": "618459771430",
    "cn-northwest-1": "658757709296",
    "eu-central-1": "482524230118",
    "eu-north-1": "314864569078",
    "eu-south-1": "563282790590",
    "eu-west-1": "929884845733",
    "eu-west-2": "250201462417",
    "eu-west-3": "447278800020",
    "me-south-1": "986000313247",
    "sa-east-1": "818342061345",
    "us-east-1": "503895931360",
    "us-east-2": "915447279597",
    "us-gov-west-1": "515509971035",
    "us-west-1": "685455198987",
    "us-west-2": "895741380848",
}
_DETAILED_PROFILER_ACCOUNTS = {
    "eu-central-1": "482524230118",
    "eu-west-1": "929884845733",
    "il-central-1": "216881608335",
    "us-east-1": "503895931360",
    "us-east-2": "915447279597",
    "us-west-2": "895741380848",
}
_CHINA_REGIONS = ("cn-north-1", "cn-northwest-1")


def get_rule_container_image_uri(name_or_region: str | None, region: str | None = None) -> str:
    """The URI of the built-in rules image in ``region``, as the SageMaker SDK gives it.

    Called as ``get_rule_container_image_uri(region)`` (the documented form) or
    ``get_rule_container_image_uri(name, region)`` (the SDK 2.x form, where a name starting with
    ``DetailedProfilerProcessingJobConfig`` selects the detailed-profiler image). trainprobe runs
    rules locally and needs no image; the URI only fills in requests meant for SageMaker.
    """
    name = name_or_region if region is not None else None
    region = region if region is not None else name_or_region
    accounts, repository = _RULE_IMAGE_ACCOUNTS, BUILTIN_RULES_REPOSITORY
    if name is not None and name.startswith("DetailedProfilerProcessingJobConfig"):
        accounts, repository = _DETAILED_PROFILER_ACCOUNTS, "detailed-profiler-processing"
    account = accounts.get(region) if isinstance(region, str) else None
    if account is None:
        raise ConfigError(
            "region",
            region,
            f"expected a region with a Debugger rules image ({len(accounts)} regions, e.g. "
            "us-east-1)",
            suggestion=closest(region, accounts) if isinstance(region, str) else None,
        )
    domain = "amazonaws.com.cn" if region in _CHINA_REGIONS else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/{repository}:latest"


def get_default_profiler_rule() -> ProfilerRule:
    """ProfilerReport with the default parameters and a unique name (``ProfilerReport-<time>``)."""
    global _last_default_suffix
    _last_default_suffix = max(int(time.time()), _last_default_suffix + 1)
    name = f"ProfilerReport-{_last_default_suffix}"
    return ProfilerRule.sagemaker(rule_configs.ProfilerReport(), name=name)


_last_default_suffix = 0


def is_builtin_image(image_uri: object) -> bool:
    """Whether ``image_uri`` is the SDK's placeholder or a built-in rules image."""
    if not isinstance(image_uri, str):
        return False
    repository = image_uri.rsplit("/", 1)[-1].split(":", 1)[0]
    return image_uri == PLACEHOLDER_IMAGE or repository == BUILTIN_RULES_REPOSITORY


def is_custom(image_uri: object, parameters: Mapping[str, Any]) -> bool:
    """Whether a rule configuration names a custom rule rather than a built-in one.

    A rule with a source file is custom. Without one, a built-in rules image means a built-in
    rule; any other image (images mean nothing to a local run) is taken as built-in when
    ``rule_to_invoke`` names a built-in rule, and as custom otherwise.
    """
    if parameters.get("source_s3_uri") is not None:
        return True
    if is_builtin_image(image_uri):
        return False
    try:
        catalogue.get(str(parameters.get("rule_to_invoke")))
    except ConfigError:
        return True
    return False


_MAX_IMAGE_LENGTH = 255
"""SageMaker's limit on RuleEvaluatorImage."""

# Field names for the attributes, as Python arguments and as request keys.
_PYTHON_FIELDS = {
    "name": "name",
    "image_uri": "image_uri",
    "instance_type": "instance_type",
    "container_local_output_path": "container_local_output_path",
    "s3_output_path": "s3_output_path",
    "volume_size_in_gb": "volume_size_in_gb",
    "rule_parameters": "rule_parameters",
}
_REQUEST_FIELDS = {
    "name": "RuleConfigurationName",
    "image_uri": "RuleEvaluatorImage",
    "instance_type": "InstanceType",
    "container_local_output_path": "LocalPath",
    "s3_output_path": "S3OutputPath",
    "volume_size_in_gb": "VolumeSizeInGB",
    "rule_parameters": "RuleParameters",
}


class RuleBase(abc.ABC):
    """What Rule and ProfilerRule share; build them with their class methods, not directly.

    Attributes: ``name``, ``image_uri``, ``instance_type``, ``container_local_output_path``,
    ``s3_output_path``, ``volume_size_in_gb``, ``rule_parameters``. Two rules are equal when these
    are.
    """

    _kind = ""

    def __init__(
        self,
        name: str,
        image_uri: str,
        instance_type: str | None,
        container_local_output_path: str | None,
        s3_output_path: str | None,
        volume_size_in_gb: int | None,
        rule_parameters: dict[str, Any] | None,
    ) -> None:
        fields = dict(
            name=name,
            image_uri=image_uri,
            instance_type=instance_type,
            container_local_output_path=container_local_output_path,
            s3_output_path=s3_output_path,
            volume_size_in_gb=volume_size_in_gb,
            rule_parameters=rule_parameters,
        )
        raise_if_any(self._check(fields, _PYTHON_FIELDS))
        self.name = name
        self.image_uri = image_uri
        self.instance_type = instance_type
        self.container_local_output_path = container_local_output_path
        self.s3_output_path = s3_output_path
        self.volume_size_in_gb = volume_size_in_gb
        self.rule_parameters = rule_parameters

    @property
    def spec(self) -> catalogue.RuleSpec | None:
        """The catalogue entry of a built-in rule; None for a custom rule."""
        parameters = self.rule_parameters or {}
        if is_custom(self.image_uri, parameters):
            return None
        try:
            return catalogue.get(str(parameters.get("rule_to_invoke")))
        except ConfigError:
            return None

    @property
    def effective_parameters(self) -> dict[str, object]:
        """A built-in rule's parameters, typed, with the defaults filled in; for a custom rule,
        its parameters as given, without the runner's keys."""
        parameters = dict(self.rule_parameters or {})
        if self.spec is None:
            return {k: v for k, v in parameters.items() if not is_engine_key(k)}
        return self.spec.effective_parameters(parameters)

    @abc.abstractmethod
    def to_request_dict(self) -> dict[str, Any]:
        """This rule's entry in a CreateTrainingJob request."""

    def _request_fields(self) -> dict[str, Any]:
        request: dict[str, Any] = {
            "RuleConfigurationName": self.name,
            "RuleEvaluatorImage": self.image_uri,
        }
        optional = (
            ("InstanceType", self.instance_type),
            ("VolumeSizeInGB", self.volume_size_in_gb),
            ("LocalPath", self.container_local_output_path),
            ("S3OutputPath", self.s3_output_path),
        )
        # As the SDK does, empty values (None, 0, "") are left out.
        request.update({key: value for key, value in optional if value})
        return request

    @classmethod
    def _check(cls, fields: Mapping[str, Any], names: Mapping[str, str]) -> list[ConfigError]:
        errors = []
        image = fields["image_uri"]
        if not isinstance(image, str) or not image or len(image) > _MAX_IMAGE_LENGTH:
            allowed = "required: a string of 1 to 255 characters"
            errors.append(ConfigError(names["image_uri"], image, allowed))
        try:
            check_rule_name(fields["name"], names["name"])
        except ConfigError as error:
            errors.append(error)
        for key in ("instance_type", "container_local_output_path", "s3_output_path"):
            value = fields[key]
            if value is not None and (not isinstance(value, str) or not value):
                errors.append(ConfigError(names[key], value, "expected a non-empty string"))
        volume = fields["volume_size_in_gb"]
        if volume is not None and (not isinstance(volume, int) or isinstance(volume, bool)):
            errors.append(ConfigError(names["volume_size_in_gb"], volume, "expected an integer"))
        elif volume is not None and volume < 0:
            errors.append(ConfigError(names["volume_size_in_gb"], volume, "expected >= 0"))
        parameters = fields["rule_parameters"]
        where = names["rule_parameters"]
        if parameters is None or not isinstance(fields["image_uri"], str):
            return errors
        if not isinstance(parameters, Mapping) or not all(isinstance(k, str) for k in parameters):
            return [*errors, ConfigError(where, parameters, "expected a dict with string keys")]
        too_deep = nesting_problem(dict(parameters), where)
        if too_deep is not None:
            return [*errors, too_deep]
        return errors + cls._check_parameters(fields["image_uri"], parameters, where)

    @classmethod
    def _check_parameters(
        cls, image_uri: object, parameters: Mapping[str, Any], where: str
    ) -> list[ConfigError]:
        source, rule_to_invoke = parameters.get("source_s3_uri"), parameters.get("rule_to_invoke")
        if is_custom(image_uri, parameters):
            return _check_custom(
                source, rule_to_invoke, f"{where}.source_s3_uri", f"{where}.rule_to_invoke"
            )
        rule_field = f"{where}.rule_to_invoke"
        if not isinstance(rule_to_invoke, str):
            return [ConfigError(rule_field, rule_to_invoke, "expected a built-in rule's name")]
        try:
            spec = catalogue.get(rule_to_invoke, field=rule_field)
        except ConfigError as error:
            return [error]
        if spec.kind != cls._kind:
            other = "Rule" if spec.kind == "debugging" else "ProfilerRule"
            allowed = f"{spec.name} is a {spec.kind} rule: configure it with {other}"
            return [ConfigError(rule_field, rule_to_invoke, allowed)]
        return spec.check(parameters, field_prefix=where)[1]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RuleBase):
            return NotImplemented
        return type(self) is type(other) and self._compared() == other._compared()

    __hash__ = None  # type: ignore[assignment]

    def _compared(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.image_uri,
            self.instance_type,
            self.container_local_output_path,
            self.s3_output_path,
            self.volume_size_in_gb,
            self.rule_parameters,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, image_uri={self.image_uri!r}, "
            f"instance_type={self.instance_type!r}, "
            f"container_local_output_path={self.container_local_output_path!r}, "
            f"s3_output_path={self.s3_output_path!r}, "
            f"volume_size_in_gb={self.volume_size_in_gb!r}, "
            f"rule_parameters={self.rule_parameters!r})"
        )


def _check_custom(
    source: object, rule_to_invoke: object, source_field: str, rule_field: str
) -> list[ConfigError]:
    """A custom rule names both a source and the rule to invoke in it, or neither."""
    if bool(source) == bool(rule_to_invoke):
        if source is not None and not isinstance(source, str):
            return [ConfigError(source_field, source, "expected a local path or URL")]
        if rule_to_invoke is not None and not isinstance(rule_to_invoke, str):
            return [ConfigError(rule_field, rule_to_invoke, "expected a rule class name")]
        return []
    if source:
        return [ConfigError(rule_field, None, "a custom rule with a source needs rule_to_invoke")]
    return [ConfigError(source_field, None, f"rule_to_invoke {rule_to_invoke!r} needs a source")]


def _check_actions(actions: object, field: str) -> list[ConfigError]:
    if actions is None or isinstance(actions, Action | ActionList):
        return []
    return [ConfigError(field, actions, "expected an Action or ActionList")]


def _check_actions_fit(
    spec: catalogue.RuleSpec | None, actions: Action | ActionList | None, field: str
) -> list[ConfigError]:
    """SkipStep and Rollback only on an in-training rule; at most one action of the step."""
    deciding = within_the_step(actions)
    in_step = [action for action in deciding if isinstance(action, SkipStep | Rollback)]
    if in_step and (spec is None or not spec.in_training):
        takers = [rule.name for rule in catalogue.debugging_rules() if rule.in_training]
        rule = "a custom rule" if spec is None else spec.name
        allowed = (
            f"{type(in_step[0]).__name__} acts inside the training step: only "
            f"{' and '.join(takers)} take it, not {rule} (use StopTraining, Email, SMS or "
            "Webhook)"
        )
        return [ConfigError(field, in_step[0], allowed)]
    if spec is not None and spec.in_training and len(deciding) > 1:
        allowed = (
            "at most one of SkipStep, Rollback and StopTraining: each decides what becomes "
            "of the spiking step"
        )
        return [ConfigError(field, deciding, allowed)]
    return []


def _check_collections(collections: object, field: str) -> list[ConfigError]:
    if collections is None:
        return []
    if not isinstance(collections, list | tuple):
        return [ConfigError(field, collections, "expected a list of CollectionConfig")]
    return [
        ConfigError(f"{field}[{index}]", item, "expected a CollectionConfig")
        for index, item in enumerate(collections)
        if not isinstance(item, CollectionConfig)
    ]


def _custom_parameters(
    source: str | None, rule_to_invoke: str | None, rule_parameters: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A custom rule's parameters: where its class lives, which class, then the user's own."""
    parameters: dict[str, Any] = {}
    if source:
        parameters["source_s3_uri"] = source
    if rule_to_invoke:
        parameters["rule_to_invoke"] = rule_to_invoke
    if rule_parameters is not None and not isinstance(rule_parameters, Mapping):
        raise ConfigError("rule_parameters", rule_parameters, "a dict of parameters, or None")
    parameters.update(rule_parameters or {})
    return parameters


def _other_trials(paths: object, field: str) -> dict[str, Any]:
    if paths is None:
        return {}
    if not isinstance(paths, list | tuple):
        raise ConfigError(field, paths, "expected a list of paths or URLs")
    for index, path in enumerate(paths):
        if not isinstance(path, str) or not path:
            raise ConfigError(f"{field}[{index}]", path, "expected a path or URL")
    return {f"other_trial_{index}": path for index, path in enumerate(paths)}


def _request_errors(request: object, allowed: Sequence[str]) -> list[ConfigError]:
    if not isinstance(request, Mapping):
        raise ConfigError("", request, "expected a rule configuration object")
    errors = [
        ConfigError(
            str(key),
            key,
            f"expected one of {', '.join(allowed)}",
            suggestion=closest(str(key), allowed),
        )
        for key in request
        if key not in allowed
    ]
    return errors


def _fields_from_request(request: Mapping[str, Any]) -> dict[str, Any]:
    parameters = request.get("RuleParameters")
    return {
        "name": request.get("RuleConfigurationName"),
        "image_uri": request.get("RuleEvaluatorImage"),
        "instance_type": request.get("InstanceType"),
        "container_local_output_path": request.get("LocalPath"),
        "s3_output_path": request.get("S3OutputPath"),
        "volume_size_in_gb": request.get("VolumeSizeInGB"),
        "rule_parameters": dict(parameters)
        if isinstance(parameters, Mapping)
        else parameters or {},
    }


_REQUEST_KEYS = tuple(_REQUEST_FIELDS.values())


class Rule(RuleBase):
    """A debugging rule: it reads the tensors a job saves and fires on a condition.

    Build one with ``Rule.sagemaker`` (built-in) or ``Rule.custom``. Besides RuleBase's
    attributes it has ``collection_configs`` (also readable as ``collections_to_save``) and
    ``actions``.
    """

    _kind = "debugging"

    def __init__(
        self,
        name: str,
        image_uri: str,
        instance_type: str | None,
        container_local_output_path: str | None,
        s3_output_path: str | None,
        volume_size_in_gb: int | None,
        rule_parameters: dict[str, Any] | None,
        collections_to_save: list[CollectionConfig] | None,
        actions: Action | ActionList | None = None,
    ) -> None:
        errors = _check_collections(collections_to_save, "collections_to_save")
        errors += _check_actions(actions, "actions")
        try:
            super().__init__(
                name,
                image_uri,
                instance_type,
                container_local_output_path,
                s3_output_path,
                volume_size_in_gb,
                rule_parameters,
            )
        except ConfigError as error:
            errors.append(error)
        if not errors:
            errors += _check_actions_fit(self.spec, actions, "actions")
        raise_if_any(errors)
        self.collection_configs = collections_to_save
        self.actions = actions

    @property
    def collections_to_save(self) -> list[CollectionConfig] | None:
        """The collections the rule needs saved; the SDK's attribute is collection_configs."""
        return self.collection_configs

    @classmethod
    def _check_parameters(
        cls, image_uri: object, parameters: Mapping[str, Any], where: str
    ) -> list[ConfigError]:
        errors = super()._check_parameters(image_uri, parameters, where)
        if "action_json" in parameters:
            field = f"{where}.action_json"
            try:
                actions = parse_actions(parameters["action_json"], field=field)
            except ConfigError as error:
                return [*errors, error]
            spec = None
            if not is_custom(image_uri, parameters):
                with contextlib.suppress(ConfigError):
                    spec = catalogue.get(str(parameters.get("rule_to_invoke")))
            errors += _check_actions_fit(spec, actions, field)
        return errors

    @classmethod
    def sagemaker(
        cls,
        base_config: Mapping[str, Any],
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: list[str] | None = None,
        rule_parameters: dict[str, Any] | None = None,
        collections_to_save: list[CollectionConfig] | None = None,
        actions: Action | ActionList | None = None,
    ) -> Rule:
        """A built-in debugging rule, from a ``rule_configs`` base configuration.

        ``rule_parameters`` override the rule's defaults (strings, as in the spec's examples;
        Python values are accepted too); ``collections_to_save`` replaces the collections the
        base configuration names; ``other_trials_s3_input_paths`` become ``other_trial_<i>``.
        """
        rule = (
            base_config.get("DebugRuleConfiguration") if isinstance(base_config, Mapping) else None
        )
        if not isinstance(rule, Mapping):
            raise ConfigError(
                "base_config",
                base_config,
                "expected a rule_configs function's result, e.g. rule_configs.vanishing_gradient() "
                "(profiler rules go to ProfilerRule.sagemaker)",
            )
        if rule_parameters is not None and not isinstance(rule_parameters, Mapping):
            raise ConfigError("rule_parameters", rule_parameters, "expected a dict")
        if rule_parameters is not None and rule_parameters.get("rule_to_invoke") is not None:
            raise ConfigError(
                "rule_parameters.rule_to_invoke",
                rule_parameters["rule_to_invoke"],
                "not for built-in rules: the base configuration names the rule (for your own "
                "rule, use Rule.custom)",
            )
        raise_if_any(_check_actions(actions, "actions"))
        merged = _other_trials(other_trials_s3_input_paths, "other_trials_s3_input_paths")
        merged.update(rule.get("RuleParameters") or {})
        merged.update(rule_parameters or {})
        base_collections = [
            CollectionConfig(item.get("CollectionName"), dict(item.get("CollectionParameters", {})))
            for item in base_config.get("CollectionConfigurations", [])
        ]
        return cls(
            name=name or rule.get("RuleConfigurationName"),  # type: ignore[arg-type]
            image_uri=PLACEHOLDER_IMAGE,
            instance_type=None,
            container_local_output_path=container_local_output_path,
            s3_output_path=s3_output_path,
            volume_size_in_gb=None,
            rule_parameters=merged,
            collections_to_save=collections_to_save or base_collections,
            actions=actions,
        )

    @classmethod
    def custom(
        cls,
        name: str,
        image_uri: str,
        instance_type: str,
        volume_size_in_gb: int,
        source: str | None = None,
        rule_to_invoke: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: list[str] | None = None,
        rule_parameters: dict[str, Any] | None = None,
        collections_to_save: list[CollectionConfig] | None = None,
        actions: Action | ActionList | None = None,
    ) -> Rule:
        """Your own debugging rule: ``rule_to_invoke``, a rule class in ``source`` (a file path or
        URL), run with ``rule_parameters``; give both or neither."""
        errors = _check_custom(source, rule_to_invoke, "source", "rule_to_invoke")
        errors += _check_actions(actions, "actions")
        raise_if_any(errors)
        merged = _other_trials(other_trials_s3_input_paths, "other_trials_s3_input_paths")
        merged.update(_custom_parameters(source, rule_to_invoke, rule_parameters))
        return cls(
            name=name,
            image_uri=image_uri,
            instance_type=instance_type,
            container_local_output_path=container_local_output_path,
            s3_output_path=s3_output_path,
            volume_size_in_gb=volume_size_in_gb,
            rule_parameters=merged,
            collections_to_save=collections_to_save or [],
            actions=actions,
        )

    def prepare_actions(self, training_job_name: str) -> None:
        """Put the actions into ``rule_parameters["action_json"]``, StopTraining defaulting to
        ``training_job_name``; without actions, drop any ``action_json``."""
        if self.rule_parameters is None:
            self.rule_parameters = {}
        if self.actions is None:
            self.rule_parameters.pop("action_json", None)
            return
        self.actions.update_training_job_prefix_if_not_specified(training_job_name)
        self.rule_parameters["action_json"] = self.actions.serialize()

    def to_debugger_rule_config_dict(self) -> dict[str, Any]:
        """This rule's ``DebugRuleConfigurations`` entry, as the SDK writes it."""
        request = self._request_fields()
        if self.rule_parameters:
            request["RuleParameters"] = dict(self.rule_parameters)
        return request

    def to_request_dict(self) -> dict[str, Any]:
        """The same as ``to_debugger_rule_config_dict``."""
        return self.to_debugger_rule_config_dict()

    @classmethod
    def from_request_dict(cls, request: Mapping[str, Any]) -> Rule:
        """Read one ``DebugRuleConfigurations`` entry of a request.

        ``action_json`` becomes ``actions``; ``collection_configs`` are the collections a
        built-in rule's base configuration names (the request keeps the collections to save in
        ``DebugHookConfig``), and empty for a custom rule.
        """
        errors = _request_errors(request, _REQUEST_KEYS)
        fields = _fields_from_request(request)
        errors += cls._check(fields, _REQUEST_FIELDS)
        raise_if_any(errors)
        parameters = fields["rule_parameters"]
        actions = parse_actions(parameters["action_json"]) if "action_json" in parameters else None
        rule = cls(**fields, collections_to_save=[], actions=actions)
        if rule.spec is not None:
            rule.collection_configs = [
                CollectionConfig(need.name, need.parameter_dict()) for need in rule.spec.collections
            ]
        return rule


class _ProfilerRuleConfig(Protocol):
    rule_name: str
    rule_parameters: dict[str, Any]


class ProfilerRule(RuleBase):
    """A profiler rule: it reads the system and framework metrics and fires on a bottleneck.

    Build one with ``ProfilerRule.sagemaker`` (built-in) or ``ProfilerRule.custom``. Two profiler
    rules are equal when they give the same request (parameters compare as strings).
    """

    _kind = "profiler"

    @classmethod
    def sagemaker(
        cls,
        base_config: _ProfilerRuleConfig,
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        instance_type: str | None = None,
        volume_size_in_gb: int | None = None,
    ) -> ProfilerRule:
        """A built-in profiler rule, from a ``rule_configs`` class such as ProfilerReport()."""
        rule_name = getattr(base_config, "rule_name", None)
        parameters = getattr(base_config, "rule_parameters", None)
        if not isinstance(rule_name, str) or not isinstance(parameters, Mapping):
            raise ConfigError(
                "base_config",
                base_config,
                "expected a rule_configs profiler rule, e.g. rule_configs.ProfilerReport() "
                "(debugging rules go to Rule.sagemaker)",
            )
        return cls(
            name=name or rule_name,
            image_uri=PLACEHOLDER_IMAGE,
            instance_type=instance_type,
            container_local_output_path=container_local_output_path,
            s3_output_path=s3_output_path,
            volume_size_in_gb=volume_size_in_gb,
            rule_parameters=dict(parameters),
        )

    @classmethod
    def custom(
        cls,
        name: str,
        image_uri: str,
        instance_type: str,
        volume_size_in_gb: int,
        source: str | None = None,
        rule_to_invoke: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        rule_parameters: dict[str, Any] | None = None,
    ) -> ProfilerRule:
        """Your own profiler rule: ``rule_to_invoke``, a rule class in ``source`` (a file path
        or URL); give both or neither."""
        raise_if_any(_check_custom(source, rule_to_invoke, "source", "rule_to_invoke"))
        return cls(
            name=name,
            image_uri=image_uri,
            instance_type=instance_type,
            container_local_output_path=container_local_output_path,
            s3_output_path=s3_output_path,
            volume_size_in_gb=volume_size_in_gb,
            rule_parameters=_custom_parameters(source, rule_to_invoke, rule_parameters),
        )

    def to_profiler_rule_config_dict(self) -> dict[str, Any]:
        """This rule's ``ProfilerRuleConfigurations`` entry, as the SDK writes it (parameter
        values as strings)."""
        request = self._request_fields()
        if self.rule_parameters:
            request["RuleParameters"] = {k: str(v) for k, v in self.rule_parameters.items()}
        return request

    def to_request_dict(self) -> dict[str, Any]:
        """The same as ``to_profiler_rule_config_dict``."""
        return self.to_profiler_rule_config_dict()

    @classmethod
    def from_request_dict(cls, request: Mapping[str, Any]) -> ProfilerRule:
        """Read one ``ProfilerRuleConfigurations`` entry of a request."""
        errors = _request_errors(request, _REQUEST_KEYS)
        fields = _fields_from_request(request)
        errors += cls._check(fields, _REQUEST_FIELDS)
        raise_if_any(errors)
        return cls(**fields)

    def _compared(self) -> tuple[Any, ...]:
        compared = super()._compared()
        parameters = self.rule_parameters
        strings = None if parameters is None else {k: str(v) for k, v in parameters.items()}
        return (*compared[:-1], strings)

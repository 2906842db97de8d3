"""SageMaker's constraints on the CreateTrainingJob members trainprobe does not turn into objects.

The Debugger members (DebugHookConfig, rules, ProfilerConfig, ...) are parsed by their own
classes. The others (AlgorithmSpecification, ResourceConfig, StoppingCondition,
OutputDataConfig, InputDataConfig, Environment, ...) are checked here against the shapes of
SageMaker's API reference: types, required members, lengths, patterns, ranges and choices, with
an error for every problem, each at its path in the request. Where trainprobe runs things
differently it says so: outputs are local paths or ``file://`` URLs (so any location text is
allowed here and resolved where paths are resolved), instance types are free text (``local``),
and at most ``MAX_INSTANCE_COUNT`` processes start on this machine. No text may hold NUL: it can
be neither a path nor a process's argument or environment.

A shape is data: ``Text``, ``Whole``, ``Flag``, ``Items``, ``Members``, ``TextMap`` and
``Opaque`` (a member trainprobe keeps as it came, checked for its JSON type only).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from trainprobe.config.errors import ConfigError, closest
from trainprobe.config.regexes import compile_problem

__all__ = [
    "CREATE_MEMBER_SHAPES",
    "MAX_INSTANCE_COUNT",
    "STRING_MAP_PATHS",
    "Flag",
    "Items",
    "Members",
    "Opaque",
    "Shape",
    "Text",
    "TextMap",
    "Whole",
    "string_map_problems",
]

MAX_INSTANCE_COUNT = 16
"""The most hosts one local job starts (ResourceConfig.InstanceCount): each is a torchrun node
and a system monitor on this machine."""


class Shape(Protocol):
    """What a value at some path of a request must be."""

    def problems(self, value: object, path: str) -> list[ConfigError]:
        """Every way ``value``, found at ``path``, breaks the shape (empty when it fits)."""
        ...


def _shown(value: object) -> object:
    return "{...}" if isinstance(value, dict) else "[...]" if isinstance(value, list) else value


def _type_name(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else "null"
    )


@dataclass(frozen=True)
class Text:
    """A string: ``min_length`` to ``max_length`` characters, matching ``pattern`` (described
    by ``pattern_words``) or one of ``choices``; ``regex`` ones must compile."""

    min_length: int = 0
    max_length: int | None = None
    pattern: str | None = None
    pattern_words: str = ""
    choices: tuple[str, ...] = ()
    regex: bool = False

    def allowed(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        words = "a string"
        if self.max_length is not None:
            words += f" of {self.min_length} to {self.max_length} characters"
        elif self.min_length:
            words += f" of at least {self.min_length} characters"
        if self.pattern_words:
            words += f", {self.pattern_words}"
        if self.regex:
            words += ", a regular expression that compiles"
        return words + ", without NUL"

    def problems(self, value: object, path: str) -> list[ConfigError]:
        if not isinstance(value, str):
            return [ConfigError(path, _shown(value), f"{self.allowed()}, not {_type_name(value)}")]
        if self.choices:
            if value in self.choices:
                return []
            return [
                ConfigError(path, value, self.allowed(), suggestion=closest(value, self.choices))
            ]
        fits = (
            self.min_length <= len(value)
            and (self.max_length is None or len(value) <= self.max_length)
            and "\x00" not in value
            and _encodable(value)
            and (self.pattern is None or re.fullmatch(self.pattern, value) is not None)
        )
        if not fits:
            return [ConfigError(path, value, self.allowed())]
        problem = compile_problem(value) if self.regex else None
        if problem is not None:
            return [ConfigError(path, value, f"a regular expression that compiles ({problem})")]
        return []


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class Whole:
    """A whole number from ``minimum`` to ``maximum``; ``why`` explains a bound trainprobe sets."""

    minimum: int | None = None
    maximum: int | None = None
    why: str = ""

    def allowed(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            words = f"a whole number from {self.minimum} to {self.maximum}"
        elif self.minimum is not None:
            words = f"a whole number from {self.minimum}"
        elif self.maximum is not None:
            words = f"a whole number up to {self.maximum}"
        else:
            words = "a whole number"
        return f"{words} ({self.why})" if self.why else words

    def problems(self, value: object, path: str) -> list[ConfigError]:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or (self.minimum is not None and value < self.minimum)
            or (self.maximum is not None and value > self.maximum)
        ):
            return [ConfigError(path, _shown(value), self.allowed())]
        return []


@dataclass(frozen=True)
class Flag:
    """A JSON boolean."""

    def problems(self, value: object, path: str) -> list[ConfigError]:
        if isinstance(value, bool):
            return []
        return [ConfigError(path, _shown(value), "true or false")]


@dataclass(frozen=True)
class Opaque:
    """A member kept as it came: only its JSON type (``object`` or ``list``) is checked."""

    kind: type[dict[str, object]] | type[list[object]] = dict

    def problems(self, value: object, path: str) -> list[ConfigError]:
        if isinstance(value, self.kind):
            return []
        wanted = "an object" if self.kind is dict else "a list"
        return [ConfigError(path, _shown(value), f"{wanted}, not {_type_name(value)}")]


@dataclass(frozen=True)
class Items:
    """A list of ``min_items`` to ``max_items`` values, each of shape ``item``."""

    item: Shape
    min_items: int = 0
    max_items: int | None = None

    def problems(self, value: object, path: str) -> list[ConfigError]:
        if not isinstance(value, list):
            return [ConfigError(path, _shown(value), f"a list, not {_type_name(value)}")]
        if len(value) < self.min_items or (
            self.max_items is not None and len(value) > self.max_items
        ):
            top = "" if self.max_items is None else f" to {self.max_items}"
            return [ConfigError(path, f"{len(value)} items", f"{self.min_items}{top} items")]
        errors: list[ConfigError] = []
        for index, item in enumerate(value):
            errors += self.item.problems(item, f"{path}[{index}]")
        return errors


@dataclass(frozen=True)
class Members:
    """An object with these ``members`` (by name), of which ``required`` must be present."""

    members: Mapping[str, Shape] = field(default_factory=dict)
    required: tuple[str, ...] = ()

    def problems(self, value: object, path: str) -> list[ConfigError]:
        if not isinstance(value, dict):
            return [ConfigError(path, _shown(value), f"an object, not {_type_name(value)}")]
        errors: list[ConfigError] = []
        for name in self.required:
            if name not in value:
                errors.append(ConfigError(f"{path}.{name}", None, "required: it is missing"))
        for name, member in value.items():
            where = f"{path}.{name}"
            shape = self.members.get(name)
            if shape is None:
                known = ", ".join(self.members)
                errors.append(
                    ConfigError(
                        where,
                        _shown(member),
                        f"not a member of {path.rsplit('.', 1)[-1]} (its members: {known})",
                        suggestion=closest(str(name), self.members),
                    )
                )
            elif member is not None or name in self.required:
                errors += shape.problems(member, where)
        return errors


@dataclass(frozen=True)
class TextMap:
    """An object of string keys and string values (at most ``max_entries``, when given)."""

    key: Text
    value: Text
    max_entries: int | None = None
    key_words: str = "key"

    def problems(self, value: object, path: str) -> list[ConfigError]:
        if not isinstance(value, dict):
            return [
                ConfigError(path, _shown(value), f"an object of strings, not {_type_name(value)}")
            ]
        if self.max_entries is not None and len(value) > self.max_entries:
            return [ConfigError(path, f"{len(value)} entries", f"at most {self.max_entries}")]
        errors: list[ConfigError] = []
        for key, item in value.items():
            for error in self.key.problems(key, f"{path} {self.key_words} {key!r}"):
                errors.append(ConfigError(error.field, error.value, error.allowed))
            errors += self.value.problems(item, f"{path}.{key}")
        return errors


_LOCATION = Text(1, 4096, pattern_words="a local directory or a file:// URL")
_ARGUMENT = Text(0, 256)
_INPUT_MODES = ("Pipe", "File", "FastFile")

_ALGORITHM_SPECIFICATION = Members(
    {
        "TrainingImage": Text(0, 255),
        "AlgorithmName": Text(1, 170),
        "TrainingInputMode": Text(choices=_INPUT_MODES),
        "MetricDefinitions": Items(
            Members(
                {"Name": Text(1, 255), "Regex": Text(1, 500, regex=True)},
                required=("Name", "Regex"),
            ),
            max_items=40,
        ),
        "EnableSageMakerMetricsTimeSeries": Flag(),
        "ContainerEntrypoint": Items(_ARGUMENT, 1, 100),
        "ContainerArguments": Items(_ARGUMENT, 0, 100),
        "TrainingImageConfig": Opaque(),
    }
)

_RESOURCE_CONFIG = Members(
    {
        "InstanceType": Text(1, 64),
        "InstanceCount": Whole(
            1, MAX_INSTANCE_COUNT, "each instance is a host algo-<n> on this machine"
        ),
        "VolumeSizeInGB": Whole(0),
        "VolumeKmsKeyId": Text(0, 2048),
        "KeepAlivePeriodInSeconds": Whole(0, 21600),
        "InstanceGroups": Opaque(list),
        "TrainingPlanArn": Text(0, 2048),
        "InstancePlacementConfig": Opaque(),
        "InstancePreferences": Opaque(list),
        "SelectedInstanceType": Text(0, 64),
        "SelectedInstanceCount": Whole(0),
    }
)

_STOPPING_CONDITION = Members(
    {
        "MaxRuntimeInSeconds": Whole(1, 2419200, "at most 28 days"),
        "MaxWaitTimeInSeconds": Whole(1),
        "MaxPendingTimeInSeconds": Whole(1800, 2419200),
    }
)

_CHANNEL = Members(
    {
        "ChannelName": Text(1, 64, r"[A-Za-z0-9.\-_]+", "letters, digits, '.', '-' and '_'"),
        "DataSource": Members(
            {
                "S3DataSource": Members(
                    {
                        "S3DataType": Text(
                            choices=(
                                "ManifestFile",
                                "S3Prefix",
                                "AugmentedManifestFile",
                                "Converse",
                            )
                        ),
                        "S3Uri": _LOCATION,
                        "S3DataDistributionType": Text(
                            choices=("FullyReplicated", "ShardedByS3Key")
                        ),
                        "AttributeNames": Opaque(list),
                        "InstanceGroupNames": Opaque(list),
                        "ModelAccessConfig": Opaque(),
                        "HubAccessConfig": Opaque(),
                    },
                    required=("S3Uri",),
                ),
                "FileSystemDataSource": Opaque(),
                "DatasetSource": Opaque(),
            }
        ),
        "ContentType": Text(0, 256),
        "CompressionType": Text(choices=("None", "Gzip")),
        "RecordWrapperType": Text(choices=("None", "RecordIO")),
        "InputMode": Text(choices=_INPUT_MODES),
        "ShuffleConfig": Opaque(),
    },
    required=("ChannelName", "DataSource"),
)

CREATE_MEMBER_SHAPES: dict[str, Shape] = {
    "HyperParameters": TextMap(Text(0, 256), Text(0, 2500), max_entries=100),
    "Environment": TextMap(
        Text(
            1, 512, r"[a-zA-Z_][a-zA-Z0-9_]*", "letters, digits and '_', not starting with a digit"
        ),
        Text(0, 512),
        max_entries=100,
        key_words="variable",
    ),
    "AlgorithmSpecification": _ALGORITHM_SPECIFICATION,
    "RoleArn": Text(0, 2048),
    "InputDataConfig": Items(_CHANNEL, 1, 20),
    "OutputDataConfig": Members(
        {
            "KmsKeyId": Text(0, 2048),
            "S3OutputPath": _LOCATION,
            "CompressionType": Text(choices=("GZIP", "NONE")),
        },
        required=("S3OutputPath",),
    ),
    "ResourceConfig": _RESOURCE_CONFIG,
    "VpcConfig": Opaque(),
    "StoppingCondition": _STOPPING_CONDITION,
    "Tags": Items(Members({"Key": Text(1, 128), "Value": Text(0, 256)}, ("Key", "Value")), 0, 50),
    "EnableNetworkIsolation": Flag(),
    "EnableInterContainerTrafficEncryption": Flag(),
    "EnableManagedSpotTraining": Flag(),
    "CheckpointConfig": Members({"S3Uri": _LOCATION, "LocalPath": Text(0, 4096)}, ("S3Uri",)),
    "ExperimentConfig": Opaque(),
    "RetryStrategy": Members({"MaximumRetryAttempts": Whole(1, 30)}, ("MaximumRetryAttempts",)),
    "RemoteDebugConfig": Opaque(),
    "InfraCheckConfig": Opaque(),
    "SessionChainingConfig": Opaque(),
    "ServerlessJobConfig": Opaque(),
    "MlflowConfig": Opaque(),
    "ModelPackageConfig": Opaque(),
}
"""The shape of each member of CreateTrainingJob that is checked here, by name."""


_EACH = -1
"""In a path of ``STRING_MAP_PATHS``: every item of the list found there."""

STRING_MAP_PATHS: tuple[tuple[str | int, ...], ...] = (
    ("DebugHookConfig", "HookParameters"),
    ("DebugHookConfig", "CollectionConfigurations", _EACH, "CollectionParameters"),
    ("DebugRuleConfigurations", _EACH, "RuleParameters"),
    ("ProfilerRuleConfigurations", _EACH, "RuleParameters"),
    ("ProfilerConfig", "ProfilingParameters"),
)
"""Where the Debugger members of a request hold maps of strings to strings (SageMaker's API
refuses any other value there); the classes that read those members are more lenient, as the
SDK's classes are, so these are checked on the request first."""

_STRING_MAP = TextMap(Text(1), Text())


def string_map_problems(
    request: Mapping[str, object], members: Collection[str]
) -> list[ConfigError]:
    """Every key or value that is not a string in the maps of ``STRING_MAP_PATHS`` under the
    request's ``members`` (a member that is not what a path needs is left to its own reader)."""
    errors: list[ConfigError] = []
    for steps in STRING_MAP_PATHS:
        if steps[0] not in members:
            continue
        found: list[tuple[str, object]] = [("", request)]
        for step in steps:
            below: list[tuple[str, object]] = []
            for path, value in found:
                if step == _EACH and isinstance(value, list):
                    below += [(f"{path}[{index}]", item) for index, item in enumerate(value)]
                elif isinstance(step, str) and isinstance(value, Mapping) and step in value:
                    below.append((f"{path}.{step}" if path else step, value[step]))
            found = below
        for path, value in found:
            if value is not None:
                errors += _STRING_MAP.problems(value, path)
    return errors

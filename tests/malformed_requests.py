"""A seeded generator of malformed CreateTrainingJob requests, for every test that takes requests.

``malformed_requests(seed, count, sandbox)`` yields ``Case``s: a label saying what was done, and
the request's bytes as a client would send them. Most are one mutation of ``valid_request``
(a request that creates a real, cheap job): a member of the wrong type, missing or unknown; a
huge, negative or fractional number; NUL, control characters, unicode, lone surrogates and very
long text; lists and objects nested deep; strings that hold JSON (a profiling sub-config, an
``action_json``, a hyperparameter) nested a few thousand levels deep; values that are not strings
in the maps of strings (RuleParameters, HookParameters, CollectionParameters, Environment,
HyperParameters, ProfilingParameters); and traversal (``..``, ``/``, NUL, a path that is a file)
in every name and path. The rest break the document itself: invalid JSON, bytes that are
not UTF-8, a byte order mark, JSON that is not an object, nesting far too deep to parse. The same
seed gives the same cases, so a failure is reproduced by its seed and index.

Absolute paths stay inside ``sandbox``: a request accepted by mistake writes nothing elsewhere.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Case", "malformed_requests", "prepare_sandbox", "valid_request"]

BUILTIN_IMAGE = "DEFAULT_RULE_EVALUATOR_IMAGE"

JsonPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Case:
    """One request to send: what was done to it, and its bytes."""

    label: str
    body: bytes

    def request(self) -> Any:
        """The body as JSON, or None when it is not JSON at all."""
        try:
            return json.loads(self.body.decode("utf-8-sig"))
        except (ValueError, RecursionError):
            return None


def closed_object_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point S3 at a closed port on 127.0.0.1 with made-up keys: a generated ``s3://`` output is
    refused at once (connection refused), with no wait for AWS or for instance credentials."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "fuzz")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fuzz")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def prepare_sandbox(sandbox: Path) -> None:
    """Make what ``valid_request`` names: a channel directory, and a file where a directory
    belongs (for the "path is a file" mutations)."""
    (sandbox / "data").mkdir(parents=True, exist_ok=True)
    (sandbox / "a-file").write_text("not a directory\n")


def valid_request(name: str, sandbox: Path) -> dict[str, Any]:
    """A CreateTrainingJob request with every kind of member, that runs ``true`` (no Python
    training) so a job created from it ends at once; paths are relative to ``sandbox``."""
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "ContainerEntrypoint": ["true"],
            "ContainerArguments": ["--epochs", "1"],
            "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
        },
        "RoleArn": "arn:aws:iam::123456789012:role/local",
        "HyperParameters": {"epochs": "1"},
        "Environment": {"TRAINING_SEED": "7"},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": str(sandbox / "data")}
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": str(sandbox / "out")},
        "ResourceConfig": {"InstanceCount": 1, "InstanceType": "local", "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "Tags": [{"Key": "team", "Value": "ml"}],
        "CheckpointConfig": {"S3Uri": str(sandbox / "checkpoints")},
        "DebugHookConfig": {
            "S3OutputPath": str(sandbox / "out"),
            "HookParameters": {"save_interval": "1"},
            "CollectionConfigurations": [
                {"CollectionName": "weights", "CollectionParameters": {"save_interval": "2"}},
                {"CollectionName": "custom", "CollectionParameters": {"include_regex": "fc.*"}},
            ],
        },
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": "Exploding",
                "RuleEvaluatorImage": BUILTIN_IMAGE,
                "RuleParameters": {"rule_to_invoke": "ExplodingTensor", "tensor_regex": ".*"},
            }
        ],
        "ProfilerConfig": {"DisableProfiler": True},
    }


def _profiler_rule(name: str) -> dict[str, Any]:
    return {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": BUILTIN_IMAGE,
        "RuleParameters": {"rule_to_invoke": "CPUBottleneck"},
    }


# Paths in the request that hold names or paths: each gets traversal values.
NAME_PATHS: tuple[JsonPath, ...] = (
    ("TrainingJobName",),
    ("DebugRuleConfigurations", 0, "RuleConfigurationName"),
    ("DebugHookConfig", "CollectionConfigurations", 0, "CollectionName"),
    ("InputDataConfig", 0, "ChannelName"),
)
LOCATION_PATHS: tuple[JsonPath, ...] = (
    ("OutputDataConfig", "S3OutputPath"),
    ("DebugHookConfig", "S3OutputPath"),
    ("InputDataConfig", 0, "DataSource", "S3DataSource", "S3Uri"),
    ("AlgorithmSpecification", "ContainerEntrypoint", 0),
    ("CheckpointConfig", "S3Uri"),
)


def _traversals(sandbox: Path, names: bool) -> list[str]:
    """Values that would lead a path astray; for ``names`` also the root and the home
    directory (as locations, those are the user's to choose, and a test must not write there)."""
    anywhere = ["/", "~", "/etc/passwd", "~/x"] if names else []
    return [
        *anywhere,
        "..",
        ".",
        "../escaped",
        "a/../../escaped",
        "a/b",
        str(sandbox / "elsewhere"),
        "x\x00y",
        "\x00",
        "a\\..\\b",
        "file://" + str(sandbox / "a-file"),
        str(sandbox / "a-file"),
        str(sandbox / "a-file" / "below"),
        "s3://bucket/key",
        "",
        " ",
        "\n",
    ]


_WEIRD_TEXT = [
    "\x00",
    "nul\x00inside",
    "\x07bell",
    "é",
    "名前",
    "🔥" * 3,
    "\u202eevil",
    "\ud800",
    "x" * 300,
    "y" * 5000,
    "-" * 100,
    "a" + "-" * 100 + "b",
    " spaced ",
    "=",
    "A=B",
]
_NUMBERS: list[Any] = [
    -1,
    0,
    1,
    2**31,
    2**64,
    10**40,
    -(10**40),
    1.5,
    -0.0,
    1e308,
    float("inf"),
    float("nan"),
]
_OTHERS: list[Any] = [None, True, False, [], {}, [1, 2], {"a": 1}, "", "text"]


# The maps of strings of the request: (path of the map, a key to set in it).
STRING_MAP_ENTRIES: tuple[tuple[JsonPath, str], ...] = (
    (("DebugRuleConfigurations", 0, "RuleParameters"), "tensor_regex"),
    (("DebugHookConfig", "HookParameters"), "save_interval"),
    (("DebugHookConfig", "CollectionConfigurations", 0, "CollectionParameters"), "save_interval"),
    (("Environment",), "TRAINING_SEED"),
    (("HyperParameters",), "epochs"),
    (("ProfilerConfig", "ProfilingParameters"), "DetailedProfilingConfig"),
)
# Strings that trainprobe reads as JSON: (path of the map, its key).
JSON_STRING_ENTRIES: tuple[tuple[JsonPath, str], ...] = (
    (("ProfilerConfig", "ProfilingParameters"), "DetailedProfilingConfig"),
    (("DebugRuleConfigurations", 0, "RuleParameters"), "action_json"),
    (("HyperParameters",), "epochs"),
)
_NOT_STRINGS: list[Any] = [5, 0.5, True, None, [], ["1"], {}, {"StartStep": 5}]


def deep_json_text(depth: int, opener: str = "{") -> str:
    """JSON text nesting objects (``{``) or lists (``[``) ``depth`` levels deep."""
    if opener == "[":
        return "[" * depth + "]" * depth
    return '{"StartStep":' * depth + "1" + "}" * depth


def set_entry(document: Any, path: JsonPath, key: str, value: Any) -> None:
    """``document``'s map at ``path`` (made when absent) gets ``key`` = ``value``."""
    for step in path:
        if isinstance(step, str) and step not in document:
            document[step] = {}
        document = document[step]
    document[key] = value


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def _paths(value: Any, prefix: JsonPath = ()) -> list[JsonPath]:
    found: list[JsonPath] = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _parent(document: Any, path: JsonPath) -> Any:
    for step in path[:-1]:
        document = document[step]
    return document


def _set(document: Any, path: JsonPath, value: Any) -> None:
    _parent(document, path)[path[-1]] = value


def _dumps(document: Any) -> bytes:
    return json.dumps(document).encode()


def _mutated(base: dict[str, Any], rng: random.Random, sandbox: Path) -> tuple[str, Any]:
    """One mutation of a copy of ``base``: its label and the document."""
    document = copy.deepcopy(base)
    kinds = ["type", "type", "missing", "unknown", "number", "text", "deep", "traversal"]
    kind = rng.choice([*kinds, "traversal", "profiler rule", "deep string", "not a string"])
    if kind == "deep string":
        path, key = rng.choice(JSON_STRING_ENTRIES)
        depth, opener = rng.choice([40, 900, 3000]), rng.choice("{[")
        set_entry(document, path, key, deep_json_text(depth, opener))
        return f"deep string {_name((*path, key))} = {opener} x {depth}", document
    if kind == "not a string":
        path, key = rng.choice(STRING_MAP_ENTRIES)
        value = rng.choice(_NOT_STRINGS)
        set_entry(document, path, key, value)
        return f"not a string {_name((*path, key))} = {value!r}", document
    if kind == "profiler rule":
        # A profiler rule (the request has none: each runs a process) with a name that
        # escapes, or one the debugging rule has, whatever its case.
        name = rng.choice([*_traversals(sandbox, names=True), "Exploding", "exploding"])
        document["ProfilerRuleConfigurations"] = [_profiler_rule(name)]
        return f"profiler rule named {name!r}", document
    if kind == "traversal":
        path = rng.choice(NAME_PATHS + LOCATION_PATHS)
        value: Any = rng.choice(_traversals(sandbox, names=path in NAME_PATHS))
        _set(document, path, value)
        return f"traversal {_name(path)} = {value!r}", document
    path = rng.choice(_paths(document))
    where = _name(path)
    if kind == "missing":
        parent = _parent(document, path)
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
        return f"missing {where}", document
    if kind == "unknown":
        target = _parent(document, path)
        target = target if isinstance(target, dict) else document
        target[rng.choice(["Unknown", "trainingJobName", "__proto__", "", "\x00"])] = "x"
        return f"unknown member beside {where}", document
    if kind == "number":
        value = rng.choice(_NUMBERS)
    elif kind == "text":
        value = rng.choice(_WEIRD_TEXT)
    elif kind == "deep":
        value = _deep(rng.choice([33, 100, 900]))
    else:
        value = rng.choice(_OTHERS + _NUMBERS[:3] + _WEIRD_TEXT[:2])
    _set(document, path, value)
    shown = repr(value) if kind != "deep" else "deep nesting"
    return f"{kind} {where} = {shown[:60]}", document


def _name(path: JsonPath) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def _broken_document(rng: random.Random, base: dict[str, Any]) -> tuple[str, bytes]:
    text = json.dumps(base)
    choices: list[tuple[str, bytes]] = [
        ("empty body", b""),
        ("whitespace body", b" \n"),
        ("truncated JSON", text[: rng.randrange(1, len(text))].encode()),
        ("trailing comma", text[:-1].encode() + b",}"),
        ("not UTF-8", text.encode()[:20] + b"\xff\xfe\x80" + text.encode()[20:]),
        (
            "Latin-1 text",
            json.dumps({**base, "RoleArn": "é"}, ensure_ascii=False).encode("latin-1"),
        ),
        ("UTF-16", text.encode("utf-16")),
        ("a JSON list", b"[" + text.encode() + b"]"),
        ("a JSON string", b'"TrainingJobName"'),
        ("a JSON number", b"42"),
        ("JSON null", b"null"),
        ("nesting too deep to parse", b"[" * 100_000 + b"]" * 100_000),
        ("deep object", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
        ("NaN literal", text[:-1].encode() + b', "X": NaN}'),
        ("duplicate keys", text[:-1].encode() + b', "TrainingJobName": "other-name"}'),
    ]
    return rng.choice(choices)


def malformed_requests(
    seed: int, count: int, sandbox: Path, name_prefix: str = "fuzz"
) -> Iterator[Case]:
    """``count`` cases from ``seed``; the i-th case's job is called ``<name_prefix>-<i>`` (unless
    the mutation changed the name), so cases do not collide in one job store."""
    rng = random.Random(seed)
    for index in range(count):
        base = valid_request(f"{name_prefix}-{index}", sandbox)
        if rng.random() < 0.12:
            label, body = _broken_document(rng, base)
            yield Case(f"#{index} {label}", body)
            continue
        if rng.random() < 0.03:
            yield Case(f"#{index} UTF-8 BOM before a valid request", b"\xef\xbb\xbf" + _dumps(base))
            continue
        label, document = _mutated(base, rng, sandbox)
        yield Case(f"#{index} {label}", _dumps(document))

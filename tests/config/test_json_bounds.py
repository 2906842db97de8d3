"""The bounds on JSON in requests: nesting named by its path, from text or parsed, at any depth."""

from __future__ import annotations

import json

import pytest

from trainprobe.config.errors import ConfigError
from trainprobe.config.json_bounds import (
    MAX_EMBEDDED_JSON_CHARS,
    embedded_json,
    nesting_problem,
    text_nesting_problem,
)
from trainprobe.config.request_json import parse_request


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# Strings that hold what is punctuation outside them ("[", ",", ":", an escaped quote) must not
# move the path; the nesting is 40 deep under the last member.
_DOCUMENTS = [
    ('{"a": {"b": [1, 2, %s]}}', "a.b[2][0][0][0]"),
    ('{"x,y": "[[[", "k\\"q": ["]", {"m:": 1}, %s]}', 'k"q[2][0][0][0][0]'),
    ('{"Tags": [{"Key": "{", "Value": "}"}, %s]}', "Tags[1][0][0][0][0]"),
    ('{"é": {"\\u00e9": %s}}', "é.é[0][0][0][0]"),
]


@pytest.mark.parametrize(("template", "field"), _DOCUMENTS)
def test_nesting_is_named_by_the_same_path_from_text_and_parsed(template: str, field: str) -> None:
    text = template % _deep(40)
    from_text = text_nesting_problem(text)
    parsed = nesting_problem(json.loads(text))
    assert from_text is not None and parsed is not None
    assert from_text.field == parsed.field == field
    assert "nested at most 32 levels" in from_text.allowed


@pytest.mark.parametrize(("template", "field"), _DOCUMENTS)
def test_a_request_too_deep_to_parse_is_named_by_the_member(template: str, field: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_request(template % _deep(100_000), source="job.json")
    assert refused.value.field == field


def test_nesting_within_the_bound_is_no_problem() -> None:
    text = f'{{"a": {_deep(31)}}}'
    assert text_nesting_problem(text) is None
    assert nesting_problem(json.loads(text)) is None
    assert parse_request(text)["a"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (_deep(40), "nested at most 32 levels"),
        (_deep(1500), "nested at most 32 levels"),  # past what json can parse at all
        ('["' + "x" * MAX_EMBEDDED_JSON_CHARS + '"]', f"at most {MAX_EMBEDDED_JSON_CHARS} char"),
    ],
    ids=["deep", "too-deep-to-parse", "long"],
)
def test_json_inside_a_string_is_refused_at_its_field(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        embedded_json(text, "RuleParameters.action_json")
    assert refused.value.field == "RuleParameters.action_json"
    assert says in refused.value.allowed
    assert embedded_json(_deep(32), "f") == json.loads(_deep(32))
    with pytest.raises(json.JSONDecodeError):
        embedded_json("not json", "f")


def test_a_long_key_on_the_path_is_shortened_in_the_field() -> None:
    key = "k" * 100_000
    text = f'{{"{key}": {_deep(100_000)}}}'
    with pytest.raises(ConfigError) as refused:
        parse_request(text)
    assert refused.value.field == "k" * 32 + "..." + "k" * 32 + "[0][0][0][0][0]"
    parsed = nesting_problem({key: json.loads(_deep(40))})
    assert parsed is not None and parsed.field == refused.value.field

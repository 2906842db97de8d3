"""Reading and writing the text of ProfilingParameters' sub-configs, in every spelling in use."""

from __future__ import annotations

import pytest

from trainprobe.config.errors import ConfigError
from trainprobe.config.profiling_parameters import format_config_text, parse_config_text

# What sagemaker 2.257.7 writes (reference/smdebug.md, appendix): a trailing ", }".
SDK_DETAILED = '{"StartStep": 5, "NumSteps": 10, }'
SDK_PYTHON = (
    '{"StartStep": 5, "NumSteps": 10, "ProfilerName": "cprofile", "cProfileTimer": "total_time", }'
)

# Spec 001 ("Target Step"), the DetailedProfilingConfig entry as printed there.
SPEC_DETAILED = """{
            \\"StartStep\\": \\"7\\", // The default is the first step (step 0)
            \\"NumSteps\\": \\"1\\", // The default value is 1
        }"""


def test_reads_json() -> None:
    assert parse_config_text('{"StartStep": 5, "NumSteps": 1}') == {"StartStep": 5, "NumSteps": 1}


def test_reads_the_sdk_trailing_comma_form() -> None:
    assert parse_config_text(SDK_DETAILED) == {"StartStep": 5, "NumSteps": 10}
    assert parse_config_text(SDK_PYTHON) == {
        "StartStep": 5,
        "NumSteps": 10,
        "ProfilerName": "cprofile",
        "cProfileTimer": "total_time",
    }


def test_reads_the_spec_form_with_escaped_quotes_and_comments() -> None:
    assert parse_config_text(SPEC_DETAILED) == {"StartStep": "7", "NumSteps": "1"}


def test_reads_numbers_literals_and_single_quotes() -> None:
    text = '{\'Duration\': 1.5, "Big": 1e3, "Flag": True, "Off": false, "Nothing": None,}'
    assert parse_config_text(text) == {
        "Duration": 1.5,
        "Big": 1000.0,
        "Flag": True,
        "Off": False,
        "Nothing": None,
    }


def test_keeps_backslashes_the_sdk_does_not_escape() -> None:
    # The SDK writes a MetricsRegex of \d+ as "\d+", which is not valid JSON.
    assert parse_config_text('{"MetricsRegex": "\\d+.*", }') == {"MetricsRegex": "\\d+.*"}
    assert parse_config_text('{"A": "tab\\there"}') == {"A": "tab\there"}


def test_never_evaluates_the_text() -> None:
    with pytest.raises(ConfigError):
        parse_config_text('{"StartStep": __import__("os").getpid()}')


@pytest.mark.parametrize(
    ("text", "position", "reason"),
    [
        ('{"StartStep" 5}', 13, "expected ':'"),
        ('{"StartStep": }', 14, "expected a value"),
        ('["StartStep"]', 0, "expected '{'"),
        ('{"StartStep": 5', 15, "expected ',' or '}'"),
        ('{"StartStep": 5}}', 16, "after the closing"),
        ('{"StartStep": "5}', 14, "never closed"),
        ('{"StartStep": 5, "StartStep": 6}', 17, "appears twice"),
        ("{\n  /* open comment\n}", 4, "never closed"),
    ],
)
def test_a_bad_text_names_the_field_and_the_position(text: str, position: int, reason: str) -> None:
    field = "ProfilerConfig.ProfilingParameters.DetailedProfilingConfig"
    with pytest.raises(ConfigError) as caught:
        parse_config_text(text, field)
    assert caught.value.field == field
    assert caught.value.value == text
    assert f"at position {position} " in caught.value.allowed
    assert reason in caught.value.allowed


def test_a_bad_text_on_a_later_line_gives_line_and_column() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config_text('{\n  "StartStep": 5\n  "NumSteps": 1\n}')
    assert "(line 3, column 3)" in str(caught.value)


def test_rejects_what_is_not_text() -> None:
    with pytest.raises(ConfigError):
        parse_config_text(5, "X")  # type: ignore[arg-type]


def test_writes_what_the_sdk_writes() -> None:
    assert format_config_text({"StartStep": 5, "NumSteps": 10}) == SDK_DETAILED
    written = format_config_text(
        {"StartStep": 5, "NumSteps": 10, "ProfilerName": "cprofile", "cProfileTimer": "total_time"}
    )
    assert written == SDK_PYTHON
    assert format_config_text({}) == "{}"


def test_what_is_written_reads_back() -> None:
    config = {"StartTimeInSecSinceEpoch": 1700000000, "Duration": 2.5, "MetricsRegex": ".*"}
    assert parse_config_text(format_config_text(config)) == config

"""``trainprobe serve`` against the seeded malformed requests, over real signed HTTP.

Every CreateTrainingJob request from tests/malformed_requests.py is sent to the API server and
given to ``trainprobe validate`` (the same request, the same directory): the server answers
200 exactly when validate accepts, and otherwise a 4xx SageMaker error (``__type`` and
``message``, the error name in ``x-amzn-ErrorType``) whose message says what validate says.
DescribeTrainingJob, StopTrainingJob, UpdateTrainingJob and ListTrainingJobs get malformed
members (no TrainingJobName, wrong types, ``{}``, traversal in names, unknown members, numbers
out of range): each is a 4xx naming the member, or 200 where the request is valid. Nothing is a
5xx, a dropped connection or a traceback.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest
from tests.jobs.api_calls import call, sign
from tests.jobs.job_helpers import wait_until_ended

from malformed_requests import (
    Case,
    closed_object_store,
    deep_json_text,
    malformed_requests,
    prepare_sandbox,
    valid_request,
)
from trainprobe.cli.main import main
from trainprobe.jobs import JobStore
from trainprobe.jobs.server.api_server import JobApiServer

_HEADER = "problem(s) in the configuration:"
_REFUSALS = ("ValidationException", "SerializationException", "ResourceInUse")


def _send(server: JobApiServer, operation: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """The status and JSON answer of one signed call; an AssertionError saying so when the
    answer is not SageMaker's (no answer, not JSON, an error without its name)."""
    target = f"SageMaker.{operation}"
    try:
        status, headers, answer = call(server.url, body, sign(server.url, target, body, server.key))
    except (OSError, ValueError) as error:  # a dropped connection, or an answer that is not JSON
        raise AssertionError(f"{operation}: no SageMaker answer ({error!r})") from error
    if status != 200:
        assert 400 <= status < 500, (operation, status, answer)
        assert headers.get("x-amzn-errortype") == answer.get("__type"), (status, answer)
        assert isinstance(answer.get("message"), str) and answer["message"], answer
        assert "Traceback" not in answer["message"], answer
    return status, answer


def _problems(message: str) -> list[str]:
    """The problems an error message lists (one, or each line of a ConfigErrors)."""
    lines = message.splitlines()
    if len(lines) > 1 and lines[0].endswith(_HEADER):
        return [line.removeprefix("  - ") for line in lines[1:]]
    return [message]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's directory (the api_server fixture serves from tmp_path), made validate's
    too, so that relative paths in a request mean the same to both."""
    monkeypatch.chdir(tmp_path)
    prepare_sandbox(tmp_path / "sandbox")
    return tmp_path


def _check_create(
    server: JobApiServer, case: Case, request_file: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[bool, str | None]:
    """Whether the server created the job, and what is wrong with how the case was handled."""
    request_file.write_bytes(case.body)
    status = main(["validate", f"file://{request_file}"])
    captured = capsys.readouterr()
    said = (captured.out + captured.err).replace(str(request_file), "body")
    if status not in (0, 1) or "Traceback" in said:
        return False, f"validate exited {status}: {said[-400:]}"
    try:
        http_status, answer = _send(server, "CreateTrainingJob", case.body)
    except AssertionError as error:
        return False, str(error)
    if (http_status == 200) != (status == 0):
        verdict = "accepted" if status == 0 else "refused"
        return False, f"validate {verdict}, the server answered {http_status} {answer}: {said}"
    if http_status == 200:
        return True, None
    problems = _problems(answer["message"])
    # Each problem names its field: "<field>: <value> is not valid; <what is allowed>".
    fieldless = [
        problem
        for problem in problems
        if " is not valid" not in problem or ": " not in problem.split(" is not valid")[0]
    ]
    if fieldless or answer["__type"] not in _REFUSALS:
        return False, f"the server's refusal names no field: {answer}"
    unnamed = [problem for problem in problems if problem not in said]
    if unnamed:
        return False, f"the server said {unnamed[:2]}, validate did not: {said[-400:]}"
    return False, None


def _issue_cases(sandbox: Path) -> list[Case]:
    """The requests the issue saw drop the connection or make undescribable jobs, by hand."""
    valid = valid_request("issue-case", sandbox)
    rule = valid["DebugRuleConfigurations"][0]
    changes: list[tuple[str, dict[str, Any]]] = [
        ("no TrainingJobName", {"TrainingJobName": None}),
        (
            "an S3DataSource that is a string",
            {
                "InputDataConfig": [
                    {"ChannelName": "train", "DataSource": {"S3DataSource": "s3://b/k"}}
                ]
            },
        ),
        ("OutputDataConfig -1", {"OutputDataConfig": -1}),
        (
            "an output path that is a file",
            {"OutputDataConfig": {"S3OutputPath": str(sandbox / "a-file")}},
        ),
        ("an output path with NUL", {"OutputDataConfig": {"S3OutputPath": "out\x00put"}}),
        (
            "a rule name with NUL",
            {"DebugRuleConfigurations": [{**rule, "RuleConfigurationName": "a\x00b"}]},
        ),
        (
            "a rule name of 300 bytes",
            {"DebugRuleConfigurations": [{**rule, "RuleConfigurationName": "r" * 300}]},
        ),
        (
            "a DetailedProfilingConfig 3000 levels deep",
            {
                "ProfilerConfig": {
                    "ProfilingParameters": {"DetailedProfilingConfig": deep_json_text(3000)}
                }
            },
        ),
        (
            "an action_json 1200 levels deep",
            {
                "DebugRuleConfigurations": [
                    {
                        **rule,
                        "RuleParameters": {
                            **rule["RuleParameters"],
                            "action_json": deep_json_text(1200, "["),
                        },
                    }
                ]
            },
        ),
        (
            "a number in RuleParameters",
            {
                "DebugRuleConfigurations": [
                    {**rule, "RuleParameters": {**rule["RuleParameters"], "tensor_regex": 5}}
                ]
            },
        ),
        ("a list in HyperParameters", {"HyperParameters": {"epochs": [1]}}),
    ]
    cases = [Case("an empty object", b"{}"), Case("an empty body", b"")]
    for label, change in changes:
        request = {key: value for key, value in {**valid, **change}.items() if value is not None}
        cases.append(Case(label, json.dumps(request).encode()))
    return cases


@pytest.mark.parametrize(
    ("seed", "count"),
    [
        pytest.param(31, 60, id="seed-31"),
        pytest.param(32, 80, id="seed-32", marks=pytest.mark.slow),
    ],
)
def test_the_server_and_validate_agree_on_malformed_create_requests(
    api_server: JobApiServer,
    store: JobStore,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    count: int,
) -> None:
    closed_object_store(monkeypatch)
    failures = []
    created = 0
    request_file = workdir / "request.json"
    sandbox = workdir / "sandbox"
    generated = malformed_requests(seed, count, sandbox, name_prefix=f"http{seed}")
    issue_cases = _issue_cases(sandbox)
    for case in [*issue_cases, *generated]:
        was_created, problem = _check_create(api_server, case, request_file, capsys)
        created += was_created
        if was_created and case in issue_cases:
            problem = "accepted"
        if problem is not None:
            failures.append(f"{case.label}: {problem}")
    assert not failures, f"{len(failures)} of {count}:\n" + "\n".join(failures[:10])
    # Most are refused, some still run: both verdicts were exercised.
    assert 0 < created < count // 2
    # The server still serves, and lists what it created.
    status, answer = _send(api_server, "ListTrainingJobs", b'{"MaxResults": 100}')
    assert status == 200 and len(answer["TrainingJobSummaries"]) == min(created, 100)
    wait_until_ended(store)


# ----- the other operations ---------------------------------------------------------------------

_BAD_NAMES: list[Any] = [
    None,
    1,
    -1,
    10**40,
    1.5,
    True,
    [],
    ["job"],
    {},
    {"TrainingJobName": "job"},
    "",
    " ",
    ".",
    "..",
    "../x",
    "../../etc/passwd",
    "/etc/passwd",
    "a/b",
    "a\\b",
    "~",
    "x\x00y",
    "\x00",
    "job\n",
    "é",
    "\ud800",
    "-job",
    "job-",
    "a" * 64,
    "a" + "-" * 100 + "b",
    "y" * 5000,
]
_BAD_LIST_MEMBERS: list[tuple[str, Any]] = [
    ("MaxResults", 0),
    ("MaxResults", -1),
    ("MaxResults", 101),
    ("MaxResults", 2**64),
    ("MaxResults", 10**400),
    ("MaxResults", 1.5),
    ("MaxResults", "10"),
    ("MaxResults", True),
    ("MaxResults", None),
    ("MaxResults", []),
    ("SortBy", "Nope"),
    ("SortBy", 1),
    ("SortBy", {}),
    ("SortOrder", "Up"),
    ("SortOrder", []),
    ("StatusEquals", "Done"),
    ("StatusEquals", ["Completed"]),
    ("StatusEquals", {"a": 1}),
    ("NextToken", "not a token"),
    ("NextToken", 12),
    ("NextToken", {"offset": 1}),
    ("NextToken", "\x00"),
    ("NextToken", base64.urlsafe_b64encode(b"[" * 100_000).decode()),
    ("NextToken", base64.urlsafe_b64encode(b'{"offset": ' * 2000).decode()),
    ("CreationTimeAfter", "yesterday"),
    ("CreationTimeAfter", {}),
    ("CreationTimeBefore", [1]),
    ("LastModifiedTimeAfter", True),
    ("LastModifiedTimeBefore", "\x00"),
    ("NameContains", ["job"]),
    ("NameContains", {"a": "b"}),
    ("NameContains", 7),
    ("NameContains", "../x"),
    ("NameContains", "x\x00y"),
    ("NameContains", "y" * 5000),
    ("Unknown", "x"),
    ("maxResults", 10),
    ("__proto__", {}),
]
_VALID_LIST_REQUESTS: list[dict[str, Any]] = [
    {},
    {"MaxResults": 1},
    {"MaxResults": 100, "SortBy": "Name", "SortOrder": "Descending"},
    {"StatusEquals": "Completed"},
    {"NameContains": "known"},
    {"CreationTimeAfter": 0, "CreationTimeBefore": "2999-01-01T00:00:00Z"},
]


def _other_operation_cases(rng: random.Random, known: str) -> list[tuple[str, bytes, str | None]]:
    """(operation, body, the member the refusal must name; None where the call is valid)."""
    cases: list[tuple[str, bytes, str | None]] = [
        ("DescribeTrainingJob", json.dumps({"TrainingJobName": known}).encode(), None)
    ]
    update = {"ProfilerConfig": {"ProfilingIntervalInMilliseconds": 500}}
    for operation in ("DescribeTrainingJob", "StopTrainingJob", "UpdateTrainingJob"):
        extra = update if operation == "UpdateTrainingJob" else {}
        cases.append((operation, b"{}", "TrainingJobName"))
        cases.append((operation, json.dumps(extra).encode(), "TrainingJobName"))
        for name in ({"trainingJobName": known}, {"TrainingJobName": "no-such-job"}):
            cases.append((operation, json.dumps({**name, **extra}).encode(), "TrainingJobName"))
        cases.append(
            (operation, json.dumps({"TrainingJobName": known, "Unknown": 1}).encode(), "Unknown")
        )
        for name in _BAD_NAMES:
            body = json.dumps({"TrainingJobName": name, **extra}).encode()
            cases.append((operation, body, "TrainingJobName"))
    for member, value in [
        ("ProfilerConfig", "fast"),
        ("ProfilerConfig", []),
        ("ProfilerConfig", {"ProfilingIntervalInMilliseconds": -1}),
        ("ProfilerConfig", {"ProfilingIntervalInMilliseconds": 10**40}),
        ("ProfilerRuleConfigurations", "CPUBottleneck"),
        ("ProfilerRuleConfigurations", [{"RuleConfigurationName": "../x"}]),
        ("ProfilerRuleConfigurations", [None]),
        ("ResourceConfig", {"KeepAlivePeriodInSeconds": -1}),
        ("Unknown", 1),
        (
            "ProfilerRuleConfigurations",
            [
                {
                    "RuleConfigurationName": "CPUBottleneck",
                    "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
                    "RuleParameters": {"rule_to_invoke": "CPUBottleneck", "threshold": 50},
                }
            ],
        ),
        ("ProfilerConfig", {"ProfilingParameters": {"DetailedProfilingConfig": {"StartStep": 5}}}),
        (
            "ProfilerConfig",
            {"ProfilingParameters": {"DetailedProfilingConfig": deep_json_text(3000)}},
        ),
        (
            "ProfilerConfig",
            {"ProfilingParameters": {"PythonProfilingConfig": deep_json_text(200)}},
        ),
    ]:
        body = json.dumps({"TrainingJobName": known, member: value}).encode()
        cases.append(("UpdateTrainingJob", body, member))
    for member, value in _BAD_LIST_MEMBERS:
        cases.append(("ListTrainingJobs", json.dumps({member: value}).encode(), member))
    for request in _VALID_LIST_REQUESTS:
        cases.append(("ListTrainingJobs", json.dumps(request).encode(), None))
    rng.shuffle(cases)
    return cases


def test_the_other_operations_refuse_malformed_members_by_name(
    api_server: JobApiServer, store: JobStore, workdir: Path
) -> None:
    known = "known-job"
    valid = json.dumps(valid_request(known, workdir / "sandbox")).encode()
    assert _send(api_server, "CreateTrainingJob", valid)[0] == 200
    wait_until_ended(store)
    failures = []
    for operation, body, member in _other_operation_cases(random.Random(33), known):
        try:
            status, answer = _send(api_server, operation, body)
        except AssertionError as error:
            failures.append(f"{operation} {body[:80]!r}: {error}")
            continue
        if member is None:
            if status != 200:
                failures.append(f"{operation} {body[:80]!r}: refused: {answer}")
        elif status == 200:
            failures.append(f"{operation} {body[:80]!r}: accepted")
        elif member not in answer["message"]:
            failures.append(f"{operation} {body[:80]!r}: {answer['message']!r} names no {member}")
    assert not failures, f"{len(failures)}:\n" + "\n".join(failures[:15])
    # None of those reached a job: the one job is as it was, and nothing else exists.
    assert store.names() == [known]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "it is empty"),
        (b" \n", "it is empty"),
        (b'{"TrainingJobName": "caf\xe9"}', "not UTF-8"),
        ('{"TrainingJobName": "x"}'.encode("utf-16"), "not UTF-8"),
        (b'{"TrainingJobName": ', "valid JSON"),
        (b'{"TrainingJobName": NaN}', "NaN and Infinity are not JSON"),
        (b'{"TrainingJobName": -Infinity}', "NaN and Infinity are not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "at most 32 levels"),
        (b'["TrainingJobName"]', "JSON object"),
        (b"null", "JSON object"),
    ],
)
@pytest.mark.parametrize("operation", ["CreateTrainingJob", "DescribeTrainingJob"])
def test_a_body_that_is_no_request_is_a_serialization_exception(
    api_server: JobApiServer, operation: str, body: bytes, says: str
) -> None:
    status, answer = _send(api_server, operation, body)
    assert (status, answer["__type"]) == (400, "SerializationException")
    assert answer["message"].startswith("body") and says in answer["message"], answer


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            b'{"TrainingJobName": "x", "Tags": ' + b"[" * 40 + b"]" * 40 + b"}",
            "Tags[0][0][0][0][0]",
        ),
        (
            b'{"TrainingJobName": "x", "DebugHookConfig": {"HookParameters": '
            + b'{"k": ' * 200
            + b'"v"'
            + b"}" * 202,
            "DebugHookConfig.HookParameters.k.k.k.k",
        ),
        (
            b'{"TrainingJobName": "x", "Tags": [{"Key": "a", "Value": "b"}, '
            + b"[" * 100_000
            + b"]" * 100_000
            + b"]}",
            "Tags[1][0][0][0][0]",
        ),
    ],
    ids=["list-40", "object-200", "too-deep-to-parse"],
)
@pytest.mark.parametrize("operation", ["CreateTrainingJob", "DescribeTrainingJob"])
def test_a_member_nested_too_deep_is_named_by_its_path(
    api_server: JobApiServer, operation: str, body: bytes, field: str
) -> None:
    # Issue 27: nesting too deep inside a request was refused naming only the body.
    status, answer = _send(api_server, operation, body)
    assert (status, answer["__type"]) == (400, "SerializationException")
    assert answer["message"].startswith(f"{field}: "), answer
    assert "nested at most 32 levels" in answer["message"], answer

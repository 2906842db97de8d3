"""One validator: `trainprobe validate` and creating a job accept and refuse the same requests.

Malformed requests from the seeded generator (tests/malformed_requests.py) go through
`trainprobe validate` and through creation (the Python control API, and `trainprobe jobs
create`, in turn): both accept or both refuse, a refusal names the field, a refused request
leaves nothing behind (no job, no file), and nothing raises anything but a configuration error.
Then the issue's cases one by one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.jobs.job_helpers import wait_until_ended

from malformed_requests import (
    Case,
    closed_object_store,
    deep_json_text,
    malformed_requests,
    prepare_sandbox,
    set_entry,
    valid_request,
)
from trainprobe.cli.main import main
from trainprobe.config import rule_configs
from trainprobe.config.errors import ConfigError, ConfigErrors
from trainprobe.config.json_bounds import path_text
from trainprobe.config.request_json import parse_request
from trainprobe.config.rules import Rule
from trainprobe.estimator import Estimator
from trainprobe.jobs import JobNameInUse, JobStore, create_training_job, describe_training_job
from trainprobe.storage.job_layout import JobLayout, launch_file_of


def _files(root: Path, skip: Path) -> set[str]:
    found = set()
    for directory, subdirectories, names in os.walk(root):
        if Path(directory) == skip:
            subdirectories[:] = []
            continue
        found.update(os.path.join(directory, name) for name in [*subdirectories, *names])
    return found


class Fuzz:
    """Runs cases through validate and create in one sandbox and job store."""

    def __init__(self, store: JobStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
        self.store = store
        self.root = tmp_path
        self.home = tmp_path / "home"
        self.sandbox = tmp_path / "sandbox"
        self.capsys = capsys
        self.request_file = tmp_path / "request.json"
        self.created: list[str] = []
        prepare_sandbox(self.sandbox)

    def validate(self, case: Case) -> tuple[int, str]:
        self.request_file.write_bytes(case.body)
        status = main(["validate", f"file://{self.request_file}"])
        captured = self.capsys.readouterr()
        return status, captured.out + captured.err

    def create(self, case: Case, index: int) -> tuple[bool, list[str], str]:
        """Create through the Python API (odd cases, when the body is a JSON object) or the CLI;
        whether it was created, the fields named (Python) and the message."""
        request = case.request()
        if index % 2 and isinstance(request, dict):
            try:
                parsed = parse_request(case.body)
                create_training_job(parsed, store=self.store, cwd=str(self.sandbox))
            except ConfigError as error:
                return False, [problem.field for problem in error.problems()], str(error)
            return True, [], ""
        status = main(["jobs", "create", "--cli-input-json", f"file://{self.request_file}"])
        captured = self.capsys.readouterr()
        assert status in (0, 2), (case.label, status, captured)
        message = captured.out + captured.err
        assert "Traceback" not in message, (case.label, message)
        return status == 0, [], message

    def new_files(self, before: set[str]) -> list[str]:
        """Files made since ``before`` that no created job accounts for."""
        created = {name.lower() for name in self.created}
        return [
            path
            for path in _files(self.root, self.home) - before
            if not created & {part.lower() for part in Path(path).parts}
            and path != str(self.request_file)
        ]

    def run(self, case: Case, index: int) -> str | None:
        """What is wrong with how this case was handled, or None."""
        status, said = self.validate(case)
        if status not in (0, 1) or "Traceback" in said:
            return f"validate exited {status}: {said[-500:]}"
        before = _files(self.root, self.home)
        created, fields, _ = self.create(case, index)
        if created != (status == 0):
            return f"validate {'accepted' if status == 0 else 'refused'}, create did not: {said}"
        if created:
            request = case.request()
            self.created.append(str(request["TrainingJobName"]))
            return None
        if "is not valid" not in said or not all(fields):
            return f"validate's refusal names no field: {said} {fields}"
        missing = [field for field in fields if field not in said]
        if missing:
            return f"create named {missing}, validate did not: {said}"
        leftovers = self.new_files(before)
        if leftovers:
            return f"a refused create left {leftovers[:3]}"
        request = case.request()
        name = request.get("TrainingJobName") if isinstance(request, dict) else None
        if isinstance(name, str) and name not in self.created and self.store.get(name):
            return f"a refused create recorded job {name!r}"
        return None


@pytest.mark.parametrize(
    ("seed", "count"),
    [
        pytest.param(11, 160, id="seed-11"),
        pytest.param(12, 100, id="seed-12", marks=pytest.mark.slow),
    ],
)
def test_validate_and_create_agree_on_malformed_requests(
    store: JobStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    seed: int,
    count: int,
) -> None:
    closed_object_store(monkeypatch)
    fuzz = Fuzz(store, tmp_path, capsys)
    monkeypatch.chdir(fuzz.sandbox)
    failures = []
    for index, case in enumerate(malformed_requests(seed, count, fuzz.sandbox)):
        problem = fuzz.run(case, index)
        if problem is not None:
            failures.append(f"{case.label}: {problem}")
    assert not failures, "\n".join(failures[:10])
    # The generator's point is malformed requests: most are refused, some still run.
    assert 0 < len(fuzz.created) < count // 2
    for name in fuzz.created:
        assert describe_training_job({"TrainingJobName": name}, store=store)["TrainingJobArn"]
    wait_until_ended(store)


# ----- the issue's cases, one by one ------------------------------------------------------------


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "sandbox"
    prepare_sandbox(directory)
    monkeypatch.chdir(directory)
    return directory


def refused(request: dict[str, Any], store: JobStore, sandbox: Path) -> list[ConfigError]:
    """The problems creating ``request`` raises; it must leave no job and no file behind, and
    ``trainprobe validate`` must refuse the same request, naming each of those problems."""
    home = sandbox.parent / "home"
    before = _files(sandbox.parent, home)
    with pytest.raises(ConfigError) as raised:
        create_training_job(request, store=store, cwd=str(sandbox))
    assert store.names() == []
    assert _files(sandbox.parent, home) == before
    problems = raised.value.problems()
    home.mkdir(exist_ok=True)
    request_file = home / "refused.json"
    request_file.write_text(json.dumps(request))
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        assert main(["validate", f"file://{request_file}"]) == 1
    assert [str(problem) for problem in problems if str(problem) not in said.getvalue()] == []
    return problems


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "..", ".", "x\x00y", "a\\b", "é" * 126])
@pytest.mark.parametrize("kind", ["DebugRuleConfigurations", "ProfilerRuleConfigurations"])
def test_a_rule_name_that_leaves_its_directory_is_refused(
    store: JobStore, sandbox: Path, name: str, kind: str
) -> None:
    request = valid_request("rule-names", sandbox)
    rule = {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
        "RuleParameters": {"rule_to_invoke": "CPUBottleneck"},
    }
    if kind == "DebugRuleConfigurations":
        request[kind][0]["RuleConfigurationName"] = name
    else:
        request[kind] = [rule]
    (problem,) = refused(request, store, sandbox)
    assert problem.field == f"{kind}[0].RuleConfigurationName"
    assert problem.value == name
    assert "rule's output directory" in problem.allowed


def test_a_rule_name_at_the_limit_is_accepted(store: JobStore, sandbox: Path) -> None:
    request = valid_request("rule-name-limit", sandbox)
    name = "r" * 251
    request["DebugRuleConfigurations"][0]["RuleConfigurationName"] = name
    create_training_job(request, store=store, cwd=str(sandbox))
    record = store.get("rule-name-limit")
    assert record is not None
    rule_dir = JobLayout.for_job("rule-name-limit", str(sandbox / "out")).rule_output_dir(name)
    assert os.path.dirname(rule_dir) == os.path.join(record.job_dir, "rule-output")
    description = describe_training_job({"TrainingJobName": "rule-name-limit"}, store=store)
    assert description["DebugRuleEvaluationStatuses"][0]["RuleConfigurationName"] == name
    wait_until_ended(store)
    assert os.path.isdir(rule_dir)


@pytest.mark.parametrize(
    ("member", "value", "field"),
    [
        ("OutputDataConfig", -1, "OutputDataConfig"),
        ("OutputDataConfig", {"S3OutputPath": "out\x00"}, "OutputDataConfig.S3OutputPath"),
        ("ResourceConfig", {"InstanceCount": 0}, "ResourceConfig.InstanceCount"),
        ("ResourceConfig", {"InstanceCount": 10**9}, "ResourceConfig.InstanceCount"),
        ("StoppingCondition", {"MaxRuntimeInSeconds": -5}, "StoppingCondition.MaxRuntimeInSeconds"),
        ("AlgorithmSpecification", {"TrainingInputMode": "Stream"}, "TrainingInputMode"),
        ("Environment", {"A=B": "x"}, "Environment variable 'A=B'"),
        ("Environment", {"NAME": "x\x00y"}, "Environment.NAME"),
        ("Environment", {"1ST": "x"}, "Environment variable '1ST'"),
        ("TrainingJobName", "a" + "-" * 100 + "b", "TrainingJobName"),
        ("TrainingJobName", "x" * 64, "TrainingJobName"),
        ("Tags", [{"Key": "team"}], "Tags[0].Value"),
        (
            "InputDataConfig",
            [{"ChannelName": "train", "DataSource": {"S3DataSource": "s3"}}],
            "S3DataSource",
        ),
    ],
)
def test_a_member_outside_sagemakers_constraints_is_refused(
    store: JobStore, sandbox: Path, member: str, value: Any, field: str
) -> None:
    request = valid_request("members", sandbox)
    request[member] = value
    problems = refused(request, store, sandbox)
    assert any(field in problem.field for problem in problems), problems


@pytest.mark.parametrize(
    ("where", "field"),
    [
        (("OutputDataConfig", "S3OutputPath"), "OutputDataConfig.S3OutputPath"),
        (("DebugHookConfig", "S3OutputPath"), "DebugHookConfig.S3OutputPath"),
        (
            ("InputDataConfig", 0, "DataSource", "S3DataSource", "S3Uri"),
            "InputDataConfig[0].DataSource.S3DataSource.S3Uri",
        ),
    ],
)
@pytest.mark.parametrize("below", [False, True])
def test_an_output_or_input_path_that_is_a_file_is_refused(
    store: JobStore, sandbox: Path, where: tuple[str | int, ...], field: str, below: bool
) -> None:
    request = valid_request("paths", sandbox)
    target: Any = request
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = str(sandbox / "a-file" / "below" if below else sandbox / "a-file")
    (problem,) = refused(request, store, sandbox)
    assert problem.field == field
    assert "not a directory" in problem.allowed


def create_on_the_command_line(
    request: dict[str, Any], sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    """What ``trainprobe jobs create --cli-input-json`` says refusing ``request``."""
    request_file = sandbox.parent / "create.json"
    request_file.write_text(json.dumps(request))
    status = main(["jobs", "create", "--cli-input-json", f"file://{request_file}"])
    said = capsys.readouterr()
    assert status == 2, said
    assert "Traceback" not in said.out + said.err
    return said.err


_JSON_STRINGS = [
    (("ProfilerConfig", "ProfilingParameters"), "DetailedProfilingConfig", "{"),
    (("DebugRuleConfigurations", 0, "RuleParameters"), "action_json", "["),
    (("HyperParameters",), "epochs", "["),
]


@pytest.mark.parametrize("depth", [40, 1200, 3000])
@pytest.mark.parametrize(
    ("path", "key", "opener"), _JSON_STRINGS, ids=[key for _, key, _ in _JSON_STRINGS]
)
def test_a_string_holding_json_nested_deep_is_refused_at_its_path(
    store: JobStore,
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
    path: tuple[str | int, ...],
    key: str,
    opener: str,
    depth: int,
) -> None:
    # Issue 27: a DetailedProfilingConfig a few thousand levels deep ended validate and create
    # in a RecursionError; so did an action_json, and a hyperparameter (decoded for the script).
    request = valid_request("deep-string", sandbox)
    set_entry(request, path, key, deep_json_text(depth, opener))
    (problem,) = refused(request, store, sandbox)
    assert problem.field == path_text((*path, key))
    assert f"{problem.field}:" in create_on_the_command_line(request, sandbox, capsys)


_STRING_MAPS = [
    (("DebugRuleConfigurations", 0, "RuleParameters"), "tensor_regex"),
    (("ProfilerRuleConfigurations", 0, "RuleParameters"), "threshold"),
    (("DebugHookConfig", "HookParameters"), "save_interval"),
    (("DebugHookConfig", "CollectionConfigurations", 1, "CollectionParameters"), "include_regex"),
    (("ProfilerConfig", "ProfilingParameters"), "DetailedProfilingConfig"),
    (("Environment",), "TRAINING_SEED"),
    (("HyperParameters",), "epochs"),
]


@pytest.mark.parametrize("value", [5, 0.5, True, None, ["fc.*"], {"StartStep": "5"}])
@pytest.mark.parametrize(("path", "key"), _STRING_MAPS, ids=[str(p[-1]) for p, _ in _STRING_MAPS])
def test_a_map_of_strings_takes_strings_only(
    store: JobStore, sandbox: Path, path: tuple[str | int, ...], key: str, value: Any
) -> None:
    # Issue 27: SageMaker's maps of strings refuse any other value, naming it; a number in
    # RuleParameters was accepted, or refused as something else.
    request = valid_request("not-a-string", sandbox)
    request["ProfilerRuleConfigurations"] = [
        {
            "RuleConfigurationName": "CPUBottleneck",
            "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
            "RuleParameters": {"rule_to_invoke": "CPUBottleneck"},
        }
    ]
    set_entry(request, path, key, value)
    (problem,) = refused(request, store, sandbox)
    assert problem.field == path_text((*path, key))
    assert problem.allowed.startswith("a string") and ", not " in problem.allowed


_DEEP_GROUPS = "(" * 1200 + ")" * 1200


@pytest.mark.parametrize(
    ("path", "key", "value", "field"),
    [
        (("DebugHookConfig", "HookParameters"), "include_regex", _DEEP_GROUPS, None),
        (
            ("DebugHookConfig", "CollectionConfigurations", 1, "CollectionParameters"),
            "include_regex",
            _DEEP_GROUPS,
            None,
        ),
        (("DebugRuleConfigurations", 0, "RuleParameters"), "tensor_regex", _DEEP_GROUPS, None),
        (
            ("ProfilerConfig", "ProfilingParameters"),
            "DataloaderProfilingConfig",
            f'{{"MetricsRegex": "{_DEEP_GROUPS}"}}',
            "ProfilerConfig.ProfilingParameters.DataloaderProfilingConfig.MetricsRegex",
        ),
    ],
    ids=["hook", "collection", "rule", "dataloader"],
)
def test_a_regular_expression_too_deep_to_compile_is_refused_at_its_path(
    store: JobStore,
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
    path: tuple[str | int, ...],
    key: str,
    value: str,
    field: str | None,
) -> None:
    # Groups nested 1200 deep exhaust re's compiler: a RecursionError where create said nothing.
    request = valid_request("deep-regex", sandbox)
    set_entry(request, path, key, value)
    (problem,) = refused(request, store, sandbox)
    assert problem.field == (field or path_text((*path, key)))
    assert f"{problem.field}:" in create_on_the_command_line(request, sandbox, capsys)


def test_a_member_nested_too_deep_is_refused_by_its_path_not_the_file(
    store: JobStore, sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 27: HookParameters nested 200 levels deep was refused naming the request file.
    request = valid_request("deep-member", sandbox)
    nested: Any = "x"
    for _ in range(200):
        nested = {"k": nested}
    request["DebugHookConfig"]["HookParameters"] = nested
    (problem,) = refused(request, store, sandbox)
    assert problem.field.startswith("DebugHookConfig.HookParameters.k")
    assert "nested at most 32 levels" in problem.allowed
    said = create_on_the_command_line(request, sandbox, capsys)
    assert f"trainprobe jobs create: {problem.field}:" in said


def test_every_problem_is_named_at_once(store: JobStore, sandbox: Path) -> None:
    request = valid_request("all-at-once", sandbox)
    request["OutputDataConfig"] = -1
    request["Environment"] = {"A=B": "x"}
    request["DebugHookConfig"]["CollectionConfigurations"].append({"CollectionName": "weights"})
    request["DebugRuleConfigurations"][0]["RuleParameters"]["tensor_regex"] = "conv(["
    request["DebugRuleConfigurations"].append(
        {
            "RuleConfigurationName": "Variance",
            "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
            "RuleParameters": {"rule_to_invoke": "TensorVariance", "collection_names": "weights"},
        }
    )
    request["ProfilerRuleConfigurations"] = [
        {
            "RuleConfigurationName": "EXPLODING",
            "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
            "RuleParameters": {"rule_to_invoke": "CPUBottleneck"},
        }
    ]
    request["AlgorithmSpecification"]["MetricDefinitions"][0]["Regex"] = "loss=(["
    fields = [problem.field for problem in refused(request, store, sandbox)]
    assert fields == [
        "Environment variable 'A=B'",
        "AlgorithmSpecification.MetricDefinitions[0].Regex",
        "OutputDataConfig",
        "DebugHookConfig.CollectionConfigurations[2]",
        "DebugRuleConfigurations[0].RuleParameters.tensor_regex",
        "DebugRuleConfigurations[1].RuleParameters",
        "ProfilerRuleConfigurations[0].RuleConfigurationName",
    ]


def test_a_refused_create_records_nothing_so_the_retry_runs(store: JobStore, sandbox: Path) -> None:
    request = valid_request("retried", sandbox)
    request["OutputDataConfig"] = {"S3OutputPath": str(sandbox / "a-file")}
    refused(request, store, sandbox)
    request["OutputDataConfig"] = {"S3OutputPath": str(sandbox / "out")}
    create_training_job(request, store=store, cwd=str(sandbox))
    assert store.names() == ["retried"]
    wait_until_ended(store)


def test_two_creations_of_one_name_make_one_job(store: JobStore, sandbox: Path) -> None:
    outcomes: list[str] = []

    def create() -> None:
        try:
            create_training_job(valid_request("once", sandbox), store=store, cwd=str(sandbox))
            outcomes.append("created")
        except JobNameInUse:
            outcomes.append("in use")
        except ConfigError as error:
            outcomes.append(f"refused: {error}")

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("created") == 1, outcomes
    assert all(
        outcome in ("created", "in use") or "already holds" in outcome for outcome in outcomes
    )
    record = store.get("once")
    assert record is not None and record.status != "Failed"
    assert os.path.isfile(launch_file_of(record.job_dir))  # the winner's files are whole
    wait_until_ended(store)


def test_a_layout_that_cannot_be_made_is_taken_back_whole(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    layout = JobLayout.for_job("job", str(root), debug_root=str(tmp_path / "debug"))
    (tmp_path / "debug").mkdir()
    (tmp_path / "debug" / "job").write_text("a file where the job's debug directory goes")
    assert layout.blocked() == str(tmp_path / "debug" / "job")
    with pytest.raises(OSError):
        layout.create()
    assert os.listdir(root) == []  # the job's directory, made first, is gone; the root stays
    made = JobLayout.for_job("job", str(root / "new-root")).create()
    assert made == [str(root / "new-root" / "job")]


# ----- trainprobe validate, as a user runs it ---------------------------------------------------


def validate(path: Path, *, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", "validate", f"file://{path}"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "TRAINPROBE_HOME": str(cwd / "home")},
    )


@pytest.mark.parametrize(
    ("content", "status", "says"),
    [
        (b"\xef\xbb\xbf" + json.dumps({"TrainingJobName": "x"}).encode(), 1, "entry point"),
        (b'{"TrainingJobName": "caf\xe9"}', 1, "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, 1, "nested"),
        (b'{"TrainingJobName": ' + b"[" * 200 + b"]" * 200 + b"}", 1, "32 levels"),
        (
            b'{"DebugHookConfig": {"HookParameters": ' + b'{"k": ' * 100_000 + b"}" * 100_002,
            1,
            "DebugHookConfig.HookParameters.k.k.k.k: '{...}' is not valid",
        ),
        (
            b'{"TrainingJobName": "x", "RoleArn": "' + b"r" * (1 << 20) + b'"}',
            1,
            "a request of at most 1048576 bytes",
        ),
        (b"[1, 2]", 1, "JSON object"),
        (b"{}", 1, "TrainingJobName: None is not valid"),
        (b"", 1, "valid JSON"),
    ],
    ids=[
        "bom",
        "latin-1",
        "deep-array",
        "deep-member",
        "member-too-deep-to-parse",
        "over-1-MiB",
        "list",
        "empty-object",
        "empty",
    ],
)
def test_validate_answers_every_file_without_a_traceback(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    status: int,
    says: str,
) -> None:
    # In this process (the command's own code, without an interpreter's start each time):
    # anything it raised would fail the test; the subprocess test below runs it as a user does.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINPROBE_HOME", str(tmp_path / "home"))
    path = tmp_path / "job.json"
    path.write_bytes(content)
    assert main(["validate", f"file://{path}"]) == status
    said = capsys.readouterr()
    assert "Traceback" not in said.out + said.err
    assert says in said.out


def test_validate_says_so_when_the_file_cannot_be_read(tmp_path: Path) -> None:
    result = validate(tmp_path / "missing.json", cwd=tmp_path)
    assert result.returncode == 2
    assert "missing.json" in result.stdout and "Traceback" not in result.stderr


# ----- the Estimator runs the same checks ------------------------------------------------------


def test_the_estimator_is_refused_what_create_refuses(store: JobStore, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    estimator = Estimator(
        entry_point=str(script),
        environment={"A=B": "1", "OK": "nul\x00"},
        rules=[Rule.sagemaker(rule_configs.tensor_variance(), rule_parameters=_TENSORS)],
        output_path=str(tmp_path / "out"),
        store=store,
    )
    with pytest.raises(ConfigErrors) as raised:
        estimator.fit(wait=False)
    fields = [problem.field for problem in raised.value]
    assert fields == ["Environment variable 'A=B'", "Environment.OK"]
    assert store.names() == []
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError) as named:
        Rule.sagemaker(rule_configs.exploding_tensor(), name="../elsewhere")
    assert named.value.field == "name"


_TENSORS = {"collection_names": "weights", "max_threshold": "10"}

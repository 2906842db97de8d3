"""``trainprobe rules list`` and ``trainprobe rules show``, run as the user runs them.

A few commands run as real subprocesses; showing every rule runs in-process through ``main`` (the
same code, without 33 interpreter start-ups). Each rule's examples are run: the Python example is
executed and the JSON example is read back into the same rule.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trainprobe.cli.main import main
from trainprobe.config import catalogue
from trainprobe.config.rules import ProfilerRule, Rule


def trainprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def table(stdout: str) -> dict[str, list[str]]:
    lines = stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "FRAMEWORKS", "DESCRIPTION"]
    rows = [line.split(maxsplit=3) for line in lines[1:]]
    return {row[0]: row[1:] for row in rows}


def test_list_shows_every_rule_with_kind_frameworks_and_description() -> None:
    result = trainprobe("rules", "list")
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    assert list(rows) == [spec.name for spec in catalogue.all_rules()]
    for spec in catalogue.all_rules():
        kind, frameworks, description = rows[spec.name]
        assert kind == spec.kind
        assert frameworks.split(",") == list(spec.frameworks)
        assert description == spec.description


def test_list_filters_by_kind_and_framework() -> None:
    profiler = table(trainprobe("rules", "list", "--kind", "profiler").stdout)
    assert list(profiler) == [spec.name for spec in catalogue.profiler_rules()]
    xgboost = table(
        trainprobe("rules", "list", "--kind", "debugging", "--framework", "xgboost").stdout
    )
    assert {"TreeDepth", "FeatureImportanceOverweight", "AllZero", "CreateXgboostReport"} <= set(
        xgboost
    )
    assert "DeadRelu" not in xgboost
    assert all(kind == "debugging" for kind, _, _ in xgboost.values())


def test_list_refuses_an_unknown_framework() -> None:
    result = trainprobe("rules", "list", "--framework", "jax")
    assert result.returncode == 2
    assert "pytorch" in result.stderr


def test_show_explains_a_rule() -> None:
    result = trainprobe("rules", "show", "VanishingGradient")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("VanishingGradient (debugging rule)")
    assert "rule_configs.vanishing_gradient()" in out
    assert "threshold  (float, default 1e-07)" in out
    assert "gradients  (save_interval=500)" in out
    assert "Python example:" in out and "JSON example" in out


def test_show_finds_a_rule_in_any_case() -> None:
    result = trainprobe("rules", "show", "loadbalancing")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("LoadBalancing (profiler rule)")
    # The alternative default from smdebug's code is noted next to rulesconfig's.
    assert "another default, 0.2, from smdebug's profiler rule code" in result.stdout


def test_show_an_unknown_rule_exits_2_with_a_suggestion() -> None:
    result = trainprobe("rules", "show", "VanishingGradiant")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Did you mean 'VanishingGradient'?" in result.stderr


def test_rules_without_an_action_prints_usage() -> None:
    result = trainprobe("rules")
    assert result.returncode == 2
    assert "list" in result.stderr and "show" in result.stderr


def _section(out: str, title: str, end: str | None) -> str:
    start = out.index(title + "\n") + len(title) + 1
    stop = out.index(end, start) if end else len(out)
    lines = out[start:stop].splitlines()
    return "\n".join(line[2:] for line in lines)


@pytest.mark.parametrize("spec", catalogue.all_rules(), ids=lambda spec: spec.name)
def test_every_rule_s_examples_work(
    spec: catalogue.RuleSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rules", "show", spec.name]) == 0
    out = capsys.readouterr().out
    for parameter in spec.parameters:
        assert f"  {parameter.name}  ({parameter.type.value}, " in out
        assert parameter.meaning in out
    for need in spec.collections:
        assert f"  {need.name}" in out
    python = _section(out, "Python example:", "JSON example")
    namespace: dict[str, object] = {}
    exec(python, namespace)
    rule = namespace["rule"]
    request = json.loads(_section(out, "JSON example (CreateTrainingJob request):", None))
    if spec.kind == "profiler":
        assert isinstance(rule, ProfilerRule)
        [entry] = request["ProfilerRuleConfigurations"]
        assert ProfilerRule.from_request_dict(entry) == rule
    else:
        assert isinstance(rule, Rule)
        [entry] = request["DebugRuleConfigurations"]
        assert Rule.from_request_dict(entry) == rule
        collections = request.get("DebugHookConfig", {}).get("CollectionConfigurations", [])
        assert collections == [need.to_request_dict() for need in spec.collections]
    assert rule.spec is spec


def test_show_says_what_a_rule_does_and_does_not_catch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "show", "LossNotDecreasing"]) == 0
    out = capsys.readouterr().out
    catches = out.index("What it catches:")
    misses = out.index("What it does not catch:")
    assert catches < misses < out.index("Parameters:")
    assert "A rise or dip shorter than the 5 saved steps it averages over" in out[misses:]


@pytest.mark.parametrize(
    "spec",
    [spec for spec in catalogue.all_rules() if spec.name != "CreateXgboostReport"],
    ids=lambda spec: spec.name,
)
def test_every_rule_says_what_it_does_not_catch(
    spec: catalogue.RuleSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rules", "show", spec.name]) == 0
    out = capsys.readouterr().out
    assert "What it catches:" in out and "What it does not catch:" in out

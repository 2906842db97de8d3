"""``trainprobe run``'s options ask for what the estimator asks for with the same settings.

Both build CreateTrainingJob from the SDK's objects through one builder
(``trainprobe.config.sdk_request``). Each case below is a command line and the estimator a user
would write for the same job, in the SDK's classes; the requests must agree on every Debugger
part, the hosts, the environment and the time limit. What ``trainprobe run`` leaves to the job
by design is set aside: where outputs go (the job's output root), the script (a command, not
the SDK's hyperparameters), an empty collection list, and a ProfilerConfig that only turns the
profiler off (no ProfilerConfig is off too).
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import pytest

from trainprobe import debugger
from trainprobe.cli import run_command
from trainprobe.config.errors import ConfigError
from trainprobe.config.rules import get_default_profiler_rule
from trainprobe.estimator import Estimator
from trainprobe.jobs import JobStore

COMPARED = (
    "DebugRuleConfigurations",
    "DebugHookConfig",
    "ProfilerRuleConfigurations",
    "ProfilerConfig",
    "ResourceConfig",
    "Environment",
    "StoppingCondition",
)


def _timeline_only() -> debugger.FrameworkProfile:
    """Profiling with the step timeline alone, as ``Estimator.update_profiler`` asks for it
    with ``disable_framework_metrics=True``: what ``trainprobe run`` profiles by default."""
    profile = debugger.FrameworkProfile()
    profile.profiling_parameters = {}
    return profile


# Each case: trainprobe run's options, and the estimator's arguments for the same job (``api``
# is trainprobe.debugger, as ``sagemaker.debugger`` in the SDK).
CASES = {
    "a debugging rule and ProfilerReport": (
        ["--rule", "ExplodingTensor", "--rule", "ProfilerReport"],
        """dict(rules=[api.Rule.sagemaker(api.rule_configs.exploding_tensor()),
                       api.ProfilerRule.sagemaker(api.rule_configs.ProfilerReport())],
                profiler_config=api.ProfilerConfig(
                    system_monitor_interval_millis=500, framework_profile_params=TIMELINE))""",
    ),
    "parameters, a save interval, a stop action, no profiler": (
        [
            *("--rule", "LossNotDecreasing:num_steps=20", "--save-interval", "10"),
            *("--stop-on-issue", "--no-profiler"),
        ],
        """dict(rules=[api.Rule.sagemaker(
                    api.rule_configs.loss_not_decreasing(),
                    rule_parameters={"num_steps": "20"},
                    collections_to_save=[api.CollectionConfig("losses", {"save_interval": "10"})],
                    actions=api.rule_configs.StopTraining())],
                debugger_hook_config=api.DebuggerHookConfig(
                    hook_parameters={"save_interval": "10"}),
                disable_profiler=True)""",
    ),
    "spike rules rolling back": (
        [
            *("--rule", "LossSpike:sigma=5", "--rule", "GradientNormSpike"),
            *("--on-spike", "rollback:steps=20,lr_factor=0.5", "--rule", "ProfilerReport"),
        ],
        """dict(rules=[
                    api.Rule.sagemaker(api.rule_configs.loss_spike(),
                                       rule_parameters={"sigma": "5"},
                                       actions=api.rule_configs.Rollback(
                                           steps="20", lr_factor="0.5")),
                    api.Rule.sagemaker(api.rule_configs.gradient_norm_spike(),
                                       actions=api.rule_configs.Rollback(
                                           steps="20", lr_factor="0.5")),
                    api.ProfilerRule.sagemaker(api.rule_configs.ProfilerReport())],
                profiler_config=api.ProfilerConfig(framework_profile_params=TIMELINE,
                                                   system_monitor_interval_millis=500))""",
    ),
    "a collection of the hook's own, framework profiling, a profiler rule": (
        [
            *("--collection", "trees:save_interval=5", "--rule", "TreeDepth"),
            *("--collection", "losses:save_interval=3", "--rule", "LossNotDecreasing"),
            *("--framework-profile", "--profiler-interval-ms", "100", "--rule", "CPUBottleneck"),
        ],
        """dict(rules=[api.Rule.sagemaker(api.rule_configs.tree_depth()),
                       api.Rule.sagemaker(api.rule_configs.loss_not_decreasing()),
                       api.ProfilerRule.sagemaker(api.rule_configs.CPUBottleneck())],
                debugger_hook_config=api.DebuggerHookConfig(collection_configs=[
                    api.CollectionConfig("trees", {"save_interval": "5"}),
                    api.CollectionConfig("losses", {"save_interval": "3"})]),
                profiler_config=api.ProfilerConfig(
                    system_monitor_interval_millis=100,
                    framework_profile_params=api.FrameworkProfile()))""",
    ),
    "hosts, a time limit, the environment, Dask, named rules": (
        [
            *("--hosts", "2", "--max-run", "60", "--env", "A=1", "--env", "B=x=y"),
            *("--rule-executor", "dask://127.0.0.1:8786", "--rule", "StepOutlier:stddev=4"),
            *("--rule", "ExplodingTensor:name=exploding", "--rule", "ExplodingTensor"),
            *("--rule", "ExplodingTensor"),
        ],
        """dict(instance_count=2, max_run=60, environment={"A": "1", "B": "x=y"},
                rule_executor="dask://127.0.0.1:8786",
                rules=[api.ProfilerRule.sagemaker(api.rule_configs.StepOutlier(stddev=4)),
                       api.Rule.sagemaker(api.rule_configs.exploding_tensor(),
                                          name="exploding"),
                       api.Rule.sagemaker(api.rule_configs.exploding_tensor()),
                       api.Rule.sagemaker(api.rule_configs.exploding_tensor(),
                                          name="ExplodingTensor-2")],
                debugger_hook_config=api.DebuggerHookConfig(
                    hook_parameters={"include_workers": "all"}),
                profiler_config=api.ProfilerConfig(framework_profile_params=TIMELINE,
                                                   system_monitor_interval_millis=500))""",
    ),
    "nothing but the hook": (
        ["--no-profiler"],
        "dict(debugger_hook_config=api.DebuggerHookConfig(), disable_profiler=True)",
    ),
}


def _cli_request(script: Path, options: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    run_command.register(parser.add_subparsers())
    own = argparse.ArgumentParser(add_help=False)
    run_command._add_options(own)
    args = parser.parse_args(["run", str(script), "--name", "job-1", *options, "--", "-v"])
    run_command._split_arguments(args, own)
    return run_command.build_request(args)


def _comparable(request: dict[str, Any], cli: dict[str, Any]) -> dict[str, Any]:
    """A request without what ``trainprobe run`` (whose request is ``cli``) leaves to the job."""
    compared = {key: copy.deepcopy(request[key]) for key in COMPARED if key in request}
    hook = compared.get("DebugHookConfig", {})
    hook.pop("S3OutputPath", None)
    if hook.get("CollectionConfigurations") == []:
        del hook["CollectionConfigurations"]
    profiler = compared.get("ProfilerConfig", {})
    profiler.pop("S3OutputPath", None)
    profiler.get("ProfilingParameters", {}).pop("LocalPath", None)
    if profiler == {"DisableProfiler": True}:
        del compared["ProfilerConfig"]
    if "StoppingCondition" not in cli:
        compared.pop("StoppingCondition", None)  # the SDK's default day
    return compared


@pytest.mark.parametrize("case", sorted(CASES))
def test_trainprobe_run_asks_for_what_the_estimator_asks_for(case: str, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    options, estimator_arguments = CASES[case]
    arguments = eval(estimator_arguments, {"api": debugger, "TIMELINE": _timeline_only()})
    estimator = Estimator(
        str(script),
        output_path=str(tmp_path / "out"),
        store=JobStore(tmp_path / "jobs.sqlite"),
        **arguments,
    )
    cli = _cli_request(script, options)
    assert _comparable(cli, cli) == _comparable(estimator._request("job-1"), cli)
    algorithm = cli["AlgorithmSpecification"]
    assert algorithm["ContainerEntrypoint"] == [str(script)]
    assert algorithm["ContainerArguments"] == ["-v"]
    assert "OutputDataConfig" not in cli


def test_with_profiling_on_and_no_profiler_rule_trainprobe_run_adds_profiler_report(
    tmp_path: Path,
) -> None:
    """As SageMaker Debugger's SDK did; the estimator, as the SDK since 2.x, does not."""
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    (added,) = _cli_request(script, ["--rule", "ExplodingTensor"])["ProfilerRuleConfigurations"]
    default = get_default_profiler_rule().to_profiler_rule_config_dict()
    assert added["RuleParameters"] == default["RuleParameters"]
    assert added["RuleConfigurationName"].startswith("ProfilerReport-")
    assert "ProfilerRuleConfigurations" not in _cli_request(script, ["--no-profiler"])
    estimator = Estimator(str(script), store=JobStore(tmp_path / "jobs.sqlite"))
    assert "ProfilerRuleConfigurations" not in estimator._request("job-1")


def test_bad_options_are_refused_naming_the_option(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    for options, named, allowed in (
        (["--profiler-interval-ms", "300"], "--profiler-interval-ms: 300", "100, 200, 500"),
        (["--collection", "weights:often=1"], "--collection: 'weights:often=1'", "save_interval"),
    ):
        with pytest.raises(ConfigError, match=f"^{named} is not valid") as raised:
            _cli_request(script, options)
        assert allowed in raised.value.allowed

"""``trainprobe run --rule LossSpike --on-spike skip|rollback|stop``: the request the command sends
gives the in-training rules the action asked for (the rest keep --stop-on-issue's), and an
--on-spike with nothing to act for, or an action it does not know, is refused naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.cli.test_run_collections import request as build_request
from tests.cli.test_run_command import TRAINING, trainprobe_run

from trainprobe.config.actions import parse_actions
from trainprobe.config.errors import ConfigError
from trainprobe.debugger import rule_configs


def request(*arguments: str) -> dict[str, Any]:
    return build_request(*arguments, "--name", "spiky", "--no-profiler")


def actions_of(built: dict[str, Any]) -> dict[str, object]:
    return {
        entry["RuleConfigurationName"]: parse_actions(entry["RuleParameters"]["action_json"])
        if "action_json" in entry["RuleParameters"]
        else None
        for entry in built["DebugRuleConfigurations"]
    }


def test_the_spike_rules_take_the_action_and_the_others_stop_on_issue() -> None:
    built = request(
        "--rule", "LossSpike:sigma=4",
        "--rule", "GradientNormSpike",
        "--rule", "ExplodingTensor",
        "--on-spike", "skip",
        "--stop-on-issue",
    )  # fmt: skip
    assert actions_of(built) == {
        "LossSpike": rule_configs.SkipStep(),
        "GradientNormSpike": rule_configs.SkipStep(),
        "ExplodingTensor": rule_configs.StopTraining("spiky"),
    }
    [loss_spike] = [
        e for e in built["DebugRuleConfigurations"] if e["RuleConfigurationName"] == "LossSpike"
    ]
    assert loss_spike["RuleParameters"]["sigma"] == "4"
    # The rules' losses are saved for their evaluators.
    collections = built["DebugHookConfig"]["CollectionConfigurations"]
    assert {"CollectionName": "losses", "CollectionParameters": {"save_interval": "10"}} in (
        collections
    )


def test_rollback_takes_its_steps_and_learning_rate_factor() -> None:
    built = request("--rule", "LossSpike", "--on-spike", "rollback:steps=20,lr_factor=0.5")
    assert actions_of(built) == {"LossSpike": rule_configs.Rollback(steps=20, lr_factor=0.5)}
    stop = request("--rule", "GradientNormSpike", "--on-spike", "stop")
    assert actions_of(stop) == {"GradientNormSpike": rule_configs.StopTraining("spiky")}


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (("--rule", "ExplodingTensor", "--on-spike", "skip"), "a --rule LossSpike or --rule"),
        (("--on-spike", "skip"), "a --rule LossSpike or --rule"),
        (("--rule", "LossSpike", "--on-spike", "skp"), "Did you mean 'skip'?"),
        (("--rule", "LossSpike", "--on-spike", "rollback:steps=0"), "integer >= 1"),
        (("--rule", "LossSpike", "--on-spike", "rollback:step=3"), "takes steps and lr_factor"),
        (("--rule", "LossSpike", "--on-spike", "skip:steps=3"), "--on-spike"),
    ],
)
def test_a_bad_on_spike_is_refused_naming_it(arguments: tuple[str, ...], said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        request(*arguments)
    assert raised.value.field == "--on-spike"
    assert said in str(raised.value)


@pytest.mark.slow
def test_trainprobe_run_skips_a_diverged_training_s_updates_then_stops(tmp_path: Path) -> None:
    """An unchanged script whose weights turn NaN at step 25, run as a user runs it: the
    hook skips the spiking updates, stops the training past max_skips, and the verdict says
    so."""
    finished = trainprobe_run(
        tmp_path,
        str(TRAINING),
        "--rule", "LossSpike:warmup_steps=5,max_skips=2",
        "--on-spike", "skip",
        "--save-interval", "1",
        "--no-profiler",
        "--name", "cli-spikes",
        "--output", str(tmp_path / "out"),
        "--",
        "--steps", "60", "--nan-at", "25",
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout + finished.stderr
    lines = finished.stdout.splitlines()
    summary = lines[lines.index("Training job cli-spikes: Stopped") :]
    assert "  LossSpike: IssuesFound" in summary
    # The verdict names the spike at step 25 (the rule may have read the hook's record while it
    # waited for the next saved step, and so report it a step later).
    found = [line for line in summary if "LossSpike found an issue at TRAIN step " in line]
    assert found and "TRAIN step 25: nan" in found[0], summary
    assert "Stopped by rule LossSpike's StopTraining action" in finished.stdout
    assert "the training was stopped before the update" in finished.stdout

"""LossSpike and GradientNormSpike through the runner, as ``trainprobe rules run`` runs them.

After the training (no in-training judgement written), LossSpike judges the saved losses: a real
PyTorch training whose loss spikes on a few corrupted batches (labels flipped, inputs scaled),
its clean twin, and one too short to leave the warm-up. Where the training judged the rule, its
spike files (written by ``storage.spike_records``, as the hook writes them) are the verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from builtin_training import classes, mlp
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.rules.verdict import ERROR, ISSUES_FOUND, NO_ISSUES_FOUND, Verdict
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.rule_output import read_evaluations
from trainprobe.storage.spike_records import SpikeRecord, write_spikes

pytestmark = pytest.mark.slow

CORRUPTED = (60, 90)
"""The TRAIN steps whose batch is corrupted (labels flipped, inputs scaled by 5)."""


def train(out: Path, steps: int, corrupted: tuple[int, ...] = (), eval_every: int = 0) -> str:
    """A small classifier trained with trainprobe's hook, losses saved at every step; with
    ``eval_every``, one EVAL step on mislabelled data (a loss far above the training's) follows
    every ``eval_every`` TRAIN steps from step 30 (the TRAIN losses' warm-up is over by then).
    Its tensor output."""
    data = classes(512, 8, seed=1)
    model = mlp([8, 16, 2], seed=0)
    generator = torch.Generator().manual_seed(0)
    hook = smd.Hook(
        str(out), save_config=smd.SaveConfig(save_interval=1), include_collections=["losses"]
    )
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(steps):
        batch = torch.randint(0, len(data.inputs), (32,), generator=generator)
        inputs, targets = data.inputs[batch], data.targets[batch]
        if step in corrupted:
            inputs, targets = inputs * 5, 1 - targets
        hook.set_mode(smd.modes.TRAIN)
        optimizer.zero_grad()
        loss_fn(model(inputs), targets).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if eval_every and step >= 30 and (step + 1) % eval_every == 0:
            hook.set_mode(smd.modes.EVAL)
            with torch.no_grad():
                loss_fn(model(inputs), 1 - targets)
    hook.close()
    return str(out)


@pytest.fixture(scope="module")
def spiky(tmp_path_factory: pytest.TempPathFactory) -> str:
    return train(tmp_path_factory.mktemp("spiky"), 120, CORRUPTED, eval_every=5)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> str:
    return train(tmp_path_factory.mktemp("clean"), 120, eval_every=5)


def run(
    path: str, rule: str = "LossSpike", output: Path | None = None, **parameters: str
) -> Verdict:
    definition = RuleDefinition.for_builtin(rule, parameters)
    runner = RuleRunner(
        definition,
        path,
        output_dir=None if output is None else str(output),
        every_step=True,
        no_data_timeout=5,
    )
    return runner.run()[0]


def test_the_saved_losses_spike_at_the_corrupted_batches(spiky: str, tmp_path: Path) -> None:
    verdict = run(spiky, output=tmp_path, warmup_steps="10")

    assert verdict.status == ISSUES_FOUND
    # The EVAL losses, far above the TRAIN ones, have their own window: no spike there.
    assert [(issue.mode, issue.mode_step) for issue in verdict.issues] == [
        (ModeKeys.TRAIN, step) for step in CORRUPTED
    ]
    first = verdict.issues[0].evidence[0]
    assert first.message.startswith("CrossEntropyLoss_output_0: TRAIN step 60")
    assert "against the window's mean" in first.message and "beyond sigma 6" in first.message
    assert isinstance(first.value, float) and first.value > 5
    written = [line for line in read_evaluations(str(tmp_path / "LossSpike"))]
    assert [line["result"] for line in written].count(ISSUES_FOUND) == len(CORRUPTED)


def test_a_clean_training_passes_and_a_lower_sigma_catches_more(clean: str, spiky: str) -> None:
    verdict = run(clean, warmup_steps="10")
    assert verdict.status == NO_ISSUES_FOUND, verdict.details
    assert verdict.steps_evaluated > 0

    # A ratio to the window's mean catches what sigma alone lets through.
    strict = run(spiky, warmup_steps="10", sigma="1000", ratio="10")
    assert [issue.mode_step for issue in strict.issues] == list(CORRUPTED)


def test_no_verdict_from_fewer_losses_than_the_warm_up(tmp_path: Path) -> None:
    short = train(tmp_path / "short", 15)
    verdict = run(short)

    assert verdict.status == ERROR
    assert verdict.steps_evaluated == 0
    assert "warmup_steps 20" in verdict.details


def _record(step: int, value: float, action: str, rule: str = "LossSpike") -> SpikeRecord:
    return SpikeRecord(
        rule=rule,
        worker="worker_0",
        step=step,
        mode=ModeKeys.TRAIN,
        mode_step=step,
        value=value,
        mean=0.2,
        std=0.05,
        z=(value - 0.2) / 0.05,
        action=action,
        time=0.0,
    )


def test_the_training_s_own_spikes_are_the_verdict(tmp_path: Path) -> None:
    """The training judged every step, skipped two updates and stopped at a third spike: each
    spike is reported, with what was done, and the saved losses are not judged again."""
    out = tmp_path / "judged"
    train(out, 40)
    # The last spike stopped the training at step 45, after its last saved step (39).
    spikes = [_record(12, 3.5, "skip"), _record(31, 9.0, "skip"), _record(45, 7.0, "stop")]
    write_spikes(str(out), "worker_0", spikes)

    verdict = run(str(out))

    assert verdict.status == ISSUES_FOUND
    # Each spike at the step it happened at, once.
    said = {issue.step: [item.message for item in issue.evidence] for issue in verdict.issues}
    assert said == {
        12: [_record(12, 3.5, "skip").describe()],
        31: [_record(31, 9.0, "skip").describe()],
        39: [_record(45, 7.0, "stop").describe()],
    }
    assert "the update was skipped" in said[12][0]
    # GradientNormSpike's records are its own.
    assert run(str(out), "GradientNormSpike").status == ERROR


def test_a_training_that_judged_past_the_warm_up_without_a_spike_passes(tmp_path: Path) -> None:
    out = tmp_path / "judged"
    train(out, 40)
    # The training judged 40 steps and found no spike.
    write_spikes(str(out), "worker_0", [], {"GradientNormSpike": {"TRAIN": 40}})

    passed = run(str(out), "GradientNormSpike")
    assert passed.status == NO_ISSUES_FOUND, passed.details

    too_few = run(str(out), "GradientNormSpike", warmup_steps="50")
    assert too_few.status == ERROR
    assert "none past warmup_steps 50" in too_few.details


def test_gradient_norm_spike_without_the_training_s_judgement_says_how_to_get_it(
    clean: str,
) -> None:
    verdict = run(clean, "GradientNormSpike")
    assert verdict.status == ERROR
    assert "trainprobe run --rule GradientNormSpike" in verdict.details

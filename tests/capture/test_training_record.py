"""Every TRAIN step's loss, learning rate and gradient norm, kept by default whatever the save
interval: the trial reads them as ``trainprobe/loss``, ``trainprobe/learning_rate`` and
``trainprobe/gradient_norm`` at every step, equal to what the training computed itself (its
``loss.item()``, its scheduler's rate, ``nn.utils.get_total_norm`` of its gradients), on the
CPU and on the GPU path forced at the CUDA boundary (the values reach the host only through the
summary's copy, which the writer thread waits for); the saved steps stay what they were, and so
do their scalars' chunks; ``record_every_step=False`` keeps none. A training that updates its
weights by hand (``hand_update_training.py``, in its own process) is recorded at its backward
passes, with no learning rate.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.analysis.exceptions import TensorUnavailable, TensorUnavailableForStep
from trainprobe.capture.pytorch import host_copy
from trainprobe.storage import written_scalars
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.written_scalars import read_written_scalars
from trainprobe.trials import create_trial

STEPS = 150
RECORDED = ("trainprobe/gradient_norm", "trainprobe/learning_rate", "trainprobe/loss")


def train(out: Path, steps: int = STEPS, evaluate_every: int = 0, **hook: Any) -> dict[str, list]:
    """A small classifier trained with SGD and a step schedule, as its users write it; every
    ``evaluate_every`` steps an evaluation batch under ``model.eval()`` and ``no_grad``. What
    the training itself saw at each TRAIN step: loss, learning rate, gradient norm."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4))
    follow = hook.pop("follow_training", True)
    run = smd.Hook(str(out), follow_training=follow, **hook)
    run.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    if not follow:
        run.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=40, gamma=0.5)
    inputs, labels = torch.randn(64, 12), torch.randint(0, 4, (64,))
    seen: dict[str, list] = {"loss": [], "lr": [], "norm": []}
    for step in range(steps):
        if evaluate_every and step % evaluate_every == 0:
            model.eval()
            with torch.no_grad():
                loss_fn(model(inputs), labels)
            model.train()
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        seen["loss"].append(loss.item())
        seen["lr"].append(optimizer.param_groups[0]["lr"])
        seen["norm"].append(float(nn.utils.get_total_norm([p.grad for p in model.parameters()])))
        optimizer.step()
        schedule.step()
    run.close()
    return seen


@pytest.mark.parametrize("path", ["CPU", "GPU"])
def test_every_train_step_is_kept_whatever_the_save_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    if path == "GPU":  # the CUDA boundary: values reach the host only through a copy
        monkeypatch.setattr(host_copy, "HOST_READS_ARE_FREE", set())
    seen = train(tmp_path)  # SageMaker's default save interval: 500 steps

    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0]  # what the hook saved is what it saved
    # Listed when asked for; a script reading every listed name at every saved step is as it was.
    assert trial.tensor_names(regex="^trainprobe/") == list(RECORDED)
    assert not set(RECORDED) & set(trial.tensor_names())
    loss = trial.tensor("trainprobe/loss")
    assert loss.steps() == list(range(STEPS))
    assert loss.steps(mode=ModeKeys.TRAIN) == list(range(STEPS))
    recorded = [float(value) for value in loss.values().values()]
    np.testing.assert_allclose(recorded, seen["loss"], rtol=1e-6)
    rates = trial.tensor("trainprobe/learning_rate").values(mode=ModeKeys.TRAIN)
    assert [float(rates[step]) for step in range(STEPS)] == pytest.approx(seen["lr"])
    assert float(rates[39]) == 0.2 and float(rates[40]) == 0.1  # the schedule's first drop
    norms = trial.tensor("trainprobe/gradient_norm").values()
    np.testing.assert_allclose([float(n) for n in norms.values()], seen["norm"], rtol=1e-5)
    assert float(loss.value(7, mode=ModeKeys.TRAIN)) == pytest.approx(seen["loss"][7], rel=1e-6)
    assert loss.value(0).shape == ()


def test_a_hook_counting_steps_as_smdebug_does_keeps_its_global_steps(tmp_path: Path) -> None:
    seen = train(tmp_path, 30, follow_training=False)

    trial = create_trial(str(tmp_path))
    loss = trial.tensor("trainprobe/loss")
    assert loss.steps() == list(range(30))
    assert loss.steps(mode=ModeKeys.TRAIN) == []  # GLOBAL steps: the script set no mode
    np.testing.assert_allclose([float(v) for v in loss.values().values()], seen["loss"], rtol=1e-6)


def test_evaluation_steps_between_are_not_recorded_and_train_steps_keep_their_count(
    tmp_path: Path,
) -> None:
    seen = train(tmp_path, 40, evaluate_every=10, save_config=smd.SaveConfig(save_interval=7))

    trial = create_trial(str(tmp_path))
    loss = trial.tensor("trainprobe/loss")
    # Each evaluation batch is an EVAL step of its own: TRAIN step N is global step N + N//10 + 1.
    assert loss.steps(mode=ModeKeys.TRAIN) == list(range(40))
    assert loss.steps() == [step + step // 10 + 1 for step in range(40)]
    recorded = loss.values(mode=ModeKeys.TRAIN)
    np.testing.assert_allclose([float(recorded[s]) for s in range(40)], seen["loss"], rtol=1e-6)
    with pytest.raises(TensorUnavailableForStep):
        loss.value(0)  # an EVAL step
    # The saved steps' scalars are whole in the chunks too: the record did not cut them short.
    kept = read_written_scalars(str(tmp_path))
    assert kept is not None
    saved = trial.tensor("CrossEntropyLoss_output_0")
    steps, values = kept.series[("CrossEntropyLoss_output_0", "TRAIN")]
    saved_train = [s for s in saved.steps() if trial.mode(s) == ModeKeys.TRAIN]
    assert list(steps) == saved_train  # global steps 1, 8, 16, 24, 31, 39
    assert [float(saved.value(int(step))) for step in steps] == pytest.approx(list(values))


def test_switched_off_nothing_is_recorded(tmp_path: Path) -> None:
    train(tmp_path, 20, record_every_step=False)

    trial = create_trial(str(tmp_path))
    assert trial.tensor_names(regex="^trainprobe/") == []
    with pytest.raises(TensorUnavailable):
        trial.tensor("trainprobe/loss")


def test_with_every_step_saved_the_last_step_of_each_chunk_keeps_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A step's record reaches the writer after its files; the files of a chunk's last step do
    # not close the chunk before the record is in it (chunks of 20 steps here, 1000 by default).
    monkeypatch.setattr(written_scalars, "CHUNK_STEPS", 20)
    seen = train(tmp_path, 45, save_config=smd.SaveConfig(save_interval=1))

    loss = create_trial(str(tmp_path)).tensor("trainprobe/loss")
    assert loss.steps() == list(range(45))
    np.testing.assert_allclose([float(v) for v in loss.values().values()], seen["loss"], rtol=1e-6)


@pytest.mark.parametrize("path", ["CPU", "GPU"])
def test_a_training_updating_by_hand_keeps_every_steps_loss_and_gradient_norm(
    tmp_path: Path, path: str
) -> None:
    # Its own process: whether a training updates by hand is whether its process ever made a
    # torch.optim optimizer.
    script = Path(__file__).with_name("hand_update_training.py")
    command = [sys.executable, str(script), str(tmp_path / "out"), str(tmp_path / "seen.json")]
    finished = subprocess.run(
        command + (["--gpu-path"] if path == "GPU" else []),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())

    trial = create_trial(str(tmp_path / "out"))
    loss = trial.tensor("trainprobe/loss")
    assert loss.steps(mode=ModeKeys.TRAIN) == list(range(30))  # no EVAL step among them
    recorded = loss.values(mode=ModeKeys.TRAIN)
    np.testing.assert_allclose([float(recorded[s]) for s in range(30)], seen["loss"], rtol=1e-6)
    # The gradients as the backward left them: the norm the clipping measured, before it.
    norms = trial.tensor("trainprobe/gradient_norm").values(mode=ModeKeys.TRAIN)
    np.testing.assert_allclose([float(norms[s]) for s in range(30)], seen["norm"], rtol=1e-5)
    rates = trial.tensor("trainprobe/learning_rate").values(mode=ModeKeys.TRAIN)
    assert all(np.isnan(float(rate)) for rate in rates.values())  # no optimizer to read it from

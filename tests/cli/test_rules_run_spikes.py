"""``trainprobe rules run LossSpike PATH``, as the user runs it, on losses saved without the
in-training rule: the spike found after the training, and an in-training action given with it
(SkipStep) left to the hook, not refused or failed on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tests.cli.test_rules_run import trainprobe

from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end

LOSS = "CrossEntropyLoss_output_0"


def write_losses(out: Path, losses: list[float]) -> None:
    collections = {"losses": {"name": "losses", "include_regex": [LOSS]}}
    write_collections_file(str(out), "worker_0", collections, num_workers=1)
    for step, loss in enumerate(losses):
        with StepWriter(str(out), step, "worker_0") as writer:
            writer.add(LOSS, np.array(loss, dtype=np.float32), mode=ModeKeys.TRAIN, mode_step=step)
    write_training_end(str(out))


def test_a_saved_spike_is_found_and_skip_step_is_left_to_the_hook(tmp_path: Path) -> None:
    job = tmp_path / "job"
    losses = [1.0 / (1 + step / 10) + 0.01 * (step % 3) for step in range(40)]
    losses[30] = 8.0
    write_losses(job / "debug-output", losses)

    skip = json.dumps({"name": "SkipStep"})
    found = trainprobe(
        "rules", "run", "LossSpike", str(job),
        "--param", "warmup_steps=10", "--param", f"action_json={skip}",
    )  # fmt: skip
    assert found.returncode == 1, found.stdout + found.stderr
    assert "LossSpike: IssuesFound" in found.stdout
    assert f"{LOSS}: TRAIN step 30: the loss 8 against the window's mean" in found.stdout
    assert "Traceback" not in found.stderr

    # A warm-up longer than the training judges nothing: an error, not a pass.
    too_short = trainprobe("rules", "run", "LossSpike", str(job), "--param", "warmup_steps=50")
    assert too_short.returncode == 2, too_short.stdout + too_short.stderr
    assert "LossSpike-rerun-1: Error" in too_short.stdout
    assert "warmup_steps 50 needed before one is judged" in too_short.stdout

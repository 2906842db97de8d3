"""The PyTorch hook's TensorBoard export, read back with the ``tensorboard`` package's reader.

Expected tags follow reference/smdebug.md §2 (scalar collections and reductions as scalars,
histograms tagged ``<collection>/<tensor>``, one run per mode, global steps); expected values are
what the training loop itself saw at each step, or what the hook saved in its step files.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from hook_training import Net, as_numpy
from tensorboard.backend.event_processing import event_accumulator
from torch import nn

import trainprobe.pytorch as smd
from torchrun import torchrun
from trainprobe.analysis.exceptions import TensorUnavailableForStep
from trainprobe.config.errors import ConfigError
from trainprobe.trials import create_trial

TRAIN, EVAL = smd.modes.TRAIN, smd.modes.EVAL
KEEP_ALL = {event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0}
LOSS = "CrossEntropyLoss_output_0"
WEIGHT, GRADIENT = "Net_fc1.weight", "gradient/Net_fc1.weight"
L2_WEIGHT = "smdebug/reductions/l2/Net_fc1.weight"
MAX_GRADIENT = "smdebug/reductions/max/gradient/Net_fc1.weight"
# TRAIN mode steps 0-3, EVAL 0-1, TRAIN 4-5: with save_interval=2 the saved global steps are
# 0, 2 and 6 (TRAIN) and 4 (EVAL).
PHASES = [(TRAIN, 4), (EVAL, 2), (TRAIN, 2)]
SAVED = {TRAIN: [0, 2, 6], EVAL: [4]}


@pytest.fixture(autouse=True)
def _no_sagemaker_tensorboard_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Point the variable at a file that does not exist, so no TensorBoardOutputConfig applies.
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(tmp_path / "no-tensorboard.json"))


class Seen:
    """What the training saw at each global step."""

    def __init__(self) -> None:
        self.weights: dict[int, np.ndarray] = {}
        self.gradients: dict[int, np.ndarray] = {}
        self.losses: dict[int, float] = {}
        self.rates: dict[int, float] = {}
        self.accuracies: dict[int, float] = {}


def train(hook: smd.Hook, model: Net) -> Seen:
    """Run PHASES; each step saves a learning rate (a number) and an accuracy (a tensor)."""
    generator = torch.Generator().manual_seed(0)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = Seen()
    step = 0
    for mode, count in PHASES:
        hook.set_mode(mode)
        for _ in range(count):
            inputs = torch.randn(4, 6, generator=generator)
            labels = torch.randint(0, 3, (4,), generator=generator)
            seen.weights[step] = as_numpy(model.fc1.weight)
            optimizer.zero_grad()
            with torch.set_grad_enabled(mode == TRAIN):
                outputs = model(inputs)
                loss = loss_fn(outputs, labels)
            if mode == TRAIN:
                loss.backward()
                assert model.fc1.weight.grad is not None
                seen.gradients[step] = as_numpy(model.fc1.weight.grad)
                optimizer.step()
            seen.losses[step] = float(loss.detach())
            accuracy = (outputs.argmax(dim=1) == labels).float().mean()
            seen.accuracies[step] = float(accuracy)
            seen.rates[step] = 0.1 / (step + 1)
            hook.save_scalar("learning_rate", seen.rates[step])
            hook.save_scalar("accuracy", accuracy.detach())
            step += 1
    return seen


def hooked(out: Path, **options: object) -> tuple[smd.Hook, Net]:
    torch.manual_seed(0)
    model = Net()
    reductions = smd.ReductionConfig(reductions=["max"], norms=["l2"], save_raw_tensor=False)
    hook = smd.Hook(
        out,
        save_config=smd.SaveConfig(save_interval=2),
        reduction_config=reductions,
        include_collections=["weights", "gradients", "losses"],
        **options,  # type: ignore[arg-type]
    )
    hook.register_module(model)
    return hook, model


def read_run(directory: Path) -> event_accumulator.EventAccumulator:
    accumulator = event_accumulator.EventAccumulator(str(directory), size_guidance=KEEP_ALL)
    accumulator.Reload()
    return accumulator


def scalars(run: event_accumulator.EventAccumulator, tag: str) -> dict[int, float]:
    return {event.step: event.value for event in run.Scalars(tag)}


def files_in(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def test_a_training_shows_losses_reductions_scalars_and_histograms_per_mode(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    hook, model = hooked(out, export_tensorboard=True)
    seen = train(hook, model)
    hook.close()
    trial = create_trial(str(out))
    runs = {mode: read_run(out / "tensorboard" / mode.name) for mode in (TRAIN, EVAL)}

    assert sorted(path.name for path in (out / "tensorboard").iterdir()) == ["EVAL", "TRAIN"]
    train_tags, eval_tags = runs[TRAIN].Tags(), runs[EVAL].Tags()
    parameters = ["Net_fc1.weight", "Net_fc1.bias", "Net_fc2.weight", "Net_fc2.bias"]
    gradients = {f"gradients/gradient/{name}" for name in parameters}
    assert (
        set(train_tags["histograms"]) == {f"weights/{WEIGHT}", "weights/Net_fc2.weight"} | gradients
    )
    assert set(eval_tags["histograms"]) == {f"weights/{WEIGHT}", "weights/Net_fc2.weight"}
    for tags in (train_tags, eval_tags):
        assert {LOSS, L2_WEIGHT, "scalar/learning_rate", "scalar/accuracy"} <= set(tags["scalars"])
    assert MAX_GRADIENT in train_tags["scalars"] and MAX_GRADIENT not in eval_tags["scalars"]

    # save_scalar values go into the step they were saved in when it is saved, else (as in
    # smdebug) into the next saved step, the last one at close(): the latest value wins.
    with_scalars = {TRAIN: [0, 2, 6, 7], EVAL: [4]}
    for mode, run in runs.items():
        # Losses and reductions at save steps, in the mode's own run, by global step.
        loss = scalars(run, LOSS)
        assert sorted(loss) == SAVED[mode]
        for step, value in loss.items():
            assert value == pytest.approx(seen.losses[step], rel=1e-6)
        l2 = scalars(run, L2_WEIGHT)
        assert sorted(l2) == SAVED[mode]
        for step, value in l2.items():
            assert value == pytest.approx(np.linalg.norm(seen.weights[step]), rel=1e-5)
            saved = trial.tensor(WEIGHT).reduction_value(step, "l2")
            assert value == pytest.approx(float(saved), rel=1e-6)
        # save_scalar values, numbers and tensors alike.
        rates, accuracies = scalars(run, "scalar/learning_rate"), scalars(run, "scalar/accuracy")
        assert sorted(rates) == sorted(accuracies) == with_scalars[mode]
        for step in with_scalars[mode]:
            assert rates[step] == pytest.approx(seen.rates[step], rel=1e-6)
            assert accuracies[step] == pytest.approx(seen.accuracies[step])

    for step, value in scalars(runs[TRAIN], MAX_GRADIENT).items():
        assert value == pytest.approx(float(seen.gradients[step].max()), rel=1e-6)
    # Histograms come from the raw values, which the step files do not hold (reductions only).
    with pytest.raises(TensorUnavailableForStep):
        trial.tensor(WEIGHT).value(0)
    expected = {
        (TRAIN, f"weights/{WEIGHT}"): (SAVED[TRAIN], seen.weights),
        (EVAL, f"weights/{WEIGHT}"): (SAVED[EVAL], seen.weights),
        (TRAIN, f"gradients/{GRADIENT}"): (SAVED[TRAIN], seen.gradients),
    }
    for (mode, tag), (steps, values) in expected.items():
        events = runs[mode].Histograms(tag)
        assert [event.step for event in events] == steps
        for event in events:
            value = values[event.step].astype(np.float64)
            histogram = event.histogram_value
            assert (histogram.min, histogram.max) == (value.min(), value.max())
            assert histogram.num == value.size == sum(histogram.bucket)
            assert histogram.sum == pytest.approx(value.sum(), rel=1e-9, abs=1e-12)
            assert histogram.sum_squares == pytest.approx(np.sum(value * value), rel=1e-9)

    # The hook's byte count covers the TensorBoard files too.
    assert hook.overhead.bytes_written == sum(path.stat().st_size for path in files_in(out))


def test_without_export_no_tensorboard_directory_appears(tmp_path: Path) -> None:
    hook, model = hooked(tmp_path)
    train(hook, model)
    hook.close()
    assert not (tmp_path / "tensorboard").exists()
    assert create_trial(str(tmp_path)).steps() == [0, 2, 4, 6, 7]  # 7: scalars at close()
    assert not any(path.name.startswith("events.out.tfevents") for path in files_in(tmp_path))


def test_a_tensorboard_dir_alone_turns_the_export_on(tmp_path: Path) -> None:
    hook, model = hooked(tmp_path / "out", tensorboard_dir=str(tmp_path / "board"))
    seen = train(hook, model)
    hook.close()
    assert hook.export_tensorboard
    assert not (tmp_path / "out" / "tensorboard").exists()
    losses = scalars(read_run(tmp_path / "board" / "EVAL"), LOSS)
    assert losses == {4: pytest.approx(seen.losses[4], rel=1e-6)}


def test_a_failing_export_is_logged_once_and_tensors_are_still_saved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    hook, model = hooked(tmp_path / "out", tensorboard_dir=str(blocker / "board"))
    with caplog.at_level(logging.ERROR, logger="trainprobe"):
        seen = train(hook, model)
        hook.close()
    errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert len(errors) == 1 and "TensorBoard export" in errors[0]
    trial = create_trial(str(tmp_path / "out"))
    assert trial.steps() == [0, 2, 4, 6, 7]
    loss = trial.tensor(LOSS).value(6)
    assert float(loss) == pytest.approx(seen.losses[6])
    assert (tmp_path / "out" / "training_job_end.ts").exists()


def write_json(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document))
    return path


def run_from_config_file(config: Path) -> Path:
    hook = smd.Hook.create_from_json_file(str(config))
    torch.manual_seed(0)
    model = Net()
    hook.register_module(model)
    train(hook, model)
    hook.close()
    return Path(hook.out_dir)


def test_create_from_json_file_with_export_tensorboard(tmp_path: Path) -> None:
    config = write_json(
        tmp_path / "debughookconfig.json",
        {
            "LocalPath": str(tmp_path / "tensors"),
            "HookParameters": {"save_interval": "2", "export_tensorboard": "true"},
        },
    )
    out = run_from_config_file(config)
    run = read_run(out / "tensorboard" / "TRAIN")
    assert sorted(scalars(run, LOSS)) == SAVED[TRAIN]
    assert "scalar/learning_rate" in run.Tags()["scalars"]


def test_sagemakers_tensorboard_output_file_turns_the_export_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_json(
        tmp_path / "debughookconfig.json",
        {"LocalPath": str(tmp_path / "tensors"), "HookParameters": {"save_interval": "2"}},
    )
    board = tmp_path / "tensorboard-output"
    tensorboard_config = write_json(
        tmp_path / "tensorboardoutputconfig.json", {"LocalPath": str(board)}
    )
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(tensorboard_config))
    out = run_from_config_file(config)
    assert not (out / "tensorboard").exists()
    assert sorted(scalars(read_run(board / "TRAIN"), LOSS)) == SAVED[TRAIN]


def test_a_broken_tensorboard_output_file_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = write_json(tmp_path / "debughookconfig.json", {"LocalPath": str(tmp_path / "t")})
    broken = write_json(tmp_path / "tensorboardoutputconfig.json", {"LocalPath": 7})
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(broken))
    # The training goes on: the error is logged once and the hook saves nothing ...
    hook = smd.Hook.create_from_json_file(str(config))
    hook.close()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "LocalPath" in logged and str(broken) in logged
    assert not (tmp_path / "t").exists()
    # ... unless the user asked for errors to stop it.
    monkeypatch.setenv("TRAINPROBE_STRICT", "1")
    with pytest.raises(ConfigError) as raised:
        smd.Hook.create_from_json_file(str(config))
    assert "LocalPath" in str(raised.value) and str(broken) in str(raised.value)


DDP_SCRIPT = """
import datetime, sys
import torch
import torch.distributed as dist
from torch import nn
import trainprobe.pytorch as smd

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(6, 3))
hook = smd.Hook(sys.argv[1], save_config=smd.SaveConfig(save_interval=1),
                include_workers="all", export_tensorboard=True)
hook.register_module(model)
hook.set_mode(smd.modes.TRAIN)
for _ in range(2):
    model(torch.randn(5, 6)).sum().backward()
    hook.save_scalar("rank", float(rank))
hook.close()
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_only_rank_0_exports(tmp_path: Path) -> None:
    script = tmp_path / "ddp_export.py"
    script.write_text(DDP_SCRIPT)
    out = tmp_path / "out"
    torchrun(script, str(out))
    # Both ranks wrote their step files; TensorBoard holds rank 0's values only.
    assert create_trial(str(out)).workers() == ["worker_0", "worker_1"]
    event_files = files_in(out / "tensorboard")
    assert len(event_files) == 1 and event_files[0].parent.name == "TRAIN"
    assert scalars(read_run(out / "tensorboard" / "TRAIN"), "scalar/rank") == {0: 0.0, 1: 0.0}

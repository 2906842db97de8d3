"""The PyTorch hook in real trainings: names, steps and modes, values, configs, special modules.

Saved output is read back with trainprobe's trial (and, in test_pytorch_hook_smdebug.py, with
smdebug's). Expected names and step numbers follow reference/smdebug.md §1.2; expected values
are what the training loop itself saw at each step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hook_training import Net, run
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.trials import create_trial

TRAIN, EVAL = smd.modes.TRAIN, smd.modes.EVAL
EVERY_STEP = smd.SaveConfig(save_interval=1)
PARAMETERS = ["Net_fc1.weight", "Net_fc1.bias", "Net_fc2.weight", "Net_fc2.bias"]


RECORDED = ["trainprobe/gradient_norm", "trainprobe/learning_rate", "trainprobe/loss"]
"""The hook's record of every TRAIN step, which a trial lists when asked for."""


def hooked(out: Path, width: int = 8, **options: object) -> tuple[smd.Hook, Net]:
    torch.manual_seed(0)
    model = Net(width)
    hook = smd.Hook(out, **options)  # type: ignore[arg-type]
    hook.register_module(model)
    return hook, model


def test_names_follow_smdebug(tmp_path: Path) -> None:
    hook, model = hooked(tmp_path, save_config=EVERY_STEP, save_all=True)
    run(hook, model, [(TRAIN, 1)])
    hook.close()
    expected = [
        *PARAMETERS,
        *(f"gradient/{name}" for name in PARAMETERS),
        "fc1_input_0",
        "fc1_output_0",
        "relu_input_0",
        "relu_output_0",
        "fc2_input_0",
        "fc2_output_0",
        "Net_input_0",
        "Net_output_0",
        "CrossEntropyLoss_input_0",
        "CrossEntropyLoss_input_1",
        "CrossEntropyLoss_output_0",
    ]
    assert create_trial(str(tmp_path)).tensor_names() == sorted(expected)


def test_steps_and_mode_steps_across_train_and_eval(tmp_path: Path) -> None:
    hook, model = hooked(
        tmp_path, save_config=EVERY_STEP, include_collections=["weights", "gradients"]
    )
    run(hook, model, [(TRAIN, 3), (EVAL, 2), (TRAIN, 2)])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == list(range(7))
    assert [trial.mode_modestep(step) for step in range(7)] == [
        (TRAIN, 0),
        (TRAIN, 1),
        (TRAIN, 2),
        (EVAL, 0),
        (EVAL, 1),
        (TRAIN, 3),
        (TRAIN, 4),
    ]
    assert trial.steps(mode=EVAL) == [0, 1]
    # gradients only in TRAIN; weights and losses in every mode
    assert trial.tensor("gradient/Net_fc1.weight").steps() == [0, 1, 2, 5, 6]
    assert trial.tensor("Net_fc1.weight").steps() == list(range(7))
    assert trial.tensor("CrossEntropyLoss_output_0").steps(mode=EVAL) == [0, 1]
    assert hook.step == 6 and hook.mode_steps[TRAIN] == 4 and hook.mode_steps[EVAL] == 1


@pytest.mark.parametrize("width", [8, 4096])
def test_saved_values_are_what_the_step_saw(tmp_path: Path, width: int) -> None:
    # width 4096 makes fc1.weight 96 KiB: its host buffers are reused from step to step
    hook, model = hooked(
        tmp_path,
        width,
        save_config=smd.SaveConfig(save_interval=2),
        include_collections=["weights", "biases", "gradients", "losses"],
    )
    seen = run(hook, model, [(TRAIN, 7)])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 2, 4, 6]
    for step in (0, 2, 4, 6):
        for name in ("fc1.weight", "fc2.bias"):
            # parameters are taken as the step begins, before the optimizer updates them
            saved = trial.tensor(f"Net_{name}").value(step)
            np.testing.assert_array_equal(saved, seen.weights[step][name])
            gradient = trial.tensor(f"gradient/Net_{name}").value(step)
            np.testing.assert_allclose(gradient, seen.gradients[step][name], rtol=1e-6)
        loss = trial.tensor("CrossEntropyLoss_output_0").value(step)
        assert loss.shape == () and float(loss) == pytest.approx(seen.losses[step])


def test_save_config_per_mode_and_per_collection(tmp_path: Path) -> None:
    save_config = smd.SaveConfig(
        mode_save_configs={
            TRAIN: smd.SaveConfigMode(save_interval=3, save_steps=[1]),
            EVAL: smd.SaveConfigMode(save_interval=1, start_step=1),
        }
    )
    hook, model = hooked(
        tmp_path, save_config=save_config, include_collections=["weights", "gradients"]
    )
    hook.get_collection("gradients").save_config = {TRAIN: smd.SaveConfigMode(save_interval=2)}
    run(hook, model, [(TRAIN, 7), (EVAL, 3)])
    hook.close()
    trial = create_trial(str(tmp_path))
    # weights: TRAIN mode steps 0, 1, 3, 6 (interval 3 plus step 1), EVAL mode steps 1, 2
    assert trial.tensor("Net_fc1.weight").steps(mode=TRAIN) == [0, 1, 3, 6]
    assert trial.tensor("Net_fc1.weight").steps(mode=EVAL) == [1, 2]
    # gradients: their own TRAIN schedule, no gradients in EVAL
    assert trial.tensor("gradient/Net_fc1.weight").steps(mode=TRAIN) == [0, 2, 4, 6]
    saved = trial.collection("gradients").save_config
    assert saved["TRAIN"]["save_interval"] == 2
    assert saved["EVAL"] == {
        "save_interval": 1,
        "save_steps": [],
        "start_step": 1,
        "end_step": None,
    }


def test_the_default_hook_saves_losses_every_500_steps(tmp_path: Path) -> None:
    hook, model = hooked(tmp_path)
    run(hook, model, [(TRAIN, 3)])
    hook.close()
    trial = create_trial(str(tmp_path))
    # The saved loss; the hook's record of every TRAIN step is listed only when asked for.
    assert trial.tensor_names() == ["CrossEntropyLoss_output_0"]
    assert trial.tensor_names(regex="^trainprobe/") == RECORDED
    assert trial.steps() == [0]
    assert trial.tensor("trainprobe/loss").steps() == [0, 1, 2]
    assert (tmp_path / "training_job_end.ts").exists()
    assert hook.overhead.steps == 3
    written = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert hook.overhead.bytes_written == written


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_tensors(tmp_path: Path, dtype: torch.dtype) -> None:
    hook, model = hooked(
        tmp_path,
        save_config=EVERY_STEP,
        include_collections=["weights", "gradients"],
        reduction_config=smd.ReductionConfig(reductions=["max"], save_raw_tensor=True),
    )
    model.to(dtype)
    seen = run(hook, model, [(TRAIN, 2)], dtype=dtype)
    hook.close()
    trial = create_trial(str(tmp_path))
    weight = trial.tensor("Net_fc1.weight")
    value = weight.value(1)
    if dtype == torch.bfloat16:
        # numpy has no bfloat16: widened to float32 (exactly), the original dtype kept beside it
        assert value.dtype == np.float32
        assert weight.original_dtype(1) == "bfloat16"
    else:
        assert value.dtype == np.float16
        assert weight.original_dtype(1) == "float16"
    np.testing.assert_array_equal(value.astype(np.float32), seen.weights[1]["fc1.weight"])
    assert float(weight.reduction_value(1, "max")) == seen.weights[1]["fc1.weight"].max()
    gradient = trial.tensor("gradient/Net_fc2.weight").value(0)
    np.testing.assert_array_equal(gradient.astype(np.float32), seen.gradients[0]["fc2.weight"])


def test_frozen_parameters_have_no_gradient_hook(tmp_path: Path) -> None:
    torch.manual_seed(0)
    frozen = Net()
    frozen.fc1.requires_grad_(False)
    hook = smd.Hook(tmp_path, save_config=EVERY_STEP, include_collections=["weights", "gradients"])
    hook.register_module(frozen)
    run(hook, frozen, [(TRAIN, 2)])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert "Net_fc1.weight" in trial.tensor_names()
    gradients = trial.tensor_names(regex="^gradient/")
    assert gradients == ["gradient/Net_fc2.bias", "gradient/Net_fc2.weight"]


class Twice(nn.Module):
    """Uses one layer twice in a forward."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.shared(torch.relu(self.shared(x))))


def test_a_module_called_twice_counts_its_outputs_on(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Twice()
    hook = smd.Hook(tmp_path, save_config=EVERY_STEP, include_regex=["shared_output"])
    hook.register_module(model)
    inputs = torch.randn(2, 6)
    for _ in range(2):
        model(inputs).sum().backward()
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.tensor_names() == ["shared_output_0", "shared_output_1"]
    first = model.shared(inputs)
    second = model.shared(torch.relu(first))
    np.testing.assert_allclose(trial.tensor("shared_output_0").value(1), first.detach().numpy())
    np.testing.assert_allclose(trial.tensor("shared_output_1").value(1), second.detach().numpy())
    assert trial.collection("default").tensor_names == {"shared_output_0", "shared_output_1"}


def test_a_functional_loss_is_recorded_into_losses(tmp_path: Path) -> None:
    hook, model = hooked(tmp_path, save_config=EVERY_STEP)
    generator = torch.Generator().manual_seed(0)
    values = []
    for _ in range(2):
        inputs = torch.randn(4, 6, generator=generator)
        loss = F.cross_entropy(model(inputs), torch.tensor([0, 1, 2, 0]))
        hook.record_tensor_value("nll_loss", loss)
        loss.backward()
        values.append(float(loss.detach()))
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.tensor_names(collection="losses") == ["nll_loss_output_0"]
    saved = trial.tensor("nll_loss_output_0").values()
    assert [float(saved[s]) for s in (0, 1)] == pytest.approx(values)


def test_scalars_go_into_saved_steps_as_in_smdebug(tmp_path: Path) -> None:
    hook, model = hooked(tmp_path, save_config=smd.SaveConfig(save_interval=2))
    hook.save_scalar("before", 1.5)
    generator = torch.Generator().manual_seed(0)
    hook.set_mode(TRAIN)
    for step in range(4):
        model(torch.randn(2, 6, generator=generator))
        if step % 2:
            hook.save_scalar("lr", torch.tensor(0.1 * step), timestamp=1700000000.0 + step)
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.tensor("scalar/before").steps() == [0]
    # Step 1 is not saved: its value goes into step 2; step 3's into the last step, at close().
    assert trial.tensor("scalar/lr").steps() == [2, 3]
    assert float(trial.tensor("scalar/lr").value(2)) == pytest.approx(0.1)
    assert float(trial.tensor("scalar/lr").value(3)) == pytest.approx(0.3)
    assert trial.steps() == [0, 2, 3]
    assert trial.mode_modestep(3) == (TRAIN, 3)


def test_save_tensor_adds_to_a_collection_and_saves_when_due(tmp_path: Path) -> None:
    hook, model = hooked(tmp_path, save_config=smd.SaveConfig(save_interval=2))
    generator = torch.Generator().manual_seed(0)
    for step in range(3):
        model(torch.randn(2, 6, generator=generator))
        hook.save_tensor("my_mask", np.full((2, 2), step), "masks")
    hook.close()
    trial = create_trial(str(tmp_path))
    mask = trial.tensor("my_mask")
    assert mask.steps() == [0, 2]
    assert mask.value(2).tolist() == [[2, 2], [2, 2]]
    assert trial.collection("masks").tensor_names == {"my_mask"}


def test_module_tensors_added_by_module(tmp_path: Path) -> None:
    hook, model = hooked(tmp_path, save_config=EVERY_STEP, include_collections=["fc2_io"])
    hook.get_collection("fc2_io").add_module_tensors(model.fc2, inputs=True, outputs=True)
    run(hook, model, [(TRAIN, 1)])
    hook.close()
    assert create_trial(str(tmp_path)).tensor_names(collection="fc2_io") == [
        "fc2_input_0",
        "fc2_output_0",
    ]

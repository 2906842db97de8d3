"""The non-finite guard on real trainings: the step and the layer where the first NaN started.

The model divides by a number that reaches zero at a known step, in a known layer; the hook
saves only every 100 steps, so the step in question is saved because the guard saw it. The step
reaches the model as data (a buffer the training loop sets before each forward), as a batch
would: the guard locates an origin by running the failing step's forward again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import trainprobe.pytorch as smd
from reference_envs import run_reference
from trainprobe.capture.pytorch import host_copy
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.storage.rule_output import read_status
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

BAD_STEP = 4


class Stepped(nn.Module):
    """A module that knows the training's step: its ``step`` buffer, set by the training loop
    before each forward."""

    step: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("step", torch.zeros(()))
        self.healthy = False

    @property
    def now(self) -> int:
        return int(self.step) - (1000 if self.healthy else 0)


class Countdown(Stepped):
    """Divides its input by (BAD_STEP - the step): infinite at step BAD_STEP (never, with
    ``healthy``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / float(BAD_STEP - self.now)


def model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), Countdown(), nn.Linear(8, 3))


def train(
    out: Path,
    net: nn.Module,
    steps: int,
    *,
    after_step: threading.Event | None = None,
    after_update: Callable[[int], None] = lambda step: None,
    closure: bool = False,
    device: str = "cpu",
) -> None:
    """SGD on random data on ``device``, saving every 100 steps; after step BAD_STEP + 1, wait
    for ``after_step`` when given (a rule following the job live must set it). ``after_update``
    is called with each step after the optimizer's update; with ``closure`` the forward and
    backward run in a closure given to the optimizer's step."""
    net.to(device)
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=100))
    hook.register_module(net)
    loss_fn = nn.MSELoss()
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(1)
    for step in range(steps):
        for module in net.modules():
            if isinstance(module, Stepped):
                module.step.fill_(step)
        inputs = torch.randn(16, 6, generator=generator).to(device)
        target = torch.zeros(16, 3, device=device)

        def forward_and_backward() -> torch.Tensor:
            optimizer.zero_grad()
            loss = loss_fn(net(inputs), target)  # noqa: B023
            loss.backward()
            return loss

        if closure:  # the forward and backward run inside the optimizer's step (Lightning)
            optimizer.step(forward_and_backward)
        else:
            forward_and_backward()
            optimizer.step()
        after_update(step)
        if after_step is not None and step == BAD_STEP + 1:
            assert after_step.wait(timeout=60), "the rule did not report the NaN while training"
    hook.close()


@pytest.mark.parametrize("closure", [False, True], ids=["plain", "optimizer closure"])
def test_the_first_nan_is_traced_to_its_layer_and_step(tmp_path: Path, closure: bool) -> None:
    train(tmp_path, model(), BAD_STEP + 3, closure=closure)
    trial = create_trial(str(tmp_path))
    origin = trial.nonfinite_origin()
    assert origin is not None
    assert (origin.step, origin.module, origin.kind) == (BAD_STEP, "3", "output")
    assert origin.inputs_finite is True
    assert origin.loss_step == BAD_STEP
    assert origin.describe() == (
        f"step {BAD_STEP}: first infinity in the output of `3` (its inputs were finite); "
        "the loss became NaN at the same step"
    )
    # The step was saved in full although the save interval is 100: the layer's inputs and
    # outputs, the later layers, the loss, the gradients and the weights.
    assert trial.steps() == [0, BAD_STEP]
    saved = trial.tensor_names(step=BAD_STEP)
    assert {"3_input_0", "3_output_0", "4_output_0", "MSELoss_output_0"} <= set(saved)
    assert "gradient/Sequential_4.weight" in saved and "Sequential_2.weight" in saved
    assert np.isfinite(trial.tensor("3_input_0").value(BAD_STEP)).all()
    assert not np.isfinite(trial.tensor("3_output_0").value(BAD_STEP)).all()
    assert trial.module_type("3") == f"{Countdown.__module__}.Countdown"


class FunctionalDivision(Stepped):
    """A linear layer, then a division written in the forward (no module), then a Tanh."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 8)
        self.act = nn.Tanh()
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.linear(x)
        hidden = hidden / float(BAD_STEP - self.now) * 0.0  # 0 * inf: NaN
        return self.head(self.act(hidden))


@pytest.mark.parametrize(
    ("net", "module", "inputs_finite"),
    [
        # ReLU and Tanh, element-wise, are checked through their inputs; the origin is still
        # the division between them.
        (
            lambda: nn.Sequential(
                nn.Linear(6, 8), nn.Tanh(), nn.ReLU(), Countdown(), nn.ReLU(), nn.Linear(8, 3)
            ),
            "3",
            True,
        ),
        # A NaN made outside any module reaches an activation: the activation is the first
        # module that shows it, and its input was not finite.
        (FunctionalDivision, "act", False),
    ],
    ids=["division between activations", "division outside any module"],
)
def test_the_origin_is_the_first_module_whose_output_went_non_finite(
    tmp_path: Path, net: Callable[[], nn.Module], module: str, inputs_finite: bool
) -> None:
    torch.manual_seed(0)
    train(tmp_path, net(), BAD_STEP + 3)
    origin = create_trial(str(tmp_path)).nonfinite_origin()
    assert origin is not None
    assert (origin.step, origin.module, origin.kind) == (BAD_STEP, module, "output")
    assert origin.inputs_finite is inputs_finite
    assert origin.loss_step == BAD_STEP


class BackwardCountdown(Stepped):
    """The identity forward; its backward turns the gradient to NaN at step BAD_STEP (never,
    with ``healthy``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bad = self.now == BAD_STEP
        return _NanGradient.apply(x) if bad else x


class _NanGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        return grad * float("nan")


def backward_model(bias: bool = True) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8, bias=bias), BackwardCountdown(), nn.Linear(8, 3)
    )


@pytest.mark.parametrize(
    ("bias", "parameter"),
    [
        # A layer's bias gradient sums its output's gradient: it stands for its weight's.
        (True, "Sequential_2.bias"),
        # Without a bias, the weight's gradient is checked itself.
        (False, "Sequential_2.weight"),
    ],
    ids=["with a bias", "without a bias"],
)
def test_a_nan_made_in_the_backward_pass_is_traced_to_its_gradient(
    tmp_path: Path, bias: bool, parameter: str
) -> None:
    train(tmp_path, backward_model(bias), BAD_STEP + 3)
    trial = create_trial(str(tmp_path))
    origin = trial.nonfinite_origin()
    assert origin is not None
    assert (origin.step, origin.kind, origin.module) == (BAD_STEP, "gradient", parameter)
    # The forward pass of the step was finite; the update spread the NaN into the weights, so
    # the loss went NaN a step later.
    assert origin.describe() == (
        f"step {BAD_STEP}: first NaN in the gradient of `{parameter}` (the forward pass was "
        f"finite); the loss became NaN at step {BAD_STEP + 1}"
    )
    assert trial.steps() == [0, BAD_STEP]
    assert "gradient/Sequential_2.weight" in trial.tensor_names(step=BAD_STEP)
    assert not np.isfinite(trial.tensor("gradient/Sequential_2.weight").value(BAD_STEP)).all()


def parameter_broken_by_an_update() -> tuple[nn.Module, Callable[[int], None]]:
    net = backward_model()
    backward = net[3]
    assert isinstance(backward, BackwardCountdown)
    backward.healthy = True  # its backward stays finite
    linear = net[2]
    assert isinstance(linear, nn.Linear)

    def overflow(step: int) -> None:
        if step == BAD_STEP:
            with torch.no_grad():
                linear.weight[0, 0] = float("inf")

    return net, overflow


def test_a_parameter_made_infinite_by_an_update_is_named(tmp_path: Path) -> None:
    net, overflow = parameter_broken_by_an_update()
    train(tmp_path, net, BAD_STEP + 3, after_update=overflow)
    origin = create_trial(str(tmp_path)).nonfinite_origin()
    assert origin is not None
    assert (origin.step, origin.kind, origin.module) == (
        BAD_STEP + 1,
        "parameter",
        "Sequential_2.weight",
    )
    assert origin.describe().startswith(
        f"step {BAD_STEP + 1}: first infinity in the parameter `Sequential_2.weight`, before "
        "the step's forward (the previous update made it so: its gradient or the optimizer)"
    )


class RandomBreak(nn.Module):
    """Divides its input by zero when a draw of torch's random generator is above 0.9 (nothing
    else draws from it in the training): the failing step is one the random numbers chose, and a
    replay finds this module only by drawing them again as the step drew them."""

    def __init__(self) -> None:
        super().__init__()
        self.draws: list[float] = []  # the training's, not a replay's (which runs without grad)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        draw = torch.rand(())
        if torch.is_grad_enabled():
            self.draws.append(float(draw))
        return x / (draw <= 0.9).to(x.dtype)


def test_a_nan_that_random_numbers_made_is_traced_by_drawing_them_again(tmp_path: Path) -> None:
    torch.manual_seed(0)
    breaker = RandomBreak()
    net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), breaker, nn.Linear(8, 3))
    train(tmp_path, net, 40)
    bad_step = next(step for step, draw in enumerate(breaker.draws) if draw > 0.9)
    origin = create_trial(str(tmp_path)).nonfinite_origin()
    assert origin is not None
    assert (origin.step, origin.module, origin.kind) == (bad_step, "2", "output")
    assert origin.inputs_finite is True


def test_a_healthy_twin_records_nothing(tmp_path: Path) -> None:
    net = model()
    countdown = net[3]
    assert isinstance(countdown, Countdown)
    countdown.healthy = True  # never reaches zero
    train(tmp_path, net, BAD_STEP + 3)
    trial = create_trial(str(tmp_path))
    assert trial.nonfinite_origin() is None
    assert trial.steps() == [0]


def test_a_nan_in_a_gpt2_backward_is_traced_to_the_gradient_of_a_conv1d_bias(
    tmp_path: Path,
) -> None:
    # Hugging Face's Conv1D is checked through its bias gradient alone, as a Linear is.
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    hook = smd.Hook(str(tmp_path), save_config=smd.SaveConfig(save_interval=100))
    hook.register_module(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = {"now": 0}

    def nan_gradient(module: nn.Module, grad_output: Any) -> Any:
        if step["now"] == BAD_STEP:  # the gradient reaching the layer's output turns NaN
            return (grad_output[0] * float("nan"),)
        return None

    model.transformer.h[1].mlp.c_proj.register_full_backward_pre_hook(nan_gradient)
    tokens = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    for now in range(BAD_STEP + 2):
        step["now"] = now
        optimizer.zero_grad()
        model(input_ids=tokens, labels=tokens).loss.backward()
        optimizer.step()
    hook.close()
    origin = create_trial(str(tmp_path)).nonfinite_origin()
    assert origin is not None
    assert (origin.step, origin.kind) == (BAD_STEP, "gradient")
    assert origin.module == "GPT2LMHeadModel_transformer.h.1.mlp.c_proj.bias"


@pytest.mark.parametrize(
    "scale",
    [1e19, 1e37 / 8],
    ids=["gradients whose squares overflow float32", "gradients whose sum overflows too"],
)
def test_finite_gradients_too_large_for_a_quick_check_are_not_taken_for_infinities(
    tmp_path: Path, scale: float
) -> None:
    torch.manual_seed(0)
    net = nn.Linear(64, 64)
    hook = smd.Hook(str(tmp_path), save_config=smd.SaveConfig(save_interval=100))
    hook.register_module(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.0)
    inputs = torch.rand(8, 64) + 1.0
    for _ in range(3):
        optimizer.zero_grad()
        loss = (net(inputs) * scale).sum()  # each bias gradient is 8 * scale
        loss.backward()
        weight, bias = net.weight.grad, net.bias.grad
        assert weight is not None and bias is not None
        assert all(bool(torch.isfinite(t).all()) for t in (loss, weight, bias))
        assert not bool(torch.isfinite(torch.linalg.vector_norm(weight)))
        summed = torch.cat([loss.view(1), bias]).sum()
        assert bool(torch.isfinite(summed)) == (scale < 1e30)
        optimizer.step()
    hook.close()
    assert create_trial(str(tmp_path)).nonfinite_origin() is None


def test_exploding_tensor_reports_the_origin_live(tmp_path: Path) -> None:
    reported = threading.Event()
    output = tmp_path / "rule-output"
    definition = RuleDefinition.for_builtin("ExplodingTensor", {})

    def on_evaluation(name: str, evaluation: object) -> None:
        if getattr(evaluation, "result", None) == "IssuesFound":
            reported.set()

    runner = RuleRunner(
        definition,
        str(tmp_path / "debug-output"),
        output_dir=str(output),
        poll_interval=0.05,
        no_data_timeout=60,
        on_evaluation=on_evaluation,
    )
    results: list[object] = []
    follower = threading.Thread(target=lambda: results.append(runner.run()[0]))
    follower.start()
    train(tmp_path / "debug-output", model(), BAD_STEP + 3, after_step=reported)
    follower.join(timeout=60)
    status = read_status(str(output / "ExplodingTensor"))
    assert status is not None and status.rule_evaluation_status == "IssuesFound"
    assert status.status_details.startswith(
        f"ExplodingTensor found an issue at step {BAD_STEP}: step {BAD_STEP}: first infinity "
        "in the output of `3` (its inputs were finite); the loss became NaN at the same step"
    )


def test_smdebug_still_reads_the_output(tmp_path: Path) -> None:
    train(tmp_path, model(), BAD_STEP + 3)
    assert (tmp_path / "module-types").is_dir() and (tmp_path / "nonfinite").is_dir()
    read = run_reference(
        "smdebug",
        f"""
        import json
        from smdebug.trials import create_trial
        trial = create_trial({str(tmp_path)!r})
        value = trial.tensor("3_input_0").value({BAD_STEP})
        print(json.dumps({{"steps": trial.steps(), "shape": list(value.shape)}}))
        """,
    )
    assert read == {"steps": [0, BAD_STEP], "shape": [16, 8]}


@pytest.mark.parametrize(
    "device",
    [
        "emulated",
        pytest.param(
            "cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
        ),
    ],
)
@pytest.mark.parametrize(
    ("scenario", "origin_step", "kind", "module", "what"),
    [
        ("forward", BAD_STEP, "output", "3", "infinity"),
        ("outside any module", BAD_STEP, "output", "act", "NaN"),
        ("backward", BAD_STEP, "gradient", "Sequential_2.bias", "NaN or infinity"),
        ("update", BAD_STEP + 1, "parameter", "Sequential_2.weight", "infinity"),
    ],
)
def test_on_a_gpu_the_origin_is_read_a_step_late_and_located_with_the_kept_parameters(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    device: str,
    scenario: str,
    origin_step: int,
    kind: str,
    module: str,
    what: str,
) -> None:
    # A device whose values the host cannot read without waiting (a real GPU, or the CPU made
    # to look like one at the CUDA boundary). The flags are read at the next update, when the
    # failing step has been updated already: the replay runs on the copy of the parameters its
    # forward used.
    if device == "emulated":
        monkeypatch.setattr(host_copy, "HOST_READS_ARE_FREE", set())
    after_update: Callable[[int], None] = lambda step: None  # noqa: E731
    if scenario == "forward":
        net: nn.Module = model()
    elif scenario == "outside any module":
        torch.manual_seed(0)
        net = FunctionalDivision()
    elif scenario == "backward":
        net = backward_model()
    else:
        net, after_update = parameter_broken_by_an_update()
    train(
        tmp_path,
        net,
        BAD_STEP + 4,
        after_update=after_update,
        device="cpu" if device == "emulated" else device,
    )
    origin = create_trial(str(tmp_path)).nonfinite_origin()
    assert origin is not None
    assert (origin.step, origin.kind, origin.module, origin.what) == (
        origin_step,
        kind,
        module,
        what,
    )
    assert origin.loss_step == (BAD_STEP + 1 if scenario == "backward" else origin_step)
    # The step after the one found is saved in full.
    assert create_trial(str(tmp_path)).steps() == [0, origin_step + 1]

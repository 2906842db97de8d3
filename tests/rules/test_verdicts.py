"""Honest verdicts on real trainings: a rule passes only what it checked, and finds activations by
what they are (``nn.Sequential`` members, modules named anything), not by their names.

Each case trains a small model with trainprobe's hook and runs the rule through the runner, as
``trainprobe rules run`` does; the healthy twin of each training must stay NoIssuesFound.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from builtin_training import Run, classes, train
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.analysis.trial import Trial
from trainprobe.rules import Rule
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.rules.verdict import Verdict
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

DATA = classes(64, 8, seed=1)


def verdict_of(trial: Trial, definition: RuleDefinition) -> Verdict:
    return RuleRunner(definition, trial.path, no_data_timeout=5).run()[0]


def builtin(trial: Trial, rule: str, **parameters: object) -> Verdict:
    return verdict_of(trial, RuleDefinition.for_builtin(rule, parameters))


def sequential(activation: nn.Module, *, bias: float = 0.0, scale: float = 1.0) -> nn.Module:
    """Linear(8, 16), the activation, Linear(16, 2); the first layer's bias and weights shifted
    and scaled (a large negative bias kills ReLUs, a large scale saturates tanh)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), activation, nn.Linear(16, 2))
    with torch.no_grad():
        first = model[0]
        assert isinstance(first, nn.Linear)
        first.weight.mul_(scale)
        first.bias.fill_(bias)
    return model


class FunctionalRelu(nn.Module):
    """A model whose ReLU is a function call, so no module ever sees it."""

    def __init__(self, bias: float = 0.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 2)
        with torch.no_grad():
            self.fc1.bias.fill_(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


def test_dead_relu_finds_the_relus_of_an_nn_sequential_by_their_type(tmp_path: Path) -> None:
    run = Run(steps=3, lr=0.0, collections=("relu_output", "losses"))
    dead = train(tmp_path / "dead", sequential(nn.ReLU(), bias=-100.0), DATA, run)
    assert dead.module_type("1_output_0") == "torch.nn.ReLU"
    verdict = builtin(dead, "DeadRelu")
    assert verdict.status == "IssuesFound"
    assert verdict.first_issue is not None
    assert verdict.first_issue.evidence[0].tensor == "1_output_0"
    healthy = train(tmp_path / "healthy", sequential(nn.ReLU()), DATA, run)
    verdict = builtin(healthy, "DeadRelu")
    assert verdict.status == "NoIssuesFound", verdict.details
    assert verdict.tensors_checked == 1
    assert "3 step(s) evaluated, 1 tensor(s) checked, 0 step(s) skipped" in verdict.details


def test_a_relu_module_named_anything_is_found(tmp_path: Path) -> None:
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = sequential(nn.ReLU(), bias=-100.0)

    model = Odd()
    model.forward = model.inner.forward  # type: ignore[method-assign]
    trial = train(tmp_path / "odd", model, DATA, Run(steps=2, collections=("relu_output",)))
    verdict = builtin(trial, "DeadRelu")
    assert verdict.status == "IssuesFound"
    assert verdict.first_issue is not None
    assert verdict.first_issue.evidence[0].tensor == "inner.1_output_0"


def test_a_functional_relu_is_seen_on_save_steps(tmp_path: Path) -> None:
    run = Run(steps=3, lr=0.0, collections=("relu_output", "losses"))
    dead = train(tmp_path / "dead", FunctionalRelu(bias=-100.0), DATA, run)
    assert dead.module_nn_type("FunctionalRelu.relu_output_0") == "torch.nn.ReLU"
    verdict = builtin(dead, "DeadRelu")
    assert verdict.status == "IssuesFound", verdict.details
    assert verdict.first_issue is not None
    assert verdict.first_issue.evidence[0].tensor == "FunctionalRelu.relu_output_0"
    healthy = train(tmp_path / "healthy", FunctionalRelu(), DATA, run)
    verdict = builtin(healthy, "DeadRelu")
    assert verdict.status == "NoIssuesFound", verdict.details
    assert verdict.tensors_checked == 1


def test_a_rule_whose_tensors_were_not_saved_says_what_to_save(tmp_path: Path) -> None:
    run = Run(steps=3, collections=("gradients", "losses"))
    trial = train(tmp_path / "run", FunctionalRelu(), DATA, run)
    verdict = builtin(trial, "DeadRelu")
    assert verdict.status == "Error"
    details = verdict.details
    assert "DeadRelu checked no tensor" in details
    assert "names matching '.*relu_output'" in details
    assert "outputs of torch.nn.ReLU, torch.nn.ReLU6 modules" in details
    assert "The job saved tensors of the collections gradients, losses;" in details
    assert "its tensors include" in details
    assert 'add CollectionConfig(name="relu_output") to the estimator' in details
    assert 'Hook(..., include_collections=["relu_output"])' in details
    assert "F.gelu" in details and "not seen" in details
    # PoorWeightInitialization checks gradients and losses, and says that its activation
    # check found nothing to compare.
    poor = builtin(trial, "PoorWeightInitialization")
    assert poor.status == "NoIssuesFound", poor.details
    assert "matched nothing: names matching '.*relu_input'" in poor.details
    assert "names matching '.*relu_input'" in poor.unmatched[0]


def test_saturated_tanh_in_a_sequential_is_told_from_a_sigmoid(tmp_path: Path) -> None:
    # Nothing of the tanh saved: the Error names the pattern that saves this model's tanh.
    unsaved = train(tmp_path / "unsaved", sequential(nn.Tanh()), DATA, Run(steps=2))
    verdict = builtin(unsaved, "SaturatedActivation")
    assert verdict.status == "Error"
    assert "inputs of torch.nn.Sigmoid, torch.nn.Tanh modules" in verdict.details
    assert 'pass Hook(..., include_regex=["^1_input_"])' in verdict.details
    # Saved as that Error says:
    run = Run(steps=3, lr=0.0, include_regex=["^1_input_"])
    saturated = train(tmp_path / "saturated", sequential(nn.Tanh(), scale=10000.0), DATA, run)
    verdict = builtin(saturated, "SaturatedActivation")
    assert verdict.status == "IssuesFound", verdict.details
    assert verdict.first_issue is not None
    assert verdict.first_issue.evidence[0].tensor == "1_input_0"
    assert "saturated" in verdict.first_issue.evidence[0].message
    healthy = train(tmp_path / "healthy", sequential(nn.Tanh()), DATA, run)
    verdict = builtin(healthy, "SaturatedActivation")
    assert verdict.status == "NoIssuesFound", verdict.details
    assert "were not saved" not in verdict.details
    # The same inputs feeding a sigmoid are inside its (wider) range: not saturated.
    sigmoid = train(tmp_path / "sigmoid", sequential(nn.Sigmoid(), scale=4.0), DATA, run)
    assert sigmoid.module_nn_type("1") == "torch.nn.Sigmoid"
    assert builtin(sigmoid, "SaturatedActivation").status == "NoIssuesFound"


class NeverSaved(Rule):
    """A custom rule that needs a tensor the job never saves."""

    def set_required_tensors(self, step: int) -> None:
        self.req_tensors.add("never_saved_output_0", steps=[step])

    def invoke_at_step(self, step: int) -> bool:
        return bool(self.base_trial.tensor("never_saved_output_0").value(step).max() > 1)


class LooksForAPattern(Rule):
    """A custom rule that loops over a pattern that matches nothing, and so checks nothing."""

    def invoke_at_step(self, step: int) -> bool:
        for name in self.base_trial.tensor_names(regex="attention_weights"):
            if self.base_trial.tensor(name).value(step).max() > 1:
                return True
        return False


class LossIsLarge(Rule):
    """The healthy twin: a custom rule that reads the loss."""

    def invoke_at_step(self, step: int) -> bool:
        return bool(self.base_trial.tensor("CrossEntropyLoss_output_0").value(step) > 100)


def test_a_custom_rule_that_checked_nothing_ends_in_error(tmp_path: Path) -> None:
    trial = train(tmp_path / "run", sequential(nn.ReLU()), DATA, Run(steps=3))
    verdict = verdict_of(trial, RuleDefinition.for_class(NeverSaved))
    assert verdict.status == "Error"
    assert "tensor 'never_saved_output_0'" in verdict.details
    assert "CrossEntropyLoss_output_0" in verdict.details
    assert "3 step(s) skipped" in verdict.details
    assert 'include_regex=["never_saved_output_0"]' in verdict.details
    verdict = verdict_of(trial, RuleDefinition.for_class(LooksForAPattern))
    assert verdict.status == "Error"
    assert "looked for names matching 'attention_weights'" in verdict.details
    assert "3 step(s) evaluated, 0 tensor(s) checked" in verdict.details
    verdict = verdict_of(trial, RuleDefinition.for_class(LossIsLarge))
    assert verdict.status == "NoIssuesFound"
    assert verdict.tensors_checked == 1


def test_the_rule_collections_select_relus_by_type(tmp_path: Path) -> None:
    trial = train(
        tmp_path / "run",
        sequential(nn.ReLU()),
        DATA,
        Run(steps=1, collections=("relu_output", "relu_input")),
    )
    assert trial.tensor_names(collection="relu_output") == ["1_output_0"]
    assert trial.tensor_names(collection="relu_input") == ["1_input_0"]


class BasicBlock(nn.Module):
    """A torchvision-style residual block: one in-place ReLU module called twice."""

    def __init__(self, shift: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(2, 2, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(2)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(2, 2, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2)
        with torch.no_grad():
            self.bn1.bias.fill_(shift)
            self.bn2.bias.fill_(shift)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + 0 * x)


class TinyResNet(nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer1 = nn.Sequential(BasicBlock(shift))
        self.fc = nn.Linear(2 * 4 * 4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layer1(x.view(-1, 2, 4, 4)).flatten(1))


def test_the_relus_of_torchvision_style_blocks_are_checked(tmp_path: Path) -> None:
    data = classes(64, 32, seed=1)
    run = Run(steps=2, lr=0.0, collections=("relu_output",))
    dead = train(tmp_path / "dead", TinyResNet(shift=-100.0), data, run)
    verdict = builtin(dead, "DeadRelu")
    assert verdict.status == "IssuesFound", verdict.details
    assert verdict.first_issue is not None
    tensors = {item.tensor for item in verdict.first_issue.evidence}
    assert tensors == {"layer1.0.relu_output_0", "layer1.0.relu_output_1"}
    healthy = train(tmp_path / "healthy", TinyResNet(shift=0.0), data, run)
    verdict = builtin(healthy, "DeadRelu")
    assert verdict.status == "NoIssuesFound", verdict.details
    assert verdict.tensors_checked == 2


def deep_sequential(std: float | None) -> nn.Module:
    """Three Linear + ReLU layers in an nn.Sequential; weights drawn with ``std`` (Kaiming's
    when None), biases zero."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU()
    )
    for layer in model:
        if isinstance(layer, nn.Linear):
            if std is None:
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            else:
                nn.init.normal_(layer.weight, std=std)
            nn.init.zeros_(layer.bias)
    return model


def test_poor_initialization_compares_the_relu_inputs_of_an_nn_sequential(tmp_path: Path) -> None:
    # Only the rule's own collection is saved: no gradients, no loss, so the activations decide.
    run = Run(steps=2, lr=0.0, collections=("relu_input",))
    tiny = train(tmp_path / "tiny", deep_sequential(std=1e-3), DATA, run)
    assert tiny.tensor_names(collection="relu_input") == ["1_input_0", "3_input_0", "5_input_0"]
    verdict = builtin(tiny, "PoorWeightInitialization")
    assert verdict.status == "IssuesFound", verdict.details
    assert verdict.first_issue is not None
    assert "activation input variances differ" in verdict.first_issue.evidence[0].message
    healthy = train(tmp_path / "healthy", deep_sequential(std=None), DATA, run)
    verdict = builtin(healthy, "PoorWeightInitialization")
    assert verdict.status == "NoIssuesFound", verdict.details
    # The three ReLU inputs, and the loss the hook saves by default.
    assert verdict.tensors_checked == 3 + len(healthy.tensor_names(collection="losses")) == 4


def test_a_collection_configured_but_never_saved_is_not_named_as_saved(tmp_path: Path) -> None:
    """A script that measures the loss but never runs backward(): the gradients collection is
    configured, and not one gradient exists. VanishingGradient's Error says so, and does not
    advise configuring what is configured already."""
    model = sequential(nn.ReLU())
    hook = smd.Hook(
        str(tmp_path / "run"),
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["gradients", "losses"],
    )
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    for inputs, targets in DATA.batches(torch.Generator().manual_seed(0))[:1] * 3:
        loss_fn(model(inputs), targets)
    hook.close()
    verdict = builtin(create_trial(str(tmp_path / "run")), "VanishingGradient")
    assert verdict.status == "Error", verdict.details
    details = verdict.details
    assert "The job saved tensors of the collections losses;" in details
    assert (
        "The collection gradients is in the job's configuration already, yet none of its tensors "
        "was saved"
    ) in details
    assert "CollectionConfig" not in details and "include_collections" not in details


@pytest.mark.parametrize(
    ("rule", "parameters", "why"),
    [
        (
            "LossNotDecreasing",
            {},
            "LossNotDecreasing judged no step (waiting for losses to compare: "
            "CrossEntropyLoss_output_0: 5 training loss(es) up to TRAIN step 4, 10 needed (each "
            "side of a comparison averages 5): run longer, or save the losses more often).",
        ),
        (
            "Overfit",
            {},
            "Overfit judged no step (Overfit compares each complete evaluation pass (with the "
            "newest passes, holding 5 EVAL losses or more) with the training losses before it (5 "
            "or more): CrossEntropyLoss_output_0: 0 complete evaluation pass(es) holding 0 EVAL "
            "loss(es), 5 training loss(es); no EVAL loss saved yet",
        ),
        (
            "Overtraining",
            {},
            "Overtraining judged no step (waiting for a loss followed long enough to judge: "
            "CrossEntropyLoss_output_0: 5 training loss(es) saved, 10 needed (the mean of 5, then "
            "patience_train 5 more); run longer",
        ),
        (
            "UnchangedTensor",
            {"collection_names": "weights", "num_steps": 6},
            "UnchangedTensor judged no step (collection weights was saved at fewer than 6 steps "
            "of a mode yet, as of TRAIN step 4",
        ),
    ],
)
def test_a_rule_never_passes_before_its_own_minimum(
    tmp_path: Path, rule: str, parameters: dict[str, object], why: str
) -> None:
    """Five training steps are too few for each of these rules at these parameters: each ends
    in Error saying why, where it used to pass; given enough, it judges."""
    trial = train(
        tmp_path / "run",
        sequential(nn.ReLU()),
        DATA,
        Run(steps=5, lr=0.05, collections=("weights", "losses")),
    )
    verdict = builtin(trial, rule, **parameters)
    assert verdict.status == "Error", verdict.details
    assert verdict.details.startswith(why), verdict.details
    assert "0 step(s) evaluated" in verdict.details
    if rule == "LossNotDecreasing":
        # Too few losses to average, as it said: a lower num_steps changes nothing, more steps do.
        verdict = builtin(trial, rule, num_steps=2)
        assert verdict.status == "Error", verdict.details
        assert "5 training loss(es) up to TRAIN step 4, 10 needed" in verdict.details
        longer = train(
            tmp_path / "longer",
            sequential(nn.ReLU()),
            DATA,
            Run(steps=12, lr=0.05, collections=("losses",)),
        )
        verdict = builtin(longer, rule, num_steps=2)
        assert verdict.status == "NoIssuesFound", verdict.details
        # TRAIN steps 0-8 wait for 10 losses; then 9 (5-9 against 0-4) and 11 compare, 10 passes.
        assert "3 step(s) evaluated, 1 tensor(s) checked, 9 step(s) skipped" in verdict.details

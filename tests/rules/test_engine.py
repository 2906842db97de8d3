"""The rule engine on finished, hand-made trials: the Rule base class, the runner's choice of
steps, every status, the rule output files, and failures that stay inside one rule.

Trials are written with the storage layer's StepWriter, as the hook writes them.
"""

from __future__ import annotations

import inspect
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from trainprobe.analysis.exceptions import TensorUnavailable
from trainprobe.rules import (
    InsufficientInformationForRuleInvocation,
    RequiredTensors,
    Rule,
    RuleEvaluationConditionMet,
)
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner, run_rule
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.rule_output import read_evaluations, read_status
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end
from trainprobe.trials import create_trial

COLLECTIONS = {
    "gradients": {"name": "gradients", "include_regex": ["^gradients/"]},
    "losses": {"name": "losses", "include_regex": ["loss"]},
}


def write_step(
    out: Path, step: int, mode: ModeKeys, mode_step: int, arrays: dict[str, np.ndarray]
) -> None:
    with StepWriter(str(out), step, "worker_0") as writer:
        for name, array in arrays.items():
            writer.add(name, array, mode=mode, mode_step=mode_step)


def gradient_run(out: Path, gradients: list[float], *, every: int = 1, end: bool = True) -> None:
    """TRAIN steps 0, every, 2*every, ... each saving one gradient filled with a value."""
    write_collections_file(str(out), "worker_0", COLLECTIONS, num_workers=1)
    for index, value in enumerate(gradients):
        step = index * every
        grad = np.full((2, 3), value, dtype=np.float32)
        write_step(out, step, ModeKeys.TRAIN, step, {"gradients/fc.weight_grad": grad})
    if end:
        write_training_end(str(out))


class SmallGradient(Rule):
    """The test's rule: fires when a gradient's mean absolute value is below ``threshold``."""

    def __init__(self, base_trial, threshold=0.5):  # type: ignore[no-untyped-def]
        super().__init__(base_trial, other_trials=None)
        self.threshold = float(threshold)
        self.steps_seen: list[int] = []

    def invoke_at_step(self, step: int) -> bool:
        self.steps_seen.append(step)
        for name in self.base_trial.tensor_names(collection="gradients"):
            value = float(np.abs(self.base_trial.tensor(name).value(step)).mean())
            if value < self.threshold:
                self.record(
                    message="gradient too small",
                    tensor=name,
                    step=step,
                    value=value,
                    threshold=self.threshold,
                )
                return True
        return False


# ----- the base class ------------------------------------------------------------------------


def test_sagemaker_template_and_smdebug_constructor_order_both_work(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0])
    trial = create_trial(str(tmp_path))
    other = create_trial(str(tmp_path))

    class Template(Rule):
        def __init__(self, base_trial, threshold="1.0"):  # type: ignore[no-untyped-def]
            super().__init__(base_trial, other_trials=None)
            self.threshold = float(threshold)

        def invoke_at_step(self, step: int) -> bool:
            return False

    class SmdebugOrder(Rule):
        def __init__(self, base_trial, action_str, other_trials=None):  # type: ignore[no-untyped-def]
            super().__init__(base_trial, action_str, other_trials)

        def invoke_at_step(self, step: int) -> bool:
            return False

    template = Template(trial, threshold="2.5")
    assert template.base_trial is trial and template.other_trials == []
    assert template.rule_name == "Template" and template.threshold == 2.5
    assert template.action_str == ""
    action = '{"name": "email", "endpoint": "a@b.com"}'
    ported = SmdebugOrder(trial, action, [other])
    assert ported.action_str == action
    assert ported.other_trials == [other] and ported.trials == [trial, other]
    with pytest.raises(TypeError):
        Rule(trial)  # type: ignore[abstract]


def test_invoke_raises_condition_met_as_smdebug_does(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0, 0.1])
    rule = SmallGradient(create_trial(str(tmp_path)))
    rule.invoke(0)
    with pytest.raises(RuleEvaluationConditionMet) as raised:
        rule.invoke(1)
    assert raised.value.step == 1 and raised.value.rule_name == "SmallGradient"


def test_required_tensors_wait_for_and_read_the_declared_steps(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0, 2.0, 3.0])
    trial = create_trial(str(tmp_path))
    required = RequiredTensors(trial)
    required.add("gradients/fc.weight_grad", steps=[0, 2])
    required.add("fc", steps=[1], should_match_regex=True)
    assert required.get_names() == ["gradients/fc.weight_grad"]
    assert required.get_tensor_steps("gradients/fc.weight_grad") == [0, 2, 1]
    required.fetch()
    assert [tensor.name for tensor in required.get()] == ["gradients/fc.weight_grad"]
    with pytest.raises(TensorUnavailable):
        required.add("no/such_tensor", steps=[0])
    required.clear()
    assert required.get_names() == []


def test_set_required_tensors_declares_what_each_step_needs(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0, 1.0, 1.0, 1.0])

    class ComparesWithPrevious(Rule):
        def set_required_tensors(self, step: int) -> None:
            steps = [step - 1, step] if step > 0 else [step]
            self.req_tensors.add("gradients/fc.weight_grad", steps=steps)

        def invoke_at_step(self, step: int) -> bool:
            self.record(message="declared", step=step, value=len(self.req_tensors.get_names()))
            return False

    verdict = run_rule(RuleDefinition.for_class(ComparesWithPrevious), str(tmp_path))
    assert verdict.status == "NoIssuesFound"
    assert verdict.steps_evaluated == 4


# ----- which steps a rule is fed ------------------------------------------------------------


def test_only_saved_steps_are_evaluated_once_each_in_order(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0] * 5, every=5)
    seen: list[int] = []

    class Recorder(SmallGradient):
        def invoke_at_step(self, step: int) -> bool:
            seen.append(step)
            return super().invoke_at_step(step)

    verdict = run_rule(RuleDefinition.for_class(Recorder), str(tmp_path))
    assert seen == [0, 5, 10, 15, 20]
    assert verdict.status == "NoIssuesFound" and verdict.steps_evaluated == 5


def test_rule_modes_choose_the_steps_and_steps_stay_global(tmp_path: Path) -> None:
    write_collections_file(str(tmp_path), "worker_0", COLLECTIONS, num_workers=1)
    schedule = [(0, ModeKeys.TRAIN, 0), (1, ModeKeys.TRAIN, 1), (2, ModeKeys.EVAL, 0)]
    schedule += [(3, ModeKeys.TRAIN, 2), (4, ModeKeys.EVAL, 1)]
    for step, mode, mode_step in schedule:
        write_step(tmp_path, step, mode, mode_step, {"loss": np.array(1.0, dtype=np.float32)})
    write_training_end(str(tmp_path))
    seen: list[tuple[int, ModeKeys | None]] = []

    class EvalOnly(Rule):
        modes = (ModeKeys.EVAL,)

        def invoke_at_step(self, step: int) -> bool:
            seen.append((step, self.base_trial.mode(step)))
            self.base_trial.tensor("loss").value(step)
            return False

    output = tmp_path / "rule-output"
    runner = RuleRunner(RuleDefinition.for_class(EvalOnly), str(tmp_path), output_dir=str(output))
    assert runner.run()[0].status == "NoIssuesFound"
    assert seen == [(2, ModeKeys.EVAL), (4, ModeKeys.EVAL)]
    lines = read_evaluations(str(output / "EvalOnly"))
    assert [(line["step"], line["mode"], line["mode_step"]) for line in lines] == [
        (2, "EVAL", 0),
        (4, "EVAL", 1),
    ]


def test_no_step_in_the_rules_modes_is_an_error_that_says_so(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0, 1.0])

    class EvalOnly(SmallGradient):
        modes = (ModeKeys.EVAL,)

    verdict = run_rule(RuleDefinition.for_class(EvalOnly), str(tmp_path))
    assert verdict.status == "Error"
    assert "EVAL" in verdict.details and "set_mode" in verdict.details


def test_start_step_and_end_step_bound_the_evaluated_steps(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0] * 10)
    seen: list[int] = []

    class Recorder(SmallGradient):
        def invoke_at_step(self, step: int) -> bool:
            seen.append(step)
            return super().invoke_at_step(step)

    definition = RuleDefinition.for_class(Recorder, start_step=3, end_step=6)
    verdict = run_rule(definition, str(tmp_path))
    assert seen == [3, 4, 5]
    assert verdict.status == "NoIssuesFound"


# ----- statuses and output --------------------------------------------------------------------


def test_no_issues_found_writes_status_and_one_line_per_step(tmp_path: Path) -> None:
    job = tmp_path / "job"
    gradient_run(job / "debug-output", [1.0, 0.9, 0.8])
    runner = RuleRunner(
        RuleDefinition.for_class(SmallGradient, {"threshold": 0.5}, name="grad-check"),
        str(job / "debug-output"),
        output_dir=str(job / "rule-output"),
    )
    verdict = runner.run()[0]
    assert verdict.status == "NoIssuesFound" and verdict.steps_evaluated == 3
    directory = job / "rule-output" / "grad-check"
    status = json.loads((directory / "status.json").read_text())
    assert status["RuleConfigurationName"] == "grad-check"
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    assert "3 step(s)" in status["StatusDetails"] and status["Finished"] is True
    assert isinstance(status["LastModifiedTime"], float)
    lines = read_evaluations(str(directory))
    assert [(line["step"], line["result"]) for line in lines] == [
        (0, "NoIssuesFound"),
        (1, "NoIssuesFound"),
        (2, "NoIssuesFound"),
    ]


def test_issues_found_records_the_evidence_and_a_custom_rule_goes_on(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0, 0.6, 0.2, 0.9, 0.1])
    output = tmp_path / "out"
    runner = RuleRunner(
        RuleDefinition.for_class(SmallGradient, {"threshold": 0.5}),
        str(tmp_path),
        output_dir=str(output),
    )
    verdict = runner.run()[0]
    assert verdict.status == "IssuesFound"
    assert [issue.step for issue in verdict.issues] == [2, 4]
    evidence = verdict.issues[0].evidence[0]
    assert evidence.tensor == "gradients/fc.weight_grad" and evidence.step == 2
    assert evidence.value == pytest.approx(0.2) and evidence.threshold == 0.5
    assert "found an issue at TRAIN step 2" in verdict.details
    lines = read_evaluations(str(output / "SmallGradient"))
    assert [line["result"] for line in lines] == [
        "NoIssuesFound",
        "NoIssuesFound",
        "IssuesFound",
        "NoIssuesFound",
        "IssuesFound",
    ]
    assert lines[2]["evidence"][0]["value"] == pytest.approx(0.2)
    assert lines[2]["evidence"][0]["tensor"] == "gradients/fc.weight_grad"
    status = read_status(str(output / "SmallGradient"))
    assert status is not None and status.rule_evaluation_status == "IssuesFound"


def test_a_builtin_rule_stops_at_the_first_issue_unless_every_step(tmp_path: Path) -> None:
    # VanishingGradient: mean |gradient| < threshold (reference §4.3).
    gradient_run(tmp_path, [1.0, 1e-9, 1.0, 1e-9, 1.0])
    definition = RuleDefinition.for_builtin("VanishingGradient")
    first = run_rule(definition, str(tmp_path))
    assert first.status == "IssuesFound"
    assert [issue.step for issue in first.issues] == [1]
    assert first.steps_evaluated == 2
    every = run_rule(definition, str(tmp_path), every_step=True)
    assert every.status == "IssuesFound"
    assert [issue.step for issue in every.issues] == [1, 3]
    assert every.steps_evaluated == 5


def test_builtin_parameters_arrive_as_strings_and_are_converted(tmp_path: Path) -> None:
    gradient_run(tmp_path, [0.01, 0.01])
    quiet = run_rule(RuleDefinition.for_builtin("VanishingGradient"), str(tmp_path))
    assert quiet.status == "NoIssuesFound"
    strict = RuleDefinition.for_builtin("vanishing_gradient", {"threshold": "0.1"})
    assert strict.parameters["threshold"] == 0.1
    assert run_rule(strict, str(tmp_path)).status == "IssuesFound"


def test_bad_builtin_input_is_refused_before_anything_runs() -> None:
    from trainprobe.config.errors import ConfigError

    with pytest.raises(ConfigError, match="VanishingGradient"):
        RuleDefinition.for_builtin("VanishingGradiant")
    with pytest.raises(ConfigError, match="threshold"):
        RuleDefinition.for_builtin("VanishingGradient", {"threshold": "tiny"})
    with pytest.raises(ConfigError, match="action_json"):
        RuleDefinition.for_builtin("VanishingGradient", {"action_json": '{"name": "fax"}'})
    with pytest.raises(ConfigError, match="profiler"):
        RuleDefinition.for_builtin("CPUBottleneck")


def test_a_rule_that_raises_ends_in_error_with_file_and_line(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0, 1.0, 1.0])

    class Broken(Rule):
        def invoke_at_step(self, step: int) -> bool:
            if step == 1:
                return {}["missing"]  # type: ignore[no-any-return]
            return False

    line = inspect.getsourcelines(Broken.invoke_at_step)[1] + 2
    output = tmp_path / "out"
    verdict = RuleRunner(
        RuleDefinition.for_class(Broken), str(tmp_path), output_dir=str(output)
    ).run()[0]
    assert verdict.status == "Error"
    assert "KeyError" in verdict.details and "step 1" in verdict.details
    assert f"{Path(__file__).name}, line {line}, in invoke_at_step" in verdict.details
    status = read_status(str(output / "Broken"))
    assert status is not None and status.rule_evaluation_status == "Error"
    assert status.status_details == verdict.details


def test_a_failing_rule_never_affects_the_others(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0, 0.1])

    class Broken(Rule):
        def invoke_at_step(self, step: int) -> bool:
            raise RuntimeError("boom")

    class BrokenAtBuild(Rule):
        def __init__(self, base_trial):  # type: ignore[no-untyped-def]
            raise ValueError("cannot build")

        def invoke_at_step(self, step: int) -> bool:
            return False

    runner = RuleRunner(
        [
            RuleDefinition.for_class(Broken),
            RuleDefinition.for_class(BrokenAtBuild),
            RuleDefinition.for_class(SmallGradient, {"threshold": 0.5}),
        ],
        str(tmp_path),
    )
    broken, at_build, healthy = runner.run()
    assert broken.status == "Error" and "RuntimeError: boom" in broken.details
    assert at_build.status == "Error" and "cannot build" in at_build.details
    assert healthy.status == "IssuesFound" and healthy.first_issue is not None
    assert healthy.first_issue.step == 1


def test_steps_without_the_data_are_skipped_and_never_judged_is_an_error(
    tmp_path: Path,
) -> None:
    gradient_run(tmp_path, [1.0, 1.0, 1.0])

    class NeedsLabels(Rule):
        def invoke_at_step(self, step: int) -> bool:
            if step == 1:
                self.base_trial.tensor("gradients/fc.weight_grad").value(step)
                return False
            raise InsufficientInformationForRuleInvocation(
                "no labels saved: save the labels collection"
            )

    sometimes = run_rule(RuleDefinition.for_class(NeedsLabels), str(tmp_path))
    assert sometimes.status == "NoIssuesFound"
    assert (sometimes.steps_evaluated, sometimes.steps_skipped) == (1, 2)

    class NeverReady(Rule):
        def invoke_at_step(self, step: int) -> bool:
            raise InsufficientInformationForRuleInvocation(
                "NeverReady",
                "no tensors in collection labels: save it with CollectionConfig('labels')",
            )

    output = tmp_path / "out"
    never = RuleRunner(
        RuleDefinition.for_class(NeverReady), str(tmp_path), output_dir=str(output)
    ).run()[0]
    assert never.status == "Error"
    assert "CollectionConfig('labels')" in never.details
    lines = read_evaluations(str(output / "NeverReady"))
    assert {line["result"] for line in lines} == {"Skipped"}
    assert "CollectionConfig('labels')" in lines[0]["reason"]


def test_asking_for_a_collection_the_job_does_not_save_says_how_to_save_it(
    tmp_path: Path,
) -> None:
    gradient_run(tmp_path, [1.0])

    class WantsWeights(Rule):
        def invoke_at_step(self, step: int) -> bool:
            return bool(self.base_trial.tensor_names(collection="weights"))

    verdict = run_rule(RuleDefinition.for_class(WantsWeights), str(tmp_path))
    assert verdict.status == "Error"
    assert "CollectionConfig('weights')" in verdict.details


def test_a_training_that_ended_without_tensors_is_an_error_at_once(tmp_path: Path) -> None:
    write_training_end(str(tmp_path))
    verdict = run_rule(RuleDefinition.for_class(SmallGradient), str(tmp_path), no_data_timeout=300)
    assert verdict.status == "Error"
    assert "ended without saving any" in verdict.details


def test_no_data_ever_appearing_times_out_with_a_clear_message(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet"
    output = tmp_path / "out"
    runner = RuleRunner(
        RuleDefinition.for_class(SmallGradient),
        str(missing),
        output_dir=str(output),
        no_data_timeout=0.5,
    )
    verdict = runner.run()[0]
    assert verdict.status == "Error"
    assert "No tensors appeared" in verdict.details and str(missing) in verdict.details
    status = read_status(str(output / "SmallGradient"))
    assert status is not None and status.rule_evaluation_status == "Error"


def test_collections_but_no_step_times_out_too(tmp_path: Path) -> None:
    write_collections_file(str(tmp_path), "worker_0", COLLECTIONS, num_workers=1)
    verdict = run_rule(RuleDefinition.for_class(SmallGradient), str(tmp_path), no_data_timeout=0.5)
    assert verdict.status == "Error" and "saved no step" in verdict.details


def test_stop_gives_stopping_then_stopped(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0, 1.0], end=False)  # a job still running
    output = tmp_path / "out"
    runner = RuleRunner(
        RuleDefinition.for_class(SmallGradient), str(tmp_path), output_dir=str(output)
    )
    statuses: list[str] = []
    evaluated = threading.Event()

    def stop_when_evaluated() -> None:
        evaluated.wait(60)
        runner.stop()
        status = read_status(str(output / "SmallGradient"))
        statuses.append(status.rule_evaluation_status if status else "")

    runner.evaluators[0].on_evaluation = lambda evaluation: (
        evaluated.set() if evaluation.step == 1 else None
    )
    stopper = threading.Thread(target=stop_when_evaluated)
    stopper.start()
    verdict = runner.run()[0]
    stopper.join()
    assert statuses[0] in ("Stopping", "Stopped")
    assert verdict.status == "Stopped" and verdict.steps_evaluated == 2
    status = read_status(str(output / "SmallGradient"))
    assert status is not None and status.rule_evaluation_status == "Stopped"
    assert status.finished
    assert status.status_details == (
        "stopped on request: 2 step(s) evaluated, 1 tensor(s) checked, 0 step(s) skipped"
    )


def test_a_half_written_line_is_never_read(tmp_path: Path) -> None:
    gradient_run(tmp_path, [1.0])
    output = tmp_path / "out"
    RuleRunner(RuleDefinition.for_class(SmallGradient), str(tmp_path), output_dir=str(output)).run()
    evaluations = output / "SmallGradient" / "evaluations.jsonl"
    with evaluations.open("a") as file:
        file.write('{"step": 7, "res')
    assert [line["step"] for line in read_evaluations(str(output / "SmallGradient"))] == [0]


def test_rule_names_must_be_unique_in_one_runner(tmp_path: Path) -> None:
    from trainprobe.config.errors import ConfigError

    definition = RuleDefinition.for_class(SmallGradient)
    with pytest.raises(ConfigError, match="SmallGradient"):
        RuleRunner([definition, definition], str(tmp_path))


def test_invoke_rule_walks_the_saved_steps_and_ends_without_no_more_data(tmp_path: Path) -> None:
    from trainprobe.rules import invoke_rule

    gradient_run(tmp_path, [1.0, 1.0, 0.1, 1.0, 0.1], every=3)
    rule = SmallGradient(create_trial(str(tmp_path)))
    invoke_rule(rule)  # smdebug raised NoMoreData at the end; trainprobe returns
    assert rule.steps_seen == [0, 3, 6, 9, 12]
    again = SmallGradient(create_trial(str(tmp_path)))
    with pytest.raises(RuleEvaluationConditionMet) as raised:
        invoke_rule(again, start_step=1, raise_eval_cond=True)
    assert raised.value.step == 6 and again.steps_seen == [3, 6]
    bounded = SmallGradient(create_trial(str(tmp_path)))
    invoke_rule(bounded, start_step=3, end_step=9)
    assert bounded.steps_seen == [3, 6]

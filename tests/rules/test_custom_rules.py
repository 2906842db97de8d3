"""Custom rules loaded from the user's file: SageMaker's template (here importing
``trainprobe.rules``; tests/compat runs it with ``smdebug.rules`` unchanged), parameters as
strings, and every way the user's file can fail, each ending in status Error with the file, the
line and the message."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from trainprobe import smdebug_names
from trainprobe.config.rules import Rule as RuleConfig
from trainprobe.rules.custom import CustomRuleError, load_rule_class
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner, run_rule
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.rule_output import read_status
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end

# The shape of SageMaker's documented custom rule: a Rule subclass whose constructor takes the
# trial and keyword parameters (strings), calls super().__init__(base_trial, other_trials=None),
# and whose invoke_at_step returns True when the condition is met.
TEMPLATE = """
from trainprobe.rules import Rule


class ImproperActivation(Rule):
    def __init__(self, base_trial, collection_names="relu_activations", threshold="10.0"):
        super().__init__(base_trial, other_trials=None)
        self.collection_names = collection_names
        self.threshold = float(threshold)
        self.parameter_types = (type(collection_names), type(threshold))

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(collection=self.collection_names):
            value = self.base_trial.tensor(name).reduction_value(step, "max")
            if value > self.threshold:
                self.record(message="activation too large", tensor=name, step=step,
                            value=value, threshold=self.threshold)
                return True
        return False
"""

COLLECTIONS = {"relu_activations": {"name": "relu_activations", "include_regex": ["relu"]}}


def activation_run(out: Path, maxima: list[float]) -> None:
    write_collections_file(str(out), "worker_0", COLLECTIONS, num_workers=1)
    for step, maximum in enumerate(maxima):
        with StepWriter(str(out), step, "worker_0") as writer:
            values = np.array([0.0, maximum / 2, maximum], dtype=np.float32)
            writer.add("relu_output_0", values, mode=ModeKeys.TRAIN, mode_step=step)
    write_training_end(str(out))


def rule_file(tmp_path: Path, text: str, name: str = "custom_rules.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def line_of(path: Path, fragment: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if fragment in line:
            return number
    raise AssertionError(f"{fragment!r} not in {path}")


def test_the_sagemaker_template_runs_from_rule_custom(tmp_path: Path) -> None:
    activation_run(tmp_path / "debug-output", [1.0, 5.0, 12.0, 3.0])
    source = rule_file(tmp_path, TEMPLATE)
    config = RuleConfig.custom(
        name="improper_activation_job",
        image_uri="552407032007.dkr.ecr.ap-south-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest",
        instance_type="ml.c4.xlarge",
        volume_size_in_gb=400,
        source=str(source),
        rule_to_invoke="ImproperActivation",
        rule_parameters={"collection_names": "relu_activations", "threshold": "10.0"},
    )
    definition = RuleDefinition.from_config(config)
    assert definition.name == "improper_activation_job" and not definition.builtin
    runner = RuleRunner(
        definition, str(tmp_path / "debug-output"), output_dir=str(tmp_path / "rule-output")
    )
    verdict = runner.run()[0]
    assert verdict.status == "IssuesFound"
    assert [issue.step for issue in verdict.issues] == [2]
    evidence = verdict.issues[0].evidence[0]
    assert (evidence.tensor, evidence.value, evidence.threshold) == ("relu_output_0", 12.0, 10.0)
    rule = runner.evaluators[0].rule
    assert rule is not None and rule.parameter_types == (str, str)  # type: ignore[attr-defined]
    status = read_status(str(tmp_path / "rule-output" / "improper_activation_job"))
    assert status is not None and status.rule_evaluation_status == "IssuesFound"


def test_the_request_form_with_source_s3_uri_runs_the_same_rule(tmp_path: Path) -> None:
    activation_run(tmp_path, [1.0, 2.0])
    source = rule_file(tmp_path, TEMPLATE)
    config = RuleConfig.from_request_dict(
        {
            "RuleConfigurationName": "improper_activation_job",
            "RuleEvaluatorImage": "sagemaker-debugger-rule-evaluator:latest",
            "InstanceType": "ml.c4.xlarge",
            "VolumeSizeInGB": 400,
            "RuleParameters": {
                "source_s3_uri": str(source),
                "rule_to_invoke": "ImproperActivation",
                "collection_names": "relu_activations",
                "threshold": "1.5",
            },
        }
    )
    verdict = run_rule(RuleDefinition.from_config(config), str(tmp_path))
    assert verdict.status == "IssuesFound" and verdict.issues[0].step == 1


def test_a_syntax_error_in_the_users_file_names_file_and_line(tmp_path: Path) -> None:
    activation_run(tmp_path / "out", [1.0])
    source = rule_file(
        tmp_path,
        """
        from trainprobe.rules import Rule

        class ImproperActivation(Rule):
            def invoke_at_step(self, step)
                return False
        """,
    )
    definition = RuleDefinition.for_custom(str(source), "ImproperActivation")
    output = tmp_path / "rule-output"
    verdict = RuleRunner(definition, str(tmp_path / "out"), output_dir=str(output)).run()[0]
    assert verdict.status == "Error"
    assert "SyntaxError" in verdict.details
    assert f"{source}, line {line_of(source, 'def invoke_at_step')}" in verdict.details
    status = read_status(str(output / "ImproperActivation"))
    assert status is not None and status.rule_evaluation_status == "Error"
    assert "SyntaxError" in status.status_details


def test_an_error_while_importing_the_file_names_its_line(tmp_path: Path) -> None:
    activation_run(tmp_path / "out", [1.0])
    source = rule_file(
        tmp_path,
        """
        from trainprobe.rules import Rule
        LIMIT = undefined_name * 2
        """,
    )
    verdict = run_rule(RuleDefinition.for_custom(str(source), "X"), str(tmp_path / "out"))
    assert verdict.status == "Error"
    assert "NameError" in verdict.details
    assert f"{source}, line {line_of(source, 'undefined_name')}" in verdict.details


def test_an_exception_in_invoke_at_step_names_the_line_in_the_users_file(tmp_path: Path) -> None:
    activation_run(tmp_path / "out", [1.0, 2.0])
    source = rule_file(
        tmp_path,
        """
        from trainprobe.rules import Rule

        class Divides(Rule):
            def invoke_at_step(self, step):
                return 1 / step > 0.5
        """,
    )
    verdict = run_rule(RuleDefinition.for_custom(str(source), "Divides"), str(tmp_path / "out"))
    assert verdict.status == "Error"
    assert "ZeroDivisionError" in verdict.details and "step 0" in verdict.details
    assert verdict.details.endswith("(0 step(s) evaluated, 0 tensor(s) checked, 0 step(s) skipped)")
    assert f"{source}, line {line_of(source, '1 / step')}, in invoke_at_step" in verdict.details


def test_a_bad_parameter_name_says_which_parameters_were_given(tmp_path: Path) -> None:
    activation_run(tmp_path / "out", [1.0])
    source = rule_file(tmp_path, TEMPLATE)
    definition = RuleDefinition.for_custom(str(source), "ImproperActivation", {"treshold": "3"})
    verdict = run_rule(definition, str(tmp_path / "out"))
    assert verdict.status == "Error"
    assert "treshold" in verdict.details and "TypeError" in verdict.details


def test_a_missing_class_lists_the_rules_the_file_defines(tmp_path: Path) -> None:
    source = rule_file(tmp_path, TEMPLATE)
    with pytest.raises(CustomRuleError, match="ImproperActivation") as raised:
        load_rule_class(str(source), "ImproperActivations")
    assert "Did you mean 'ImproperActivation'" in str(raised.value)


def test_a_class_that_is_not_a_rule_is_refused(tmp_path: Path) -> None:
    source = rule_file(tmp_path, "class NotARule:\n    pass\n")
    with pytest.raises(CustomRuleError, match=r"subclasses trainprobe\.rules\.Rule"):
        load_rule_class(str(source), "NotARule")


def test_an_import_of_smdebug_internals_gets_a_hint(tmp_path: Path) -> None:
    # smdebug's documented names are answered by trainprobe (tests/compat); its internals are not.
    text = "from smdebug.core.utils import get_logger\n" + TEMPLATE
    source = rule_file(tmp_path, text)
    try:
        with pytest.raises(CustomRuleError) as raised:
            load_rule_class(str(source), "ImproperActivation")
    finally:
        smdebug_names.uninstall()
    assert "from smdebug.rules.rule import Rule" in str(raised.value)
    assert f"{source}, line 1" in str(raised.value)


def test_sources_that_are_not_local_files_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(CustomRuleError, match="no such file"):
        load_rule_class(str(tmp_path / "missing.py"), "ImproperActivation")
    with pytest.raises(CustomRuleError, match="only local files"):
        load_rule_class("s3://bucket/custom_rules.py", "ImproperActivation")
    source = rule_file(tmp_path, TEMPLATE)
    assert load_rule_class(f"file://{source}", "ImproperActivation").__name__ == (
        "ImproperActivation"
    )

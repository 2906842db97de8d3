"""``import smdebug...`` answered by trainprobe: on in what trainprobe runs, one line elsewhere,
never over a real smdebug, and a clear ImportError for what is deliberately not there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from job_helpers import rule_statuses, wait_for

from reference_envs import reference_python
from trainprobe.jobs import JobStore, create_training_job
from trainprobe.trials import create_trial

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"


def python(code: str, executable: str = sys.executable) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )


def test_one_line_turns_on_the_names_smdebug_code_imports() -> None:
    finished = python(
        """
        import trainprobe.smdebug_names; trainprobe.smdebug_names.install()
        import smdebug, smdebug.pytorch as smd
        from smdebug import modes
        from smdebug.core.modes import ModeKeys
        from smdebug.profiler.utils import str2bool
        from smdebug.analysis.utils import no_refresh, refresh
        from smdebug.trials import LocalTrial, create_trial
        from smdebug.pytorch import del_hook, set_hook, get_hook
        from smdebug.rules.rule_invoker import invoke_rule
        from smdebug.rules.rule import Rule
        from smdebug.rules import RequiredTensors
        from smdebug.exceptions import TensorUnavailable, StepUnavailable, NoMoreData
        from smdebug.core.collection import Collection, CollectionKeys
        from smdebug.core.save_config import SaveConfig, SaveConfigMode
        from smdebug.core.reduction_config import ReductionConfig
        import trainprobe.pytorch, trainprobe.rules
        assert smd.Hook is trainprobe.pytorch.Hook and Rule is trainprobe.rules.Rule
        assert modes is smdebug.modes is ModeKeys and modes.TRAIN.value == 1
        assert smd.SaveConfig is SaveConfig and smdebug.ReductionConfig is ReductionConfig
        assert str2bool("True") and not str2bool("off")
        print("ok")
        """
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "ok"


def test_without_the_line_there_is_no_smdebug() -> None:
    finished = python(
        """
        import trainprobe.pytorch, trainprobe.trials, trainprobe.rules
        import smdebug
        """
    )
    assert finished.returncode == 1
    assert "ModuleNotFoundError: No module named 'smdebug'" in finished.stderr


@pytest.mark.usefixtures("smdebug_names_on")
def test_frameworks_trainprobe_lacks_say_so() -> None:
    with pytest.raises(ImportError, match="deliberately has no MXNet hook"):
        from smdebug.mxnet import Hook  # noqa: F401
    with pytest.raises(ImportError, match=r"documented names .* not its internals"):
        import smdebug.core.utils  # noqa: F401


def test_a_real_smdebug_is_never_shadowed() -> None:
    reference = reference_python("smdebug")
    finished = python(
        """
        import logging; logging.basicConfig(level=logging.INFO)
        import trainprobe.smdebug_names
        answer = trainprobe.smdebug_names.install()
        import smdebug.pytorch
        print(answer, smdebug.pytorch.__file__)
        """,
        executable=str(reference),
    )
    assert finished.returncode == 0, finished.stderr
    answer, location = finished.stdout.splitlines()[-1].split()
    assert answer == "False"
    assert "site-packages" in location and "trainprobe" not in location
    assert "smdebug is installed" in finished.stderr and "stays smdebug's" in finished.stderr


@pytest.mark.slow
def test_a_job_runs_smdebug_code_with_nothing_changed(tmp_path: Path, store: JobStore) -> None:
    # The training creates its hook with smdebug's create_from_json_file; the custom rule file
    # imports smdebug's Rule: both as SageMaker Debugger's users wrote them.
    request = {
        "TrainingJobName": "smdebug-unchanged",
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "ContainerEntrypoint": [str(HERE / "smdebug_training.py")],
            "ContainerArguments": ["--steps", "4"],
        },
        "OutputDataConfig": {"S3OutputPath": str(tmp_path / "out")},
        "DebugHookConfig": {"HookParameters": {"save_interval": "1"}},
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": "LossAbove",
                "RuleEvaluatorImage": "custom-rule-image",
                "RuleParameters": {
                    "source_s3_uri": str(HERE / "smdebug_rule.py"),
                    "rule_to_invoke": "LossAbove",
                    "threshold": "0.0",
                },
            }
        ],
        "ProfilerConfig": {"DisableProfiler": True},
    }
    create_training_job(request, store=store)
    description = wait_for(store, "smdebug-unchanged")
    assert description["TrainingJobStatus"] == "Completed", json.dumps(description, default=str)
    assert rule_statuses(description) == {"LossAbove": "IssuesFound"}
    trial = create_trial(str(tmp_path / "out" / "smdebug-unchanged" / "debug-output"))
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == [0, 1, 2, 3, 4]
    assert trial.tensor("scalar/learning_rate").value(0) == pytest.approx(0.05)


def test_invoke_rule_prints_its_result_without_logging_configured(tmp_path: Path) -> None:
    finished = python(
        f"""
        import trainprobe.smdebug_names; trainprobe.smdebug_names.install()
        import numpy as np
        from smdebug.rules.rule import Rule
        from smdebug.rules.rule_invoker import invoke_rule
        from smdebug.trials import create_trial
        from trainprobe.storage.modes import ModeKeys
        from trainprobe.storage.step_file import (
            StepWriter, write_collections_file, write_training_end)

        out = {str(tmp_path)!r}
        write_collections_file(out, "worker_0", {{}}, num_workers=1)
        for step in range(3):
            with StepWriter(out, step, "worker_0") as writer:
                writer.add("loss_output_0", np.array(float(step)), mode=ModeKeys.TRAIN,
                           mode_step=step)
        write_training_end(out)

        class LossAbove(Rule):
            def __init__(self, base_trial, threshold):
                super().__init__(base_trial, action_str="")
                self.threshold = threshold

            def invoke_at_step(self, step):
                return float(self.base_trial.tensor("loss_output_0").value(step)) > self.threshold

        invoke_rule(LossAbove(create_trial(out), 1.5))
        invoke_rule(LossAbove(create_trial(out), 9.0))
        """
    )
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    assert (
        "trainprobe: Evaluation of the rule LossAbove at step 2 resulted in the condition "
        "being met" in lines
    )
    assert "trainprobe: LossAbove: the condition was not met up to TRAIN step 2" in lines

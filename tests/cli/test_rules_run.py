"""``trainprobe rules run RULE PATH``, run as the user runs it (a subprocess): the verdict and
its evidence on stdout, the rule output under the job, and the exit status (0 no issues, 1
issues found, 2 error)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end

COLLECTIONS = {"gradients": {"name": "gradients", "include_regex": ["^gradients/"]}}
GRADIENT = "gradients/fc.weight_grad"

CUSTOM_RULE = """
from trainprobe.rules import Rule


class GradientAbove(Rule):
    def __init__(self, base_trial, limit="1.0"):
        super().__init__(base_trial, other_trials=None)
        self.limit = float(limit)

    def invoke_at_step(self, step):
        value = float(self.base_trial.tensor("gradients/fc.weight_grad").value(step).max())
        if value > self.limit:
            self.record(message="gradient above the limit", tensor="gradients/fc.weight_grad",
                        step=step, value=value, threshold=self.limit)
            return True
        return False


class GradientOf(Rule):
    def __init__(self, base_trial, tensor="gradients/fc.weight_grad"):
        super().__init__(base_trial, other_trials=None)
        self.tensor = tensor

    def invoke_at_step(self, step):
        return float(self.base_trial.tensor(self.tensor).value(step).max()) > 1.0
"""


def trainprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_gradients(out: Path, values: list[float], *, end: bool = True, pause: float = 0) -> None:
    write_collections_file(str(out), "worker_0", COLLECTIONS, num_workers=1)
    for step, value in enumerate(values):
        with StepWriter(str(out), step, "worker_0") as writer:
            grad = np.full((2, 2), value, dtype=np.float32)
            writer.add(GRADIENT, grad, mode=ModeKeys.TRAIN, mode_step=step)
        time.sleep(pause)
    if end:
        write_training_end(str(out))


def test_builtin_rule_finds_the_issue_and_writes_its_output(tmp_path: Path) -> None:
    job = tmp_path / "job"
    write_gradients(job / "debug-output", [1.0, 1.0, 1e-9, 1.0])
    result = trainprobe("rules", "run", "VanishingGradient", str(job))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "VanishingGradient: IssuesFound" in result.stdout
    assert "step 2" in result.stdout and GRADIENT in result.stdout
    assert "Steps evaluated: 3" in result.stdout
    status = json.loads((job / "rule-output" / "VanishingGradient" / "status.json").read_text())
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    lines = (job / "rule-output" / "VanishingGradient" / "evaluations.jsonl").read_text()
    assert len(lines.splitlines()) == 3


def test_no_issue_exits_zero_and_parameters_change_the_verdict(tmp_path: Path) -> None:
    out = tmp_path / "debug-output"
    write_gradients(out, [0.01, 0.02])
    quiet = trainprobe("rules", "run", "VanishingGradient", str(out))
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "VanishingGradient: NoIssuesFound" in quiet.stdout
    assert "2 step(s)" in quiet.stdout
    strict = trainprobe("rules", "run", "VanishingGradient", "--param", "threshold=0.1", str(out))
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert (tmp_path / "rule-output" / "VanishingGradient" / "status.json").exists()


def test_a_rerun_writes_beside_the_job_s_own_verdict_unless_asked_to_replace_it(
    tmp_path: Path,
) -> None:
    job = tmp_path / "job"
    write_gradients(job / "debug-output", [1.0, 1e-9, 1.0])
    rules = job / "rule-output"
    own = trainprobe("rules", "run", "VanishingGradient", str(job))
    assert own.returncode == 1, own.stdout + own.stderr
    kept = {path.name: path.read_bytes() for path in (rules / "VanishingGradient").iterdir()}
    assert set(kept) == {"status.json", "evaluations.jsonl"}

    lenient = ("rules", "run", "VanishingGradient", "--param", "threshold=1e-10", str(job))
    again = trainprobe(*lenient)
    assert again.returncode == 0, again.stdout + again.stderr
    beside = rules / "VanishingGradient-rerun-1"
    assert again.stdout.startswith(
        f"{rules / 'VanishingGradient'} holds an earlier verdict, left as it is; this run writes "
        f"{beside} (--replace writes over it)"
    )
    assert "VanishingGradient-rerun-1: NoIssuesFound" in again.stdout
    assert f"Output: {beside}" in again.stdout
    status = json.loads((beside / "status.json").read_text())
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    assert {path.name: path.read_bytes() for path in (rules / "VanishingGradient").iterdir()} == (
        kept
    )
    third = trainprobe(*lenient)
    assert f"Output: {rules / 'VanishingGradient-rerun-2'}" in third.stdout

    replaced = trainprobe(*lenient[:-1], "--replace", str(job))
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    assert "VanishingGradient: NoIssuesFound" in replaced.stdout
    status = json.loads((rules / "VanishingGradient" / "status.json").read_text())
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    lines = (rules / "VanishingGradient" / "evaluations.jsonl").read_text().splitlines()
    assert [json.loads(line)["result"] for line in lines] == ["NoIssuesFound"] * 3


def test_every_step_lists_every_issue(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    write_gradients(out, [1e-9, 1.0, 1e-9])
    result = trainprobe("rules", "run", "VanishingGradient", "--every-step", "--quiet", str(out))
    assert result.returncode == 1
    assert "Issues at: TRAIN step 0, TRAIN step 2" in result.stdout
    assert not (tmp_path / "rule-output").exists()  # a plain tensor output: nothing written


def test_custom_rule_from_a_source_file(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    write_gradients(out, [0.5, 2.5, 0.5])
    source = tmp_path / "my_rules.py"
    source.write_text(CUSTOM_RULE)
    found = trainprobe(
        "rules", "run", "GradientAbove", "--source", str(source), "--param", "limit=2",
        "--output", str(tmp_path / "results"), str(out),
    )  # fmt: skip
    assert found.returncode == 1, found.stdout + found.stderr
    assert "TRAIN step 1: issue found" in found.stdout
    assert "gradient above the limit" in found.stdout and "value 2.5" in found.stdout
    assert (tmp_path / "results" / "GradientAbove" / "status.json").exists()
    fine = trainprobe(
        "rules", "run", "GradientAbove", "--source", str(source), "--param", "limit=3", str(out)
    )
    assert fine.returncode == 0, fine.stdout + fine.stderr
    # A tensor the job never saved: the rule checked nothing, which is an Error, not a pass.
    never = trainprobe(
        "rules", "run", "GradientOf", "--source", str(source),
        "--param", "tensor=gradients/fc.bias_grad", str(out),
    )  # fmt: skip
    assert never.returncode == 2, never.stdout + never.stderr
    assert "GradientOf: Error" in never.stdout
    assert "GradientOf checked no tensor: it looked for tensor 'gradients/fc.bias_grad'" in (
        never.stdout
    )
    assert f"its tensors include {GRADIENT}" in never.stdout
    assert 'include_regex=[r"gradients/fc\\.bias_grad"]' in never.stdout
    assert "Steps evaluated: 0, skipped: 3; tensors checked: 0" in never.stdout
    assert "Matched nothing: tensor 'gradients/fc.bias_grad'" in never.stdout


def test_an_error_in_the_users_file_exits_two_with_file_and_line(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    write_gradients(out, [1.0])
    source = tmp_path / "broken.py"
    source.write_text(CUSTOM_RULE.replace("def invoke_at_step(self, step):", "def invoke_at_step("))
    result = trainprobe("rules", "run", "GradientAbove", "--source", str(source), str(out))
    assert result.returncode == 2
    assert "GradientAbove: Error" in result.stdout
    assert "SyntaxError" in result.stdout and f"{source}, line" in result.stdout


def test_bad_arguments_exit_two_with_what_is_wrong(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    write_gradients(out, [1.0])
    unknown = trainprobe("rules", "run", "VanishingGradiant", str(out))
    assert unknown.returncode == 2 and "Did you mean 'VanishingGradient'" in unknown.stderr
    no_equals = trainprobe("rules", "run", "VanishingGradient", "--param", "threshold", str(out))
    assert no_equals.returncode == 2 and "KEY=VALUE" in no_equals.stderr
    bad_value = trainprobe("rules", "run", "VanishingGradient", "--param", "threshold=x", str(out))
    assert bad_value.returncode == 2 and "threshold" in bad_value.stderr


def test_nothing_there_exits_two_after_the_wait(tmp_path: Path) -> None:
    result = trainprobe("rules", "run", "VanishingGradient", "--wait", "1", str(tmp_path / "no"))
    assert result.returncode == 2
    assert "No tensors appeared" in result.stdout


def test_follows_a_job_that_starts_after_the_command(tmp_path: Path) -> None:
    job = tmp_path / "job"
    arguments = ["rules", "run", "VanishingGradient", "--wait", "60", str(job)]
    command = subprocess.Popen(
        [sys.executable, "-m", "trainprobe.cli.main", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    writer = threading.Thread(
        target=write_gradients, args=(job / "debug-output", [1.0] * 5 + [1e-9] + [1.0] * 5)
    )
    time.sleep(0.5)
    writer.start()
    stdout, stderr = command.communicate(timeout=120)
    writer.join()
    assert command.returncode == 1, stdout + stderr
    assert "found an issue at TRAIN step 5" in stdout
    assert (job / "rule-output" / "VanishingGradient" / "status.json").exists()

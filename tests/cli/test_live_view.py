"""The live view of ``trainprobe run``: a panel under the training's output on a terminal.

The panel is drawn from snapshots (``render_snapshot``, tested on hand-made ones); under a real
pseudo-terminal, a real ``trainprobe run`` of ``tests/jobs/plain_training.py`` shows the step,
the loss, the rules' statuses and the system's utilisation, then the verdicts and the outputs.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from trainprobe.cli.job_follower import JobProgress
from trainprobe.cli.live_view import JobSnapshot, LiveView, RuleStatus, render_snapshot
from trainprobe.jobs.operations.progress import saved_loss
from trainprobe.rules import Rule
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.storage import locations, written_scalars
from trainprobe.storage.job_layout import JobLayout
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.rule_output import read_status
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end
from trainprobe.storage.system_metrics import minute_file
from trainprobe.storage.written_scalars import ScalarChunkWriter

TRAINING = Path(__file__).resolve().parent.parent / "jobs" / "plain_training.py"
# Colours, then cursor moves and erasures: what the terminal acts on rather than shows.
STATUSES = ("InProgress", "IssuesFound", "NoIssuesFound", "Error", "Stopping", "Stopped")
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
CURSOR = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def screen_lines(received: str) -> list[str]:
    """The lines a terminal was sent, colours dropped; a cursor move starts a new line."""
    text = CURSOR.sub("\n", COLOUR.sub("", received))
    return [line for line in text.split("\n") if line]


def rendered(snapshot: JobSnapshot, width: int = 100) -> list[str]:
    console = Console(file=StringIO(), width=width, record=True, color_system=None)
    console.print(render_snapshot(snapshot))
    return console.export_text().splitlines()


def row(lines: list[str], label: str) -> str:
    """The panel row whose label is ``label``, without the border."""
    [found] = panel_rows(lines, label)
    return found


SNAPSHOT = JobSnapshot(
    name="mnist-1",
    status="InProgress",
    secondary_status="Training",
    elapsed_seconds=65.4,
    step=120,
    steps_per_second=3.5,
    loss=0.532112,
    loss_where="TRAIN step 100 (step 118)",
    cpu_percent=35.2,
    memory_percent=61.7,
    gpu_percent=80.0,
    rules=(
        RuleStatus("ExplodingTensor", "IssuesFound", "NaN in CrossEntropyLoss_output_0\nmore"),
        RuleStatus("LossNotDecreasing", "NoIssuesFound"),
        RuleStatus("ProfilerReport-1700000000", "InProgress"),
    ),
)


def test_the_panel_shows_the_job_step_loss_system_and_each_rule() -> None:
    lines = rendered(SNAPSHOT)
    assert "trainprobe run: mnist-1" in lines[0]
    assert row(lines, "job") == "job InProgress (Training) elapsed 0:01:05"
    assert row(lines, "step") == "step 120 3.50 steps/s"
    assert row(lines, "loss") == "loss 0.53211 TRAIN step 100 (step 118)"
    assert row(lines, "system") == "system CPU 35% memory 62% GPU 80%"
    # Each rule on its own row with its status; under them, the first line of an issue.
    assert row(lines, "rules") == "rules ExplodingTensor IssuesFound"
    assert row(lines, "LossNotDecreasing") == "LossNotDecreasing NoIssuesFound"
    assert row(lines, "ProfilerReport-1700000000") == "ProfilerReport-1700000000 InProgress"
    assert row(lines, "ExplodingTensor:") == "ExplodingTensor: NaN in CrossEntropyLoss_output_0"
    assert not any("more" in line for line in lines)


def test_what_is_not_known_is_left_blank() -> None:
    snapshot = JobSnapshot(
        name="starting", status="InProgress", secondary_status="Starting", elapsed_seconds=0.2
    )
    lines = rendered(snapshot)
    assert row(lines, "job") == "job InProgress (Starting) elapsed 0:00:00"
    assert row(lines, "step") == "step"
    assert row(lines, "loss") == "loss"
    assert row(lines, "system") == "system"
    assert not any("rules" in line or "None" in line for line in lines)


def test_gpu_use_appears_only_with_gpu_readings_and_no_loss_shows_no_step() -> None:
    snapshot = JobSnapshot(
        name="cpu-only",
        status="Completed",
        secondary_status="Completed",
        elapsed_seconds=3725,
        step=7,
        loss_where="TRAIN step 7",
        cpu_percent=99.6,
        memory_percent=4.0,
    )
    lines = rendered(snapshot)
    assert row(lines, "job") == "job Completed elapsed 1:02:05"
    assert row(lines, "system") == "system CPU 100% memory 4%"
    assert row(lines, "loss") == "loss"


def test_long_issue_details_are_cut_to_fit() -> None:
    snapshot = JobSnapshot(
        name="long",
        status="InProgress",
        secondary_status="Training",
        elapsed_seconds=1,
        rules=(RuleStatus("AllZero", "IssuesFound", "zero " * 100),),
    )
    lines = rendered(snapshot, width=60)
    assert row(lines, "rules") == "rules AllZero IssuesFound"
    [details] = [line for line in lines if "AllZero: zero" in line]
    assert len(details) == 60 and details.rstrip("│ ").endswith("…")


def test_the_training_output_goes_above_the_panel_as_it_is() -> None:
    screen = StringIO()
    console = Console(file=screen, width=100, force_terminal=True)
    with LiveView(console) as view:
        view.print_output(["epoch [1/10] \x1b[31mloss\x1b[0m 0.5", "batch 1/3\rbatch 3/3"])
        view.show(SNAPSHOT)
        view.print_message("[trainprobe] rule ExplodingTensor: IssuesFound: NaN")
        view.show(SNAPSHOT)
        view.finish(["", "Training job mnist-1: Completed", "  ExplodingTensor: IssuesFound"])
    lines = screen_lines(screen.getvalue())
    # Not read as markup, the colour codes kept as colours, a carriage return honoured.
    assert "epoch [1/10] loss 0.5" in lines
    assert "batch 3/3" in lines and not any("batch 1/3" in line for line in lines)
    assert "[trainprobe] rule ExplodingTensor: IssuesFound: NaN" in lines
    # The summary comes after the last panel, which stays on screen.
    end = lines.index("Training job mnist-1: Completed")
    assert any("trainprobe run: mnist-1" in line for line in lines[:end])
    assert lines[end + 1] == "  ExplodingTensor: IssuesFound"


def test_files_that_cannot_be_read_leave_their_fields_blank(tmp_path: Path) -> None:
    layout = JobLayout.for_job("broken", str(tmp_path))
    debug = Path(layout.debug_output)
    (debug / locations.index_file(5, "worker_0")).parent.mkdir(parents=True)
    (debug / locations.index_file(5, "worker_0")).write_text("{not an index")
    (debug / locations.collections_file("worker_0")).parent.mkdir(parents=True)
    (debug / locations.collections_file("worker_0")).write_text("{not collections")
    metrics = Path(layout.profiler_output) / minute_file(1_700_000_040, "algo-1")
    metrics.parent.mkdir(parents=True)
    metrics.write_text("not a reading\n")
    description = {
        "TrainingJobName": "broken",
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "DebugRuleEvaluationStatuses": [
            {
                "RuleConfigurationName": "ExplodingTensor",
                "RuleEvaluationStatus": "InProgress",
                "StatusDetails": "",
            }
        ],
    }
    snapshot = JobProgress(layout).snapshot(description, final=True)
    assert snapshot.step == 5  # the index file's name says so
    assert snapshot.loss is None and snapshot.cpu_percent is None
    assert snapshot.rules == (RuleStatus("ExplodingTensor", "InProgress"),)
    assert row(rendered(snapshot), "loss") == "loss"


def running(name: str) -> dict[str, Any]:
    """DescribeTrainingJob's answer for a training job ``name`` in progress, without rules."""
    return {
        "TrainingJobName": name,
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "DebugRuleEvaluationStatuses": [],
    }


def keep_records(writer: ScalarChunkWriter, steps: range) -> None:
    """Each of ``steps`` written, then its record (as the hook's writer hands them over): a
    loss falling from 2.0 by 1/30 a step."""
    for step in steps:
        writer.step_written(step)
        writer.add_record(step, "TRAIN", np.array([2.0 - step / 30, 0.1, 1.0, step]))


def test_the_last_panel_draws_every_recorded_loss_even_when_the_step_did_not_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook's record of a step reaches its files after the step's own: the panel drawn when
    the job ends reads the record again, though the last step was already shown."""
    monkeypatch.setattr(written_scalars, "PIECE_SECONDS", 0.0)  # a piece at every step
    layout = JobLayout.for_job("late-record", str(tmp_path))
    write_steps(Path(layout.debug_output), range(30))
    record = ScalarChunkWriter(layout.debug_output, "worker_0")
    description = running("late-record")
    keep_records(record, range(27))
    progress = JobProgress(layout)
    assert len(progress.snapshot(description).recent_losses) == 27
    keep_records(record, range(27, 30))
    description |= {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed"}
    last = progress.snapshot(description, final=True)
    assert len(last.recent_losses) == 30 and last.loss_where == "TRAIN step 29"
    assert last.loss == pytest.approx(2.0 - 29 / 30)


def test_the_sparkline_keeps_its_steps_when_a_chunk_of_the_record_has_just_begun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record is kept in chunks of steps: right after one is whole, the newest holds a few
    steps; the panel draws the steps of the chunk before too."""
    monkeypatch.setattr(written_scalars, "CHUNK_STEPS", 20)
    layout = JobLayout.for_job("new-chunk", str(tmp_path))
    write_steps(Path(layout.debug_output), range(25))
    record = ScalarChunkWriter(layout.debug_output, "worker_0")
    keep_records(record, range(25))
    record.flush()
    shown = JobProgress(layout).snapshot(running("new-chunk"))
    # From step 0 on (the newest chunk holds steps 20-24), falling as the losses fell.
    losses = shown.recent_losses
    assert len(losses) >= 24 and losses[0] == 2.0 and losses[-1] == pytest.approx(2.0 - 24 / 30)
    assert list(losses) == sorted(losses, reverse=True)
    assert shown.loss_where == "TRAIN step 24"


class LooksForAttention(Rule):
    """A custom rule whose tensor the job never saves: it can judge no step."""

    def invoke_at_step(self, step: int) -> bool:
        return bool(self.base_trial.tensor("attention_output_0").value(step).max() > 1)


def write_steps(out: Path, steps: range) -> None:
    write_collections_file(str(out), "worker_0", {}, num_workers=1)
    for step in steps:
        with StepWriter(str(out), step, "worker_0") as writer:
            writer.add("loss_output_0", np.float32(1.0), mode=ModeKeys.TRAIN, mode_step=step)


def test_a_debugging_rules_row_counts_what_it_checked_while_the_job_runs(tmp_path: Path) -> None:
    layout = JobLayout.for_job("counted", str(tmp_path))
    write_steps(Path(layout.debug_output), range(3))
    runner = RuleRunner(
        RuleDefinition.for_class(LooksForAttention),
        layout.debug_output,
        output_dir=layout.rule_output,
        poll_interval=0.02,
    )
    follower = threading.Thread(target=runner.run)
    follower.start()
    directory = layout.rule_output_dir("LooksForAttention")
    deadline = time.monotonic() + 30
    while (status := read_status(directory)) is None or not status.steps_skipped:
        assert time.monotonic() < deadline, "the rule wrote no count"
        time.sleep(0.02)
    progress = JobProgress(layout)

    def described(rule_status: str) -> dict[str, object]:
        """DescribeTrainingJob's answer, the rule's status as ``rule_status``."""
        written = read_status(directory)
        assert written is not None
        return {
            "TrainingJobName": "counted",
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Training",
            "DebugRuleEvaluationStatuses": [
                {
                    "RuleConfigurationName": "LooksForAttention",
                    "RuleEvaluationStatus": rule_status,
                    "StatusDetails": written.status_details,
                }
            ],
        }

    # While the training runs: the steps it skipped and the lookup that found nothing.
    shown = row(rendered(progress.snapshot(described("InProgress")), width=200), "rules")
    assert shown.startswith("rules LooksForAttention InProgress 0 steps evaluated, ")
    assert shown.endswith(" skipped, 0 tensors checked, 1 lookup matched nothing")
    write_training_end(layout.debug_output)
    follower.join(timeout=30)
    final = read_status(directory)
    assert final is not None and final.rule_evaluation_status == "Error"
    lines = rendered(progress.snapshot(described("Error")), width=200)
    assert row(lines, "rules") == (
        "rules LooksForAttention Error 0 steps evaluated, 3 skipped, 0 tensors checked, "
        "1 lookup matched nothing"
    )
    assert "LooksForAttention checked no tensor" in row(lines, "LooksForAttention")


# ----- a real run under a pseudo-terminal ---------------------------------------------------


def run_in_terminal(
    tmp_path: Path, *arguments: str, term: str = "xterm-256color"
) -> tuple[int, list[str]]:
    """Run ``trainprobe run ARGUMENTS`` with a 120x40 pseudo-terminal as its stdout and stderr;
    its exit status and what the terminal received, less the control sequences."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}
    }
    environment.update(TRAINPROBE_HOME=str(tmp_path / "home"), TERM=term, COLUMNS="120", LINES="40")
    running = subprocess.Popen(
        [sys.executable, "-m", "trainprobe.cli.main", "run", *arguments],
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
        env=environment,
        cwd=tmp_path,
    )
    os.close(terminal)
    received = bytearray()
    try:
        while True:
            ready, _, _ = select.select([controller], [], [], 300)
            if not ready:
                running.kill()
                pytest.fail("trainprobe run printed nothing for 300 s")
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal closed: the command has ended
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(controller)
        status = running.wait(timeout=60)
    return status, screen_lines(received.decode("utf-8", "replace"))


def panel_rows(lines: list[str], label: str) -> list[str]:
    """Every drawing of the panel row ``label`` (its words, without the border)."""
    rows = [line.strip("│ ").split() for line in lines if line.startswith("│")]
    return [" ".join(words) for words in rows if words and words[0] == label]


def statuses_of(lines: list[str], rule: str) -> list[str]:
    """The statuses a rule's panel row showed, in order, each change once (its counts and the
    line of its details under the rows left out)."""
    shown: list[str] = []
    for line in lines:
        words = line.strip("│ ").split()
        if words[:1] == ["rules"]:
            words = words[1:]
        if line.startswith("│") and len(words) >= 2 and words[0] == rule and words[1] in STATUSES:
            status = words[1]
            if not shown or shown[-1] != status:
                shown.append(status)
    return shown


@pytest.mark.slow
def test_a_run_on_a_terminal_shows_the_live_panel_then_verdicts_and_outputs(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    status, lines = run_in_terminal(
        tmp_path,
        str(TRAINING),
        "--rule",
        "ExplodingTensor",
        "--rule",
        "LossNotDecreasing:num_steps=2",
        "--save-interval",
        "1",
        "--output",
        str(out),
        "--name",
        "live-healthy",
        "--",
        "--steps",
        "30",
        "--sleep",
        "0.1",
    )
    assert status == 0, "\n".join(lines)
    job_dir = out / "live-healthy"
    assert f"[trainprobe] job live-healthy started; its files are in {job_dir}" in lines
    # The training's output, whole lines above the panel; no plain progress lines.
    assert "arguments: ['--steps', '30', '--sleep', '0.1']" in lines and "finished" in lines
    assert not any(line.startswith("[trainprobe] step") for line in lines)
    # The panel: the job's status, the steps, each rule's status as it changed.
    assert "job InProgress (Training)" in " ".join(panel_rows(lines, "job"))
    steps = [int(row.split()[1]) for row in panel_rows(lines, "step") if row != "step"]
    assert steps and steps[-1] == 29
    assert any("steps/s" in words for words in panel_rows(lines, "step"))
    assert statuses_of(lines, "ExplodingTensor") == ["InProgress", "NoIssuesFound"]
    assert statuses_of(lines, "LossNotDecreasing") == ["InProgress", "NoIssuesFound"]
    # Beside its status, what the rule checked.
    drawn = [" ".join(line.strip("│ ").split()) for line in lines if line.startswith("│")]
    assert any(
        "ExplodingTensor NoIssuesFound 30 steps evaluated, 0 skipped, " in row for row in drawn
    )
    assert any(
        re.fullmatch(r"system CPU \d+% memory \d+%", words) for words in panel_rows(lines, "system")
    )
    # The last panel shows the loss saved at the last step, after a sparkline of every step's
    # loss the hook recorded (the training's loss falls: its bars go down).
    loss = saved_loss(str(job_dir / "debug-output"), 29)
    assert loss is not None
    shown = panel_rows(lines, "loss")[-1]
    assert shown.startswith(f"loss {loss:.5g} ") and shown.endswith(" TRAIN step 29"), shown
    bars = shown.split()[2]
    assert len(bars) == 30 and set(bars) <= set("▁▂▃▄▅▆▇█") and bars[0] > bars[-1], shown
    # Then the verdicts and where the outputs are.
    summary = lines[lines.index("Training job live-healthy: Completed") :]
    assert "  ExplodingTensor: NoIssuesFound" in summary
    assert "    Steps evaluated: 30" in summary
    assert f"  tensors:   {job_dir / 'debug-output'}" in summary
    assert f"  logs:      {job_dir / 'logs'}" in summary


@pytest.mark.slow
def test_an_issue_on_a_terminal_is_shown_with_its_evidence_and_fails_the_run(
    tmp_path: Path,
) -> None:
    status, lines = run_in_terminal(
        tmp_path,
        str(TRAINING),
        "--rule",
        "ExplodingTensor",
        "--stop-on-issue",
        "--fail-on-issue",
        "--save-interval",
        "1",
        "--no-profiler",
        "--name",
        "live-nan",
        "--",
        "--steps",
        "100000",
        "--sleep",
        "0.05",
        "--nan-at",
        "5",
    )
    assert status == 1, "\n".join(lines)
    assert statuses_of(lines, "ExplodingTensor")[-1] == "IssuesFound"
    assert any(
        line.startswith("[trainprobe] rule ExplodingTensor: IssuesFound: ") for line in lines
    )
    summary = lines[lines.index("Training job live-nan: Stopped") :]
    assert "  ExplodingTensor: IssuesFound" in summary
    start = summary.index("    Evidence at TRAIN step 5:") + 1
    origin, evidence = summary[start], summary[start + 1 : start + 12]
    # The weights were set to NaN between two steps: the guard names the parameter.
    assert "step 5: first NaN in the parameter `Sequential_0.weight`, before" in origin
    assert any("NaN" in line and "CrossEntropyLoss_output_0" in line for line in evidence)
    # Without the system monitor there is nothing to show on the system row.
    assert set(panel_rows(lines, "system")) <= {"system"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("option", "term"), [("--plain", "xterm-256color"), (None, "dumb")], ids=["plain", "dumb"]
)
def test_plain_lines_on_a_terminal_with_plain_or_a_dumb_terminal(
    tmp_path: Path, option: str | None, term: str
) -> None:
    options = [option] if option else []
    status, lines = run_in_terminal(
        tmp_path,
        str(TRAINING),
        *options,
        "--no-profiler",
        "--name",
        "live-plain",
        "--",
        "--steps",
        "3",
        term=term,
    )
    assert status == 0, "\n".join(lines)
    assert "[trainprobe] job live-plain: InProgress (Training)" in lines
    assert "Training job live-plain: Completed" in lines
    assert not any("╭" in line or line.startswith("│") for line in lines)

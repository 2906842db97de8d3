"""Following a job that ``trainprobe run`` started, to its end.

The progress as the job goes (``trainprobe.cli.job_follower``: plain lines or the live panel);
each rule's verdict the moment the job and every rule have reached their final status; then,
once the job's runner is done (the profiler report written), where the job's files and report
are. Ctrl-C stops the job, a second leaves it running.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from trainprobe.cli.job_follower import (
    Follower,
    LiveFollower,
    PlainFollower,
    debugging_rule_names,
    say,
)
from trainprobe.config.errors import ConfigError
from trainprobe.config.statuses import (
    TERMINAL_JOB_STATUSES,
    RuleEvaluationStatus,
    TrainingJobStatus,
)
from trainprobe.jobs import JobStore, describe_training_job, stop_training_job
from trainprobe.jobs.operations.describe import is_final, layout_of, rule_evaluation_statuses
from trainprobe.jobs.operations.progress import rule_verdict
from trainprobe.storage import files
from trainprobe.storage.job_layout import PROFILER_REPORT_HTML, JobLayout
from trainprobe.ui.address_file import running_ui

__all__ = ["POLL_SECONDS", "follow_run"]

POLL_SECONDS = 0.5
_END_POLL_SECONDS = 0.1
"""How often the job is looked at once the training has ended: the verdicts, then the report,
come within a second or two."""
_CTRL_C = "Stopped with Ctrl-C in trainprobe run"


def follow_run(store: JobStore, name: str, *, live: bool, quiet: bool, fail_on_issue: bool) -> int:
    """Follow the job ``name`` to its end (see the module docstring), with the live panel when
    ``live``, without the training's output when ``quiet``; the exit status (with
    ``fail_on_issue``, 1 when a rule found an issue)."""
    asked = {"TrainingJobName": name}
    record = store.get(name)
    assert record is not None
    layout = layout_of(record)
    say(f"job {name} started; its files are in {layout.job_dir}")
    ui = running_ui()
    if ui is not None:
        say(f"job page: {ui.job_page(name)}")
    follower: Follower = LiveFollower(layout, quiet) if live else PlainFollower(layout, quiet)
    interrupted = False
    verdicts: dict[str, Any] | None = None
    try:
        while True:
            try:
                if verdicts is None:
                    description = describe_training_job(asked, store=store)
                    follower.show(description)
                    if is_final(description):
                        # The verdicts as soon as they are known; the report comes after.
                        verdicts = description
                        follower.show(description, final=True)
                        follower.finish(_verdicts(description, layout))
                if verdicts is not None and _runner_done(store, name):
                    break
                ended = description["TrainingJobStatus"] in TERMINAL_JOB_STATUSES
                time.sleep(_END_POLL_SECONDS if ended else POLL_SECONDS)
            except KeyboardInterrupt:
                if interrupted:
                    say(f"leaving job {name} to finish on its own")
                    return 130
                interrupted = True
                say("stopping the job (Ctrl-C again to leave it running)")
                with contextlib.suppress(ConfigError):  # it may have just finished
                    stop_training_job(asked, store=store, reason=_CTRL_C)
        follower.finish(_outputs(description, layout))
    finally:
        follower.close()
    return _exit_status(description, fail_on_issue, interrupted)


def _runner_done(store: JobStore, name: str) -> bool:
    """Whether the job's runner has finished everything, the profiler report included (a
    runner that died is settled as done by the describe before this)."""
    record = store.get(name)
    return record is None or record.runner_done


def _report_path(layout: JobLayout) -> str | None:
    for relative in files.list_files(layout.rule_output, PROFILER_REPORT_HTML):
        if relative.rsplit("/", 1)[-1] == PROFILER_REPORT_HTML:
            return f"{layout.rule_output}/{relative}"
    return None


def _verdicts(description: dict[str, Any], layout: JobLayout) -> list[str]:
    """The end summary's first part: the job's status and each rule's verdict."""
    status = description["TrainingJobStatus"]
    lines = ["", f"Training job {description['TrainingJobName']}: {status}"]
    if description["SecondaryStatus"] != status:
        lines[-1] += f" ({description['SecondaryStatus']})"
    if description.get("FailureReason"):
        lines += [f"  {line}" for line in description["FailureReason"].splitlines()]
    statuses = rule_evaluation_statuses(description)
    debugging = debugging_rule_names(description)
    if statuses:
        lines += ["", "Rules:"]
        for rule in statuses:
            name = rule["RuleConfigurationName"]
            verdict = rule_verdict(
                layout.rule_output_dir(name),
                name,
                rule["RuleEvaluationStatus"],
                rule["StatusDetails"],
                counts_steps=name in debugging,
            )
            lines += [f"  {line}" for line in verdict.lines()]
    return lines


def _outputs(description: dict[str, Any], layout: JobLayout) -> list[str]:
    """The end summary's second part, once the runner is done: where the job's files and its
    report are."""
    lines = [
        "",
        "Outputs:",
        f"  tensors:   {layout.debug_output}",
        f"  profiler:  {layout.profiler_output}",
        f"  rules:     {layout.rule_output}",
    ]
    if "TensorBoardOutputConfig" in description:
        lines.append(f"  tensorboard: {layout.tensorboard_output}")
    lines.append(f"  model:     {layout.model_dir}")
    lines.append(f"  logs:      {layout.logs_dir}")
    report = _report_path(layout)
    if report is not None:
        lines.append(f"Report: {report}")
    return lines


def _exit_status(description: dict[str, Any], fail_on_issue: bool, interrupted: bool) -> int:
    if interrupted:
        return 130
    if description["TrainingJobStatus"] == TrainingJobStatus.FAILED:
        return 1
    issues = any(
        rule["RuleEvaluationStatus"] == RuleEvaluationStatus.ISSUES_FOUND
        for rule in rule_evaluation_statuses(description)
    )
    return 1 if fail_on_issue and issues else 0

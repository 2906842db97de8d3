"""``python -m trainprobe.jobs.supervisor``: the runner of one job, in its own process.

The launcher starts one per job. It follows the job's launch plan:

1. starts one evaluator process per debugging rule (``trainprobe.jobs.rule_process``) and one
   for all the profiler rules (``python -m trainprobe.rules.profiler``);
2. starts the training (``trainprobe.jobs.training_process``) and the system monitor watching
   it, and says the job is Training;
3. until the training ends, looks every ``TICK_SECONDS`` (and at once when woken by SIGUSR1)
   at the job store: for profiler rules added by UpdateTrainingJob, which it starts in one more
   profiler rules process per update (the process reads the profiler data from the job's
   beginning, so the rules judge the whole job), and for a reason to stop the training: a rule's
   StopTraining request in the tensor output, a StopTrainingJob request in the job store,
   MaxRuntimeInSeconds reached, or SIGTERM to the runner itself. To stop, it signals the
   training's process group (SIGTERM, then SIGKILL after ``STOP_GRACE_SECONDS``);
4. records how the training ended: Completed; Stopped with the reason (MaxRuntimeExceeded for the
   runtime limit); or Failed with the last lines of the training's error output. From then on
   the job cannot be updated, so it starts the profiler rules of an update that came meanwhile;
5. marks the tensor output as ended (``training_job_end.ts``) if the training could not, so the
   rules finish on the data there is; waits for the monitor, then marks the profiler output as
   ended too; waits for the rules (``RULES_GRACE_SECONDS`` at most, then stops them), writes
   the profiler report of each ProfilerReport rule (``trainprobe.report``; also every
   ``REPORT_EVERY_SECONDS`` while the training runs) and the XGBoost report of each
   CreateXgboostReport rule (``trainprobe.report.xgboost``), and says it is done.

All along it beats in the job store (``trainprobe.jobs.liveness``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

from trainprobe.capture.stop_request import read_stop_request
from trainprobe.jobs.launch_plan import RUNNER_PID_VARIABLE, LaunchPlan
from trainprobe.jobs.layout import JobLayout
from trainprobe.jobs.liveness import HEARTBEAT_SECONDS, process_start_time
from trainprobe.jobs.rule_statuses import record_rules_not_started
from trainprobe.jobs.runner_watch import WAKE_SIGNAL
from trainprobe.jobs.store import JobRecord, JobStore
from trainprobe.jobs.training_process import TrainingProcess, describe_exit
from trainprobe.storage.training_end import training_has_ended, write_training_end

__all__ = ["JobRunner", "main"]

log = logging.getLogger("trainprobe.jobs.runner")

TICK_SECONDS = 0.2
STOP_GRACE_SECONDS = float(os.environ.get("TRAINPROBE_STOP_GRACE_SECONDS", "10"))
RULES_GRACE_SECONDS = 600.0
REPORT_GRACE_SECONDS = 300.0
REPORT_EVERY_SECONDS = float(os.environ.get("TRAINPROBE_REPORT_EVERY_SECONDS", "600"))
PROFILER_REPORT = "ProfilerReport"
XGBOOST_REPORT = "CreateXgboostReport"
MONITOR_GRACE_SECONDS = 10.0
_FAILURE_REASON_LIMIT = 1024


class _Stop:
    """Why the training is being stopped: the job's final secondary status and the reason."""

    def __init__(self, secondary_status: str, reason: str) -> None:
        self.secondary_status = secondary_status
        self.reason = reason


class JobRunner:
    """Runs the job ``name`` of ``store`` (see the module docstring)."""

    def __init__(self, store: JobStore, name: str) -> None:
        record = store.get(name)
        if record is None:
            raise LookupError(f"no job {name!r} in {store.path}")
        self.store = store
        self.name = record.name
        self.plan = LaunchPlan.read(record.job_dir)
        self.layout: JobLayout = self.plan.layout
        self.created = record.creation_time
        self.wake = threading.Event()
        self._signalled: _Stop | None = None
        self._done = threading.Event()
        self.rules: list[subprocess.Popen[bytes]] = []
        self.profiler_rules_started: set[str] = set()
        self.reports: list[subprocess.Popen[bytes]] = []
        self._reported_at = time.monotonic()
        """The profiler rules an evaluator process was started for (or could not be)."""
        self._at_start = True
        self._added_processes = 0
        self.monitor: subprocess.Popen[bytes] | None = None
        self.training: TrainingProcess | None = None

    # ----- the run ----------------------------------------------------------------------

    def run(self) -> None:
        """Run the job to its end; any failure of the runner itself fails the job."""
        self.store.update(
            self.name,
            runner_pid=os.getpid(),
            runner_host=socket.gethostname(),
            runner_started=process_start_time(os.getpid()),
            heartbeat_time=time.time(),
            touch=False,
        )
        beats = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        beats.start()
        try:
            self._run()
        except Exception as error:
            log.exception("the job runner failed")
            if self.training is not None and self.training.poll() is None:
                self.training.stop(STOP_GRACE_SECONDS)
            self.store.transition(
                self.name,
                "Failed",
                "Failed",
                "The job runner failed",
                only_if_status=("InProgress", "Stopping"),
                failure_reason=f"InternalServerError: the job runner failed: {error!r}",
                training_end_time=time.time(),
            )
            self._stop_rules()
        finally:
            self._done.set()
            self.store.update(self.name, runner_done=True, heartbeat_time=time.time(), touch=False)

    def _run(self) -> None:
        record = self.store.get(self.name)
        assert record is not None
        self._start_rules()
        self._start_profiler_rules(record)
        environment = {
            **os.environ,
            **self.plan.environment,
            RUNNER_PID_VARIABLE: str(os.getpid()),
        }
        log.info("starting the training: %s", " ".join(self.plan.command))
        try:
            self.training = TrainingProcess(
                self.plan.command,
                cwd=self.plan.working_dir,
                environment=environment,
                log_path=self.layout.training_log,
            )
        except OSError as error:
            self._finish_training(
                "Failed", "Failed", f"AlgorithmError: the training could not start: {error}"
            )
            return
        self.store.transition(
            self.name,
            "InProgress",
            "Training",
            "Training in progress",
            only_if_status=("InProgress",),
            training_start_time=self.training.started,
        )
        self._start_monitor(self.training.pid)
        stop = self._follow(self.training)
        returncode = self.training.poll()
        if stop is not None:
            self.store.transition(
                self.name, "Stopping", "Stopping", stop.reason, only_if_status=("InProgress",)
            )
            log.info("stopping the training: %s", stop.reason)
            returncode = self.training.stop(STOP_GRACE_SECONDS)
        assert returncode is not None
        self.training.finish()
        log.info("the training %s", describe_exit(returncode))
        if stop is None:
            stop = self._rule_stop()  # the hook may have stopped the training itself
        if stop is not None:
            self._finish_training("Stopped", stop.secondary_status, stop.reason)
        elif returncode == 0:
            self._finish_training("Completed", "Completed", "Training job completed")
        else:
            self._finish_training("Failed", "Failed", self._failure_reason(returncode))
        self._wind_down()

    def _follow(self, training: TrainingProcess) -> _Stop | None:
        deadline = None
        if self.plan.max_runtime_seconds is not None:
            deadline = time.monotonic() + self.plan.max_runtime_seconds
        while training.poll() is None:
            record = self.store.get(self.name)
            if record is not None:
                self._start_profiler_rules(record)
                self._refresh_reports(record)
            stop = self._signalled or self._rule_stop() or self._requested_stop(record)
            if stop is None and deadline is not None and time.monotonic() >= deadline:
                seconds = self.plan.max_runtime_seconds
                stop = _Stop(
                    "MaxRuntimeExceeded",
                    f"Training job reached its MaxRuntimeInSeconds of {seconds} s and was stopped",
                )
            if stop is not None:
                return stop
            self.wake.wait(TICK_SECONDS)
            self.wake.clear()
        return None

    # ----- reasons to stop --------------------------------------------------------------

    def _rule_stop(self) -> _Stop | None:
        request = read_stop_request(self.layout.debug_output)
        if request is None or request.time < self.created:
            return None
        where = f" at step {request.step}" if request.step is not None else ""
        reason = f"Stopped by rule {request.rule}'s StopTraining action: issue found{where}"
        return _Stop("Stopped", f"{reason}: {request.message}" if request.message else reason)

    def _requested_stop(self, record: JobRecord | None) -> _Stop | None:
        if record is None or not record.stop_reason:
            return None
        return _Stop("Stopped", record.stop_reason)

    def stop_on_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM to the runner: stop the training as StopTrainingJob would."""
        self._signalled = _Stop("Stopped", f"The job runner received {signal.Signals(signum).name}")
        self.wake.set()

    def wake_on_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGUSR1: something changed (a rule asked to stop); look now."""
        self.wake.set()

    # ----- the end ----------------------------------------------------------------------

    def _failure_reason(self, returncode: int) -> str:
        assert self.training is not None
        text = f"AlgorithmError: the training {describe_exit(returncode)}"
        tail = self.training.error_tail()
        if tail:
            text += ". The last lines of its error output:\n" + "\n".join(tail)
        if len(text) > _FAILURE_REASON_LIMIT:
            head = text.split("\n", 1)[0]
            keep = _FAILURE_REASON_LIMIT - len(head) - 5
            text = head + "\n...\n" + text[len(text) - keep :]
        return text

    def _finish_training(self, status: str, secondary_status: str, reason: str) -> None:
        self.store.transition(
            self.name,
            status,
            secondary_status,
            reason,
            only_if_status=("InProgress", "Stopping"),
            failure_reason=None if status == "Completed" else reason,
            training_end_time=time.time(),
        )
        log.info("the job is %s (%s): %s", status, secondary_status, reason)

    def _wind_down(self) -> None:
        # The job can no longer be updated: start the rules of an update that came meanwhile.
        record = self.store.get(self.name)
        if record is not None:
            self._start_profiler_rules(record)
        if not training_has_ended(self.layout.debug_output):
            # The training could not say it ended (a crash, a kill): say it for it, so the
            # rules conclude on the steps it saved.
            write_training_end(self.layout.debug_output)
        if self.monitor is not None:
            # The monitor ends with the training it watches; then the profiler data is whole,
            # and the profiler rules may conclude.
            try:
                self.monitor.wait(timeout=MONITOR_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.monitor.terminate()
                self.monitor.wait()
        write_training_end(self.layout.profiler_output)
        deadline = time.monotonic() + RULES_GRACE_SECONDS
        while any(process.poll() is None for process in self.rules):
            if self._signalled is not None or time.monotonic() > deadline:
                log.info("stopping the rules that have not finished")
                break
            self.wake.wait(TICK_SECONDS)
            self.wake.clear()
        self._stop_rules()
        if self._signalled is None:
            self._write_reports()
        if self.monitor is not None:
            try:
                self.monitor.wait(timeout=MONITOR_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.monitor.terminate()
                self.monitor.wait()

    def _refresh_reports(self, record: JobRecord) -> None:
        """Rewrite the profiler reports every ``REPORT_EVERY_SECONDS`` of a long job, so that a
        look at them before its end finds them recent."""
        if time.monotonic() - self._reported_at < REPORT_EVERY_SECONDS:
            return
        if any(process.poll() is None for process in self.reports):
            return  # the previous ones are still being written
        self._reported_at = time.monotonic()
        self.reports = self._start_reports(record)

    def _write_reports(self) -> None:
        """Write the final profiler reports, once the rules have concluded
        (``REPORT_GRACE_SECONDS`` at most)."""
        record = self.store.get(self.name)
        for process in self.reports:
            _wait_or_kill(process, REPORT_GRACE_SECONDS)
        self.reports = self._start_reports(record) if record is not None else []
        for process in self.reports:
            if not _wait_or_kill(process, REPORT_GRACE_SECONDS):
                log.warning("the report took over %.0f s: stopped", REPORT_GRACE_SECONDS)

    def _start_reports(self, record: JobRecord) -> list[subprocess.Popen[bytes]]:
        """Start writing the report beside each ProfilerReport rule's data, in a process of
        its own."""
        started = []
        for entry in record.profiler_rules:
            parameters = entry.get("RuleParameters") or {}
            if parameters.get("rule_to_invoke") != PROFILER_REPORT:
                continue
            rule_output = self.layout.rule_output_dir(str(entry.get("RuleConfigurationName")))
            command = [
                self.plan.python,
                "-m",
                "trainprobe.report",
                rule_output,
                "--profiler-output",
                self.layout.profiler_output,
                "--debug-output",
                self.layout.debug_output,
            ]
            started.append(_spawn(command, self.layout.report_log, cwd=self.layout.job_dir))
        for entry in self.plan.debug_rules:
            parameters = entry.get("RuleParameters") or {}
            if parameters.get("rule_to_invoke") != XGBOOST_REPORT:
                continue
            rule_output = self.layout.rule_output_dir(str(entry.get("RuleConfigurationName")))
            command = [
                self.plan.python,
                "-m",
                "trainprobe.report.xgboost",
                rule_output,
                "--debug-output",
                self.layout.debug_output,
            ]
            started.append(_spawn(command, self.layout.report_log, cwd=self.layout.job_dir))
        return started

    def _stop_rules(self) -> None:
        running = [process for process in self.rules if process.poll() is None]
        for process in running:
            process.terminate()
        for process in running:
            try:
                process.wait(timeout=MONITOR_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    # ----- helpers ----------------------------------------------------------------------

    def _beat(self) -> None:
        while not self._done.wait(HEARTBEAT_SECONDS):
            try:
                self.store.heartbeat(self.name)
            except Exception:
                log.exception("could not record the heartbeat")

    def _start_rules(self) -> None:
        for index, entry in enumerate(self.plan.debug_rules):
            name = str(entry.get("RuleConfigurationName"))
            self.rules.append(
                _spawn(
                    [
                        self.plan.python,
                        "-m",
                        "trainprobe.jobs.rule_process",
                        "--launch-file",
                        self.layout.launch_file,
                        "--index",
                        str(index),
                        "--runner-pid",
                        str(os.getpid()),
                    ],
                    self.layout.rule_log(name),
                    cwd=self.plan.rules_working_dir,
                )
            )
        if self.rules:
            log.info("started %d rule evaluator(s)", len(self.rules))

    def _start_profiler_rules(self, record: JobRecord) -> None:
        """Start one process evaluating those of the job's profiler rules that none evaluates
        yet: at the start, the rules given at creation; later, those an UpdateTrainingJob added.
        Each process reads the job's profiler output from its beginning."""
        entries = [
            entry
            for entry in record.profiler_rules
            if str(entry.get("RuleConfigurationName")) not in self.profiler_rules_started
        ]
        added = not self._at_start
        self._at_start = False
        if not entries:
            return
        self.profiler_rules_started.update(
            str(entry.get("RuleConfigurationName")) for entry in entries
        )
        suffix = ""
        if added:
            self._added_processes += 1
            suffix = f"-added-{self._added_processes}"
        try:
            process = self._spawn_profiler_rules(suffix, entries, record.profiler_config)
        except OSError as error:
            # Rules that cannot start must not end the job: they end in Error, saying why.
            log.exception("could not start the profiler rules %s", suffix)
            record_rules_not_started(
                self.layout, entries, f"the profiler rule evaluator could not be started: {error}"
            )
            return
        self.rules.append(process)
        if added:
            names = ", ".join(str(entry.get("RuleConfigurationName")) for entry in entries)
            log.info("started the profiler rules added by UpdateTrainingJob: %s", names)

    def _spawn_profiler_rules(
        self, suffix: str, entries: list[dict[str, Any]], profiler_config: Mapping[str, Any] | None
    ) -> subprocess.Popen[bytes]:
        request_file = os.path.join(self.layout.config_dir, f"profilerrules{suffix}.json")
        with open(request_file, "w", encoding="utf-8") as file:
            json.dump(entries, file)
        command = [
            self.plan.python,
            "-m",
            "trainprobe.rules.profiler",
            self.layout.profiler_output,
            "--rule-output",
            self.layout.rule_output,
            "--request",
            request_file,
        ]
        if not _framework_profiling(profiler_config):
            # The step timeline will never come: rules that need it say so instead of waiting.
            command.append("--no-framework-profiling")
        log_file = self.layout.rule_log(f"profiler-rules{suffix}")
        return _spawn(command, log_file, cwd=self.layout.job_dir)

    def _start_monitor(self, training_pid: int) -> None:
        self.monitor = _spawn(
            [
                self.plan.python,
                "-m",
                "trainprobe.capture.system_monitor",
                "--out",
                self.layout.profiler_output,
                "--interval-ms",
                str(self.plan.monitor_interval_ms),
                "--pid",
                str(training_pid),
                "--config",
                self.layout.profiler_config_file,
            ],
            self.layout.monitor_log,
            cwd=self.layout.job_dir,
        )


def _framework_profiling(profiler_config: Mapping[str, Any] | None) -> bool:
    """Whether the job's ProfilerConfig (the one in force) turns the framework profiler, and so
    its step timeline, on."""
    if profiler_config is None:
        return False
    return "ProfilingParameters" in profiler_config and not profiler_config.get(
        "DisableProfiler", False
    )


def _wait_or_kill(process: subprocess.Popen[bytes], seconds: float) -> bool:
    """Wait ``seconds`` at most for ``process`` to end, then kill it; whether it ended."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False
    return True


def _spawn(command: list[str], log_path: str, *, cwd: str) -> subprocess.Popen[bytes]:
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "ab") as output:
        return subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one job from the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m trainprobe.jobs.supervisor")
    parser.add_argument("--store", required=True, help="the job store's SQLite file")
    parser.add_argument("--job", required=True, help="the training job's name")
    arguments = parser.parse_args(argv)
    logging.basicConfig(
        format="%(asctime)s %(name)s: %(message)s", level=logging.INFO, stream=sys.stderr
    )
    runner = JobRunner(JobStore(arguments.store), arguments.job)
    signal.signal(signal.SIGTERM, runner.stop_on_signal)
    signal.signal(WAKE_SIGNAL, runner.wake_on_signal)
    runner.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m trainprobe.jobs.runner.job_runner``: the runner of one job, in its own process.

The launcher starts one per job. It follows the job's launch plan:

1. starts the training of each of the job's hosts (``trainprobe.jobs.runner.host_trainings``: one
   host, or ``algo-1`` ... ``algo-N`` as torchrun nodes, ``trainprobe.jobs.runner.hosts``) and a
   system monitor watching each, and says the job is Training; a host whose training ends badly ends
   the training of every host;
2. starts the rule evaluators (``trainprobe.jobs.runner.job_rules``): the built-in debugging rules
   in one process, each custom rule in one, the profiler rules in one, at a lower CPU priority,
   with a memory limit and a share of the cores (``trainprobe.jobs.runner.process_settings``). They
   come second, and the runner imports what they need only then, so that nothing stands between
   the command and the training's start (the rules wait for the training's data anyway);
3. until the training ends, looks every ``TICK_SECONDS`` (and at once when woken by SIGUSR1)
   at the job store: for profiler rules added by UpdateTrainingJob, which it starts in one more
   profiler rules process per update (the process reads the profiler data from the job's
   beginning, so the rules judge the whole job), and for a reason to stop the training: a rule's
   StopTraining request in the tensor output, a StopTrainingJob request in the job store,
   MaxRuntimeInSeconds reached, or SIGTERM to the runner itself. To stop, it signals the
   training's process group (SIGTERM, then SIGKILL after the stop grace). Each tick it also
   looks after the rules: an evaluator that died or is stuck is ended and its rules recorded as
   Error with the reason, while the training and the other rules go on;
4. records how the training ended: Completed; Stopped with the reason (MaxRuntimeExceeded for the
   runtime limit); or Failed with the last lines of the training's error output. From then on
   the job cannot be updated, so it starts the profiler rules of an update that came meanwhile;
5. marks the tensor output as ended (``training_job_end.ts``) if the training could not, so the
   rules finish on the data there is; stops the monitor (it writes out what it sampled), then
   marks the profiler output as ended too; waits for the rules (``RULES_GRACE_SECONDS`` at most,
   then stops them), writes the profiler report of each ProfilerReport rule
   (``trainprobe.report``; also every ``TRAINPROBE_REPORT_EVERY_SECONDS`` while the training
   runs) and the XGBoost report of each CreateXgboostReport rule (``trainprobe.report.xgboost``),
   and says it is done.

All along it beats in the job store (``trainprobe.jobs.runner.liveness``). Every process it starts
is a ``trainprobe.jobs.child_process.ChildProcess``: in a group of its own, ended the one way, and
ended with the runner if the runner is killed.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainprobe import settings
from trainprobe.config.statuses import SecondaryStatus, TrainingJobStatus
from trainprobe.jobs.child_process import ChildProcess, describe_exit, stop_together
from trainprobe.jobs.launch_plan import LaunchPlan
from trainprobe.jobs.processes.runner_watch import WAKE_SIGNAL
from trainprobe.jobs.processes.signal_relay import relay_signals
from trainprobe.jobs.runner.host_trainings import HostTrainings
from trainprobe.jobs.runner.hosts import Rendezvous, host_launch, start_monitor
from trainprobe.jobs.runner.liveness import HEARTBEAT_SECONDS, process_identity, process_start_time
from trainprobe.jobs.runner.process_settings import ProcessSettings, process_settings
from trainprobe.jobs.runner.saving_watch import SavingWatch
from trainprobe.jobs.store import JobRecord, JobStore
from trainprobe.storage.job_layout import JobLayout
from trainprobe.storage.stop_request import read_stop_request
from trainprobe.storage.training_end import training_has_ended, write_training_end

if TYPE_CHECKING:
    from trainprobe.jobs.runner.job_rules import JobRules

__all__ = ["JobRunner", "main"]

log = logging.getLogger("trainprobe.jobs.runner")

TICK_SECONDS = 0.2
RULES_GRACE_SECONDS = 600.0
REPORT_GRACE_SECONDS = 300.0
PROFILER_REPORT = "ProfilerReport"
XGBOOST_REPORT = "CreateXgboostReport"
_FAILURE_REASON_LIMIT = 1024


@dataclass(frozen=True)
class _Stop:
    """Why the training is being stopped: the job's final secondary status and the reason."""

    secondary_status: SecondaryStatus
    reason: str


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
        self.settings = ProcessSettings()
        self.rules: JobRules | None = None
        self.reports: list[ChildProcess] = []
        self._reported_at = time.monotonic()
        self.monitors: list[ChildProcess] = []
        self.training: HostTrainings | None = None
        self.saving = SavingWatch(self.layout.debug_output)

    # ----- the run ----------------------------------------------------------------------

    def run(self) -> None:
        """Run the job to its end; any failure of the runner itself fails the job."""
        self.store.update(
            self.name,
            runner_pid=os.getpid(),
            runner_host=socket.gethostname(),
            runner_started=process_start_time(os.getpid()),
            runner_identity=process_identity(os.getpid()),
            heartbeat_time=time.time(),
            touch=False,
        )
        beats = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        beats.start()
        try:
            self._run()
        except Exception as error:
            log.exception("the job runner failed")
            if self.training is not None:
                self.training.stop(self.settings.stop_grace_seconds)
            self.store.transition(
                self.name,
                TrainingJobStatus.FAILED,
                SecondaryStatus.FAILED,
                "The job runner failed",
                only_if_status=(TrainingJobStatus.IN_PROGRESS, TrainingJobStatus.STOPPING),
                failure_reason=f"InternalServerError: the job runner failed: {error!r}",
                training_end_time=time.time(),
            )
            if self.rules is not None:
                self.rules.stop(self.settings.stop_grace_seconds, "the job runner failed")
        finally:
            if self.rules is not None:
                self.rules.executor.close()
            self._done.set()
            self.store.update(self.name, runner_done=True, heartbeat_time=time.time(), touch=False)

    def _run(self) -> None:
        record = self.store.get(self.name)
        assert record is not None
        self.settings = process_settings()
        environment = settings.child_environment(
            self.plan.environment, {settings.RUNNER_PID.name: str(os.getpid())}
        )
        count = self.plan.instance_count
        rendezvous = Rendezvous.on_loopback() if count > 1 else None
        launches = [host_launch(self.plan, rank, rendezvous) for rank in range(count)]
        for launch in launches:
            log.info("starting the training on %s: %s", launch.name, " ".join(launch.command))
        try:
            self.training = HostTrainings(
                launches,
                cwd=self.plan.working_dir,
                environment=environment,
                log_path=self.layout.training_log,
            )
        except OSError as error:
            reason = f"AlgorithmError: the training could not start: {error}"
            self._finish_training(TrainingJobStatus.FAILED, SecondaryStatus.FAILED, reason)
            self._job_rules().record_not_started(record.profiler_rules, reason)
            return
        self.store.transition(
            self.name,
            TrainingJobStatus.IN_PROGRESS,
            SecondaryStatus.TRAINING,
            "Training in progress",
            only_if_status=(TrainingJobStatus.IN_PROGRESS,),
            training_start_time=self.training.started,
        )
        for host, pid in self.training.pids().items():
            self._start_monitor(host, pid)
        self.rules = self._job_rules()
        self.rules.start_debugging_rules()
        self.rules.start_profiler_rules(record.profiler_rules, record.profiler_config, added=False)
        stop = self._follow(self.training)
        returncode = self.training.poll()
        if stop is not None:
            self.store.transition(
                self.name,
                TrainingJobStatus.STOPPING,
                SecondaryStatus.STOPPING,
                stop.reason,
                only_if_status=(TrainingJobStatus.IN_PROGRESS,),
            )
            log.info("stopping the training: %s", stop.reason)
            returncode = self.training.stop(self.settings.stop_grace_seconds)
        assert returncode is not None
        self.training.finish()
        log.info("the training %s", describe_exit(returncode))
        if stop is None:
            stop = self._rule_stop()  # the hook may have stopped the training itself
        self.saving.check(now=True)
        if stop is not None:
            self._finish_training(TrainingJobStatus.STOPPED, stop.secondary_status, stop.reason)
        elif returncode == 0:
            self._finish_training(
                TrainingJobStatus.COMPLETED, SecondaryStatus.COMPLETED, "Training job completed"
            )
        else:
            self._finish_training(
                TrainingJobStatus.FAILED, SecondaryStatus.FAILED, self._failure_reason(returncode)
            )
        self._wind_down()

    def _follow(self, training: HostTrainings) -> _Stop | None:
        deadline = None
        if self.plan.max_runtime_seconds is not None:
            deadline = time.monotonic() + self.plan.max_runtime_seconds
        while training.poll() is None:
            record = self.store.get(self.name)
            if record is not None:
                self._start_added_profiler_rules(record)
                self._refresh_reports(record)
            assert self.rules is not None
            self.rules.check()
            self._say_if_saving_stopped()
            stop = self._signalled or self._rule_stop() or self._requested_stop(record)
            if stop is None and deadline is not None and time.monotonic() >= deadline:
                seconds = self.plan.max_runtime_seconds
                stop = _Stop(
                    SecondaryStatus.MAX_RUNTIME_EXCEEDED,
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
        words = request.step_words
        where = f" at {words}" if words is not None else ""
        reason = f"Stopped by rule {request.rule}'s StopTraining action: issue found{where}"
        return _Stop(
            SecondaryStatus.STOPPED, f"{reason}: {request.message}" if request.message else reason
        )

    def _requested_stop(self, record: JobRecord | None) -> _Stop | None:
        if record is None or not record.stop_reason:
            return None
        return _Stop(SecondaryStatus.STOPPED, record.stop_reason)

    def on_signal(self, signum: int) -> None:
        """SIGTERM to the runner: stop the training as StopTrainingJob would. SIGUSR1
        (``WAKE_SIGNAL``): something changed (a rule asked to stop); look now."""
        if signum == signal.SIGTERM:
            name = signal.Signals(signum).name
            self._signalled = _Stop(SecondaryStatus.STOPPED, f"The job runner received {name}")
        self.wake.set()

    # ----- the end ----------------------------------------------------------------------

    def _failure_reason(self, returncode: int) -> str:
        assert self.training is not None
        host = self.training.failed_host
        where = f" on host {host}" if host is not None and self.plan.instance_count > 1 else ""
        text = f"AlgorithmError: the training{where} {describe_exit(returncode)}"
        tail = self.training.error_tail()
        if tail:
            text += ". The last lines of its error output:\n" + "\n".join(tail)
        if len(text) > _FAILURE_REASON_LIMIT:
            head = text.split("\n", 1)[0]
            keep = _FAILURE_REASON_LIMIT - len(head) - 5
            text = head + "\n...\n" + text[len(text) - keep :]
        return text

    def _say_if_saving_stopped(self) -> None:
        """Say in the job's description that the hook stopped saving, once it has."""
        news = self.saving.check()
        if news is None:
            return
        log.warning("%s", news)
        self.store.transition(
            self.name,
            TrainingJobStatus.IN_PROGRESS,
            SecondaryStatus.TRAINING,
            f"Training in progress. {news}",
            only_if_status=(TrainingJobStatus.IN_PROGRESS,),
        )

    def _finish_training(
        self, status: TrainingJobStatus, secondary_status: SecondaryStatus, reason: str
    ) -> None:
        message = reason
        if self.saving.message is not None:
            message = f"{reason}. {self.saving.message}"
        self.store.transition(
            self.name,
            status,
            secondary_status,
            message,
            only_if_status=(TrainingJobStatus.IN_PROGRESS, TrainingJobStatus.STOPPING),
            failure_reason=None if status == TrainingJobStatus.COMPLETED else reason,
            training_end_time=time.time(),
        )
        log.info("the job is %s (%s): %s", status, secondary_status, reason)

    def _wind_down(self) -> None:
        assert self.rules is not None
        # The job can no longer be updated: start the rules of an update that came meanwhile.
        record = self.store.get(self.name)
        if record is not None:
            self._start_added_profiler_rules(record)
        if not training_has_ended(self.layout.debug_output):
            # The training could not say it ended (a crash, a kill): say it for it, so the
            # rules conclude on the steps it saved.
            write_training_end(self.layout.debug_output)
        # The training has ended: each monitor, asked to stop (SIGTERM), writes out what it
        # sampled at once, where it would notice the end only at its next look; then the
        # profiler data is whole, and the profiler rules may conclude.
        stop_together(self.monitors, self.settings.stop_grace_seconds)
        write_training_end(self.layout.profiler_output)
        deadline = time.monotonic() + RULES_GRACE_SECONDS
        why = f"the job ended {RULES_GRACE_SECONDS:g} s ago"
        while self.rules.running():
            if self._signalled is not None:
                why = self._signalled.reason
                break
            if time.monotonic() > deadline:
                break
            self.wake.wait(TICK_SECONDS)
            self.wake.clear()
        if self.rules.running():
            log.info("stopping the rules that have not finished")
        self.rules.stop(self.settings.stop_grace_seconds, why)
        if self._signalled is None:
            self._write_reports()

    def _refresh_reports(self, record: JobRecord) -> None:
        """Rewrite the profiler reports every ``report_every_seconds`` of a long job, so that a
        look at them before its end finds them recent."""
        if time.monotonic() - self._reported_at < self.settings.report_every_seconds:
            return
        if any(process.running for process in self.reports):
            return  # the previous ones are still being written
        self._reported_at = time.monotonic()
        self.reports = self._start_reports(record)

    def _write_reports(self) -> None:
        """Write the final profiler reports, once the rules have concluded
        (``REPORT_GRACE_SECONDS`` at most)."""
        record = self.store.get(self.name)
        grace = self.settings.stop_grace_seconds
        for process in self.reports:
            process.finish(REPORT_GRACE_SECONDS, grace)
        self.reports = self._start_reports(record) if record is not None else []
        for process in self.reports:
            if not process.finish(REPORT_GRACE_SECONDS, grace):
                log.warning("the report took over %.0f s: stopped", REPORT_GRACE_SECONDS)

    def _start_reports(self, record: JobRecord) -> list[ChildProcess]:
        """Start writing the report beside each ProfilerReport rule's data and each
        CreateXgboostReport rule's, each in a process of its own."""
        commands = []
        for entry in record.profiler_rules:
            parameters = entry.get("RuleParameters") or {}
            if parameters.get("rule_to_invoke") != PROFILER_REPORT:
                continue
            rule_output = self.layout.rule_output_dir(str(entry.get("RuleConfigurationName")))
            commands.append(
                [
                    *(self.plan.python, "-m", "trainprobe.report", rule_output),
                    *("--profiler-output", self.layout.profiler_output),
                    *("--debug-output", self.layout.debug_output),
                ]
            )
        for entry in self.plan.debug_rules:
            parameters = entry.get("RuleParameters") or {}
            if parameters.get("rule_to_invoke") != XGBOOST_REPORT:
                continue
            rule_output = self.layout.rule_output_dir(str(entry.get("RuleConfigurationName")))
            commands.append(
                [
                    *(self.plan.python, "-m", "trainprobe.report.xgboost", rule_output),
                    *("--debug-output", self.layout.debug_output),
                ]
            )
        started = []
        for command in commands:
            try:
                started.append(
                    ChildProcess(
                        "report", command, cwd=self.layout.job_dir, log_path=self.layout.report_log
                    )
                )
            except OSError:
                log.exception("could not start the report %s", command[2:4])
        return started

    # ----- helpers ----------------------------------------------------------------------

    def _job_rules(self) -> JobRules:
        """The job's rules, to start (imported here: see the module docstring)."""
        from trainprobe.jobs.runner.job_rules import JobRules
        from trainprobe.jobs.runner.rule_executor_choice import rule_executor_for

        return JobRules(self.plan, rule_executor_for(self.plan, self.settings), os.getpid())

    def _beat(self) -> None:
        while not self._done.wait(HEARTBEAT_SECONDS):
            try:
                self.store.heartbeat(self.name)
            except Exception:
                log.exception("could not record the heartbeat")

    def _start_added_profiler_rules(self, record: JobRecord) -> None:
        """Start the profiler rules an UpdateTrainingJob added, in one more evaluator."""
        assert self.rules is not None
        self.rules.start_profiler_rules(record.profiler_rules, record.profiler_config, added=True)

    def _start_monitor(self, host: str, training_pid: int) -> None:
        try:
            self.monitors.append(start_monitor(self.plan, host, training_pid))
        except OSError:
            # The job goes on without system metrics; the profiler rules say there are none.
            log.exception("could not start the system monitor")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one job from the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m trainprobe.jobs.runner.job_runner")
    parser.add_argument("--store", required=True, help="the job store's SQLite file")
    parser.add_argument("--job", required=True, help="the training job's name")
    arguments = parser.parse_args(argv)
    logging.basicConfig(
        format="%(asctime)s %(name)s: %(message)s", level=logging.INFO, stream=sys.stderr
    )
    runner = JobRunner(JobStore(arguments.store), arguments.job)
    relay_signals([signal.SIGTERM, WAKE_SIGNAL], runner.on_signal)
    runner.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

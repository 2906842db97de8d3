"""Rules on a Dask cluster: each rule evaluator a long-running task (``dask://HOST:PORT``).

``DaskRuleExecutor`` takes ``LocalRuleExecutor``'s place (``trainprobe.jobs.runner.rule_executor``)
when a job's ``TRAINPROBE_RULE_EXECUTOR`` names a Dask distributed scheduler. The job's runner
connects to it and submits one task per evaluator. The task (``evaluate_rules``) runs the ``main``
of the module the local process would run (``trainprobe.jobs.processes.rule_process``, one debugging
rule; ``trainprobe.jobs.processes.profiler_rules_process``, the profiler rules) with the same
arguments, in a worker: it reads the job's storage, writes the rules' statuses and output there
(``rule-output/<rule>/``) and beats the evaluator's heartbeat, so a worker must see the job's
storage, and a custom rule's source, where the runner does (the same disk, or the same bucket).
The local rule limits (niceness, memory, cores) do not apply there: the workers' own do.

A task cannot signal the runner, and nothing can signal a task, so the two talk through the
scheduler and the job's storage:

- a rule's StopTraining action writes the stop request into the job's tensor output, which the
  runner reads every tick (``TICK_SECONDS``) and stops the training;
- the runner's word to the task is a ``distributed.Variable`` (``<key>-control``): a lease the
  runner renews while it looks after its rules, and ``stop`` when the job ends. The task polls
  it; on ``stop``, or a lease not renewed for ``RUNNER_GONE_SECONDS`` (the runner died), its
  rules stop and end Stopped;
- the task records the worker it runs on in ``<key>-worker``. When that worker leaves the
  cluster (killed, crashed, its machine lost), the runner ends the evaluator, and its rules end
  in Error saying so. The scheduler may start the task again on another worker; that copy finds
  the worker already recorded and ends at once, as the rules' output is the first one's.

A rule that shows no progress for the progress timeout is asked to stop, as a local one is ended.
Evaluators spread over the workers: each task is asked of the worker running the fewest of the
job's evaluators (any other may take it), so the rules that a lost worker's evaluator held,
taken up apart (``trainprobe.jobs.runner.job_rules``), go to the workers that remain, a rule each
where there are enough.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence

import distributed

from trainprobe.jobs.processes import profiler_rules_process, rule_process
from trainprobe.jobs.runner.rule_executor import ProgressWatch, RuleLaunch

__all__ = [
    "RUNNER_GONE_SECONDS",
    "DaskRuleExecution",
    "DaskRuleExecutor",
    "evaluate_rules",
    "reach_cluster",
]

log = logging.getLogger(__name__)

CONNECT_SECONDS = 10.0
REACH_SECONDS = 5.0
LOOK_SECONDS = 1.0
"""How often the runner asks the cluster about a task (its end, its worker, its lease)."""
RUNNER_GONE_SECONDS = 60.0
WATCH_SECONDS = 0.5
"""How often a task reads the runner's word."""

_EVALUATORS: dict[str, Callable[[Sequence[str], rule_process.StopWatch], int]] = {
    "trainprobe.jobs.processes.rule_process": rule_process.main,
    "trainprobe.jobs.processes.profiler_rules_process": profiler_rules_process.main,
}
_RUNNER_ONLY = "--runner-pid"
"""An argument of the local process that means nothing on a worker: the runner's process id."""
_STOP = "stop"


def reach_cluster(address: str, timeout: float = REACH_SECONDS) -> str | None:
    """None when a Dask scheduler answers at ``address``; else what went wrong."""
    try:
        client = distributed.Client(address, timeout=timeout, set_as_default=False)
    except Exception as error:  # refused, timed out, or something else answered
        return f"{address} did not answer as a Dask scheduler within {timeout:g} s: {error}"
    client.close()
    return None


def _local_arguments(command: Sequence[str]) -> tuple[str, list[str]]:
    """The module and arguments of a local evaluator's command, ``PYTHON -m MODULE ARGS...``,
    without those that only mean something on the runner's machine."""
    if len(command) < 3 or command[1] != "-m" or command[2] not in _EVALUATORS:
        raise OSError(f"not a rule evaluator that runs on a Dask worker: {' '.join(command)}")
    arguments: list[str] = []
    words = iter(command[3:])
    for word in words:
        if word == _RUNNER_ONLY:
            next(words, None)
        elif not word.startswith(_RUNNER_ONLY + "="):
            arguments.append(word)
    return command[2], arguments


# ----- the worker's side ------------------------------------------------------------------


def evaluate_rules(module: str, arguments: list[str], key: str) -> int | None:
    """The task: run ``module``'s evaluator with ``arguments`` until its rules conclude or the
    runner says stop (see the module docstring); its exit status, None for a copy started after
    the first one's worker was lost."""
    distributed.secede()  # a long-running task: it holds none of the worker's threads
    client = distributed.get_client()
    worker = distributed.Variable(f"{key}-worker", client=client)
    try:
        started = worker.get(timeout=CONNECT_SECONDS)
    except TimeoutError:
        return None  # the runner has already ended this evaluator
    if started:
        return None
    worker.set(distributed.get_worker().address)
    done = threading.Event()

    def watch(stop_rules: Callable[[], None]) -> None:
        thread = threading.Thread(
            target=_follow_runner,
            args=(distributed.Variable(f"{key}-control", client=client), stop_rules, done),
            name="trainprobe-dask-runner-watch",
            daemon=True,
        )
        thread.start()

    try:
        return _EVALUATORS[module](arguments, watch)
    finally:
        done.set()


def _follow_runner(
    control: distributed.Variable, stop_rules: Callable[[], None], done: threading.Event
) -> None:
    """Call ``stop_rules`` once the runner says stop or its lease runs out, unless ``done``."""
    lease: object = None
    renewed = time.monotonic()
    while not done.wait(WATCH_SECONDS):
        try:
            word = control.get(timeout=LOOK_SECONDS)
        except Exception:
            word = lease  # the scheduler is busy or away: the lease runs on
        if word == _STOP:
            stop_rules()
            return
        if word != lease:
            lease, renewed = word, time.monotonic()
        elif time.monotonic() - renewed > RUNNER_GONE_SECONDS:
            log.warning("the job's runner has not been heard of for %g s", RUNNER_GONE_SECONDS)
            stop_rules()
            return


# ----- the runner's side ------------------------------------------------------------------


class DaskRuleExecution:
    """A rule evaluator running as a task on the cluster ``client`` is connected to.

    A thread of its own asks the cluster about the task every ``LOOK_SECONDS`` (its end, its
    worker, its lease), so that a slow or lost scheduler never holds up the runner's ticks.
    """

    def __init__(
        self,
        launch: RuleLaunch,
        client: distributed.Client,
        key: str,
        progress: ProgressWatch,
        worker: str | None = None,
    ) -> None:
        self.launch = launch
        self.key = key
        self.progress = progress
        self.worker = worker
        """The worker the task runs on (until it starts, the one it was asked of, if any)."""
        self._control = distributed.Variable(f"{key}-control", client=client)
        self._worker = distributed.Variable(f"{key}-worker", client=client)
        self._client = client
        self._lease = 0
        self._renew()
        self._worker.set("")
        module, arguments = _local_arguments(launch.command)
        self.future: distributed.Future[int | None] = client.submit(
            evaluate_rules,
            module,
            arguments,
            key,
            key=key,
            pure=False,
            workers=[worker] if worker is not None else None,
            allow_other_workers=True,
        )
        self._ending: str | None = None
        self._seen_worker = False
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        _say(launch, f"submitted to the Dask scheduler as {key}")
        self._watch = threading.Thread(
            target=self._follow, name=f"trainprobe-dask-{launch.label}", daemon=True
        )
        self._watch.start()

    def poll(self) -> str | None:
        """None while the task runs; once it has ended, how (a sentence for the rules' status)."""
        return self._ending

    def _follow(self) -> None:
        while not self._stopping.wait(LOOK_SECONDS):
            try:
                ending = self._look()
            except OSError as error:
                ending = f"the Dask scheduler could not be reached: {error}"
            if ending is not None:
                self._end(ending)
                return

    def _look(self) -> str | None:
        lost = self._lost_worker()
        if lost is not None:
            self._say_stop()
            return f"the Dask worker {lost} running the rule was lost (it died or left the cluster)"
        if self.future.done():
            return self._finished()
        if self.progress.stuck():
            self._say_stop()
            seconds = self.progress.timeout_seconds
            return f"no progress for {seconds:g} s: the rule task was asked to stop"
        self._renew()
        return None

    def _lost_worker(self) -> str | None:
        """The worker the task started on, once it is no longer in the cluster."""
        address = self._worker.get(timeout=CONNECT_SECONDS)
        if not address:
            return None  # not started yet
        if not self._seen_worker:
            self._seen_worker = True
            self.worker = str(address)
            _say(self.launch, f"running on the Dask worker {address}")
        workers = self._client.scheduler_info(n_workers=-1)["workers"]
        return None if address in workers else str(address)

    def _finished(self) -> str:
        if self.future.status == "error":
            error = self.future.exception()
            if isinstance(error, distributed.KilledWorker):
                return f"the Dask workers running the rule were lost: {error}"
            return f"the rule task failed on the Dask cluster: {error!r}"
        if self.future.status == "cancelled":
            return "the rule task was cancelled on the Dask cluster"
        status = self.future.result()
        if status is None:
            return "the Dask worker running the rule was lost (it died or left the cluster)"
        return f"the rule task ended with status {status}"

    def stop(self, grace_seconds: float) -> None:
        """Say stop (its rules end Stopped); leave the task after ``grace_seconds``."""
        self._stopping.set()
        self._watch.join(grace_seconds)
        if self._ending is not None:
            return
        deadline = time.monotonic() + grace_seconds
        try:
            self._say_stop()
        except OSError as error:
            log.warning("could not tell the %s to stop: %s", self.launch.label, error)
            deadline = time.monotonic()
        while not self.future.done() and time.monotonic() < deadline:
            time.sleep(WATCH_SECONDS / 5)
        if not self.future.done():
            log.warning("the %s did not stop within %g s", self.launch.label, grace_seconds)
        self._end("the rule task was stopped")

    def _renew(self) -> None:
        self._lease += 1
        self._control.set(self._lease)

    def _say_stop(self) -> None:
        self._control.set(_STOP)

    def _end(self, ending: str) -> None:
        with self._lock:
            if self._ending is not None:
                return
            self._ending = ending
        _say(self.launch, ending)
        try:
            self.future.release()
            for variable in (self._control, self._worker):
                variable.delete()
        except Exception:  # the scheduler is gone: nothing is left to tidy
            log.debug("could not tidy up after the %s", self.launch.label, exc_info=True)


class DaskRuleExecutor:
    """Runs the rule evaluators of the job ``job_name`` as tasks on the Dask scheduler at
    ``address`` (``tcp://HOST:PORT``); asks one that makes no progress for
    ``progress_timeout_seconds`` to stop."""

    def __init__(self, address: str, *, job_name: str, progress_timeout_seconds: float) -> None:
        self.address = address
        self.job_name = job_name
        self.progress_timeout_seconds = progress_timeout_seconds
        self._client: distributed.Client | None = None
        self._executions: list[DaskRuleExecution] = []

    def start(self, launch: RuleLaunch) -> DaskRuleExecution:
        """Submit ``launch`` as a task; OSError when the cluster cannot be reached."""
        if self._client is None:
            try:
                self._client = distributed.Client(
                    self.address, timeout=CONNECT_SECONDS, set_as_default=False
                )
            except ValueError as error:
                raise OSError(f"the Dask scheduler {self.address}: {error}") from None
        label = launch.label.replace(" ", "-")
        key = f"trainprobe-{self.job_name}-{label}-{uuid.uuid4().hex[:8]}"
        progress = ProgressWatch(launch.heartbeat_path, self.progress_timeout_seconds)
        execution = DaskRuleExecution(
            launch, self._client, key, progress, self._least_busy_worker(self._client)
        )
        self._executions.append(execution)
        return execution

    def _least_busy_worker(self, client: distributed.Client) -> str | None:
        """The worker running the fewest of the job's evaluators; None if none is known."""
        try:
            workers = list(client.scheduler_info(n_workers=-1)["workers"])
        except Exception:  # the scheduler is busy: let it choose
            log.debug("could not list the Dask workers", exc_info=True)
            return None
        self._executions = [each for each in self._executions if each.poll() is None]
        busy = Counter(each.worker for each in self._executions)
        return min(workers, key=lambda address: busy[address], default=None)

    def close(self) -> None:
        """Leave the cluster (the tasks still running go on until they are told to stop)."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # the scheduler is gone already
                log.debug("could not close the Dask client", exc_info=True)
            self._client = None


def _say(launch: RuleLaunch, what: str) -> None:
    """Add a line to the evaluator's log: on a worker, its output is the worker's."""
    try:
        with open(launch.log_path, "a", encoding="utf-8") as log_file:
            print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} dask: {what}", file=log_file)
    except OSError:
        log.debug("could not write %s", launch.log_path, exc_info=True)

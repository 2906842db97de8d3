"""The training of every host of a job, followed as one: it fails when one host fails.

Each host's training is a ``TrainingProcess`` (a process group of its own: that host's torchrun
and its worker), all logging to the job's one training log. The job runner follows them as one
training: it runs while every host runs or ended well; once a host ends badly (its script
failed, its processes were killed) it has ended with that host's exit status, naming the host
(``failed_host``), and ``stop``/``finish`` end the other hosts' processes, which would otherwise
wait for the lost host until their collectives time out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from trainprobe.jobs.child_process import stop_together
from trainprobe.jobs.runner.hosts import HostLaunch
from trainprobe.jobs.runner.training_process import TrainingProcess

__all__ = ["HostTraining", "HostTrainings"]


class HostTraining(NamedTuple):
    """One host's training: the host's name (``algo-1`` ...) and its process."""

    host: str
    training: TrainingProcess


class HostTrainings:
    """The started trainings of ``launches``, one per host (see the module docstring).

    ``environment`` is the runner's, under each host's own variables. OSError when a host's
    training cannot be started; the hosts started before it are stopped.
    """

    def __init__(
        self,
        launches: Sequence[HostLaunch],
        *,
        cwd: str,
        environment: Mapping[str, str],
        log_path: str,
    ) -> None:
        self.hosts: list[HostTraining] = []
        self.failed_host: str | None = None
        """The host whose training ended badly first, once one has."""
        self._failed_status: int | None = None
        try:
            for launch in launches:
                training = TrainingProcess(
                    launch.command,
                    cwd=cwd,
                    environment={**environment, **launch.environment},
                    log_path=log_path,
                )
                self.hosts.append(HostTraining(launch.name, training))
        except BaseException:
            self.stop(0)
            self.finish()
            raise
        self.pid = self.hosts[0].training.pid
        self.started = min(training.started for _, training in self.hosts)

    def poll(self) -> int | None:
        """None while every host runs or ended well; then the exit status of the host that
        ended badly, or 0 when every host ended well."""
        if self._failed_status is not None:
            return self._failed_status
        ended = [(name, training.poll()) for name, training in self.hosts]
        failed = [(name, status) for name, status in ended if status not in (None, 0)]
        if failed:
            # A host killed by a signal is the cause of the others' failures, not the other
            # way round: it goes first, then the first host in order.
            failed.sort(key=lambda found: 0 if (found[1] or 0) < 0 else 1)
            self.failed_host, self._failed_status = failed[0]
            return self._failed_status
        if any(status is None for _, status in ended):
            return None
        return 0

    def stop(self, grace_seconds: float) -> int:
        """Stop every host's training at once (``ChildProcess.stop``, the grace shared); the
        status ``poll`` then gives, or the first host's."""
        statuses = stop_together([training.child for _, training in self.hosts], grace_seconds)
        found = self.poll()
        return statuses[0] if found is None else found

    def finish(self) -> None:
        """After the training ended: end what any host left behind and close the log."""
        for _, training in self.hosts:
            training.finish()

    def error_tail(self) -> list[str]:
        """The last lines of error output of the host that failed (else of the first)."""
        for name, training in self.hosts:
            if name == self.failed_host:
                return training.error_tail()
        return self.hosts[0].training.error_tail() if self.hosts else []

    def pids(self) -> dict[str, int]:
        """Each host's training process id, by host name."""
        return {name: training.pid for name, training in self.hosts}

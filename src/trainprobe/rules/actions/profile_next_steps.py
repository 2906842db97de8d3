"""The ProfileNextSteps action: have the training's flight recorder capture its next steps.

The request goes into the job's profiler output (``trainprobe.storage.flight_captures``), which
the training's flight recorder looks at twice a second, as StopTraining's request goes into the
tensor output the hook watches. A profiler rule watches the profiler output itself; a debugging
rule watches the job's ``debug-output``, whose sibling ``profiler-output`` is the one asked.
"""

from __future__ import annotations

import os

from trainprobe.rules.actions.notice import Notice
from trainprobe.storage.flight_captures import write_profile_request
from trainprobe.storage.job_layout import PROFILER_OUTPUT, job_dir_of
from trainprobe.storage.locations import join

__all__ = ["ProfileNextStepsAction", "profiler_output_of"]


def profiler_output_of(out_dir: str) -> str:
    """The profiler output of the job whose output ``out_dir`` a rule watches."""
    if os.path.basename(out_dir.rstrip("/\\")) == PROFILER_OUTPUT:
        return out_dir
    job = job_dir_of(out_dir)
    return join(job[0], PROFILER_OUTPUT) if job is not None else out_dir


class ProfileNextStepsAction:
    """Writes a profile request for ``steps`` steps into the job's profiler output."""

    kind = "profilenextsteps"

    def __init__(self, out_dir: str, steps: int) -> None:
        self.profiler_output = profiler_output_of(out_dir)
        self.steps = steps

    @property
    def target(self) -> str:
        """Where the request goes, in words."""
        return self.profiler_output

    def invoke(self, notice: Notice) -> str:
        """Ask for the capture; returns what was done."""
        write_profile_request(
            self.profiler_output, self.steps, trigger="rule", requested_by=f"rule {notice.rule}"
        )
        return (
            f"asked the training for a capture of its next {self.steps} step(s); the flight "
            "recorder writes it under profiler-output/framework/pytorch/flight_recorder/"
        )

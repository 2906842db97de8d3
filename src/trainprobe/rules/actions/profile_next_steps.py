"""The ProfileNextSteps action: have the training's flight recorder capture its next steps.

The request goes into the job's profiler output (``trainprobe.storage.flight_captures``), which
the training's flight recorder looks at twice a second, as StopTraining's request goes into the
tensor output the hook watches (``trainprobe.storage.job_layout.profiler_output_of`` finds the
job's profiler output from the output the rule watches).
"""

from __future__ import annotations

from trainprobe.rules.actions.notice import Notice
from trainprobe.storage.flight_captures import write_profile_request
from trainprobe.storage.job_layout import profiler_output_of

__all__ = ["ProfileNextStepsAction"]


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

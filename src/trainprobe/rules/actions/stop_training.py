"""The StopTraining action: ask the training to stop, through a stop request file.

The request goes into the tensor output the rule watches (see
``trainprobe.storage.stop_request``); the trainprobe hook in the training sees it at its next
step start and stops the training with the rule's reason. This works when the user started
the script and the rule separately. trainprobe's job runner, which started the training
itself, can also pass ``on_request`` to act at once (e.g. stop the job's processes), and can
call ``request_stop`` to stop a training the same way a rule does.

``training_job_prefix`` is SageMaker's way of naming the job: locally, the job is the one whose
output the rule watches. The prefix is written into the request for the job runner.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from trainprobe.rules.actions.notice import Notice
from trainprobe.storage.stop_request import StopRequest, write_stop_request

__all__ = ["StopTrainingAction", "StopTrainingCallback", "request_stop"]

StopTrainingCallback = Callable[[StopRequest], None]


def request_stop(
    out_dir: str,
    rule: str,
    message: str,
    *,
    step: int | None = None,
    training_job_prefix: str | None = None,
    where: str | None = None,
) -> StopRequest:
    """Ask the training writing tensors to ``out_dir`` to stop at its next step; returns the
    request written. ``where`` names ``step`` as the training counts it."""
    request = StopRequest(
        rule=rule,
        message=message,
        step=step,
        time=time.time(),
        training_job_prefix=training_job_prefix,
        where=where,
    )
    write_stop_request(out_dir, request)
    return request


class StopTrainingAction:
    """Writes a stop request into the watched output, then calls ``on_request`` if given."""

    kind = "stoptraining"

    def __init__(
        self,
        out_dir: str,
        training_job_prefix: str | None = None,
        on_request: StopTrainingCallback | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.training_job_prefix = training_job_prefix
        self.on_request = on_request

    @property
    def target(self) -> str:
        """The job the action stops, in words."""
        return self.training_job_prefix or self.out_dir

    def invoke(self, notice: Notice) -> str:
        """Request the stop; returns what was done."""
        reason = notice.evidence[0].describe() if notice.evidence else notice.subject
        request = request_stop(
            self.out_dir,
            notice.rule,
            reason,
            step=notice.step,
            training_job_prefix=self.training_job_prefix,
            where=notice.where,
        )
        if self.on_request is not None:
            self.on_request(request)
            return "stop request written and passed to the job runner"
        return "stop request written; the trainprobe hook stops the training at its next step"

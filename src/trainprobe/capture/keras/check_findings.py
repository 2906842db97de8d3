"""What the Keras hook does with what its in-training checks found.

``InTrainingChecks`` reads the step summaries and reports (``in_training.Reports``); this is the
other end: the first non-finite update is logged and written (``nonfinite/``), and the step it
was found at (or, found later, the first saved after it) is saved in full; the spikes are written
(``spikes/``) when they change, at saved TRAIN steps (with the counts of the steps judged) and at
the end of ``fit``; a stop asked by a rule stops ``fit`` after this batch, and its stop request,
which the job's runner acts on, is written once the step is saved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from trainprobe.capture.keras.hook_output import HookOutput
from trainprobe.capture.keras.in_training import InTrainingChecks, Reports
from trainprobe.storage.nonfinite_file import NonFiniteOrigin
from trainprobe.storage.stop_request import StopRequest

__all__ = ["CheckFindings"]

log = logging.getLogger("trainprobe")


class CheckFindings:
    """Writes and acts on the checks' findings (see the module docstring).

    ``checks()`` gives the host side of the checks of the model ``fit`` trains (None before it
    has any); ``stop_training()`` has Keras stop after the running batch."""

    def __init__(
        self,
        output: HookOutput,
        checks: Callable[[], InTrainingChecks | None],
        stop_training: Callable[[], None],
        *,
        dry_run: bool,
    ) -> None:
        self.output = output
        self._checks = checks
        self._stop_training = stop_training
        self._dry_run = dry_run
        self.origin: NonFiniteOrigin | None = None
        self._origin_saved = False
        self._stop_request: StopRequest | None = None

    @property
    def reports(self) -> Reports:
        """Where ``InTrainingChecks`` reports to."""
        return Reports(self._found_nonfinite, self.write_spikes, self._stop)

    def saves_in_full(self, step: int) -> bool:
        """Whether the step ``step``, about to be saved, is saved in full (every value raw,
        whatever the plan): the first saved after a non-finite update was found (the origin
        then says whether it is that one)."""
        origin = self.origin
        if origin is None or self._origin_saved:
            return False
        self._origin_saved = True
        self._found_nonfinite(replace(origin, saved_in_full=origin.step == step))
        return True

    def step_saved(self) -> None:
        """The step is saved: a stop request waiting for it is written."""
        if self._stop_request is not None:
            self.output.write_stop(self._stop_request)
            self._stop_request = None

    def write_spikes(self) -> None:
        """Have the spikes file rewritten (when the checks have spike rules)."""
        checks = self._checks()
        if checks is None or not checks.rules or self._dry_run:
            return
        self.output.write_spikes(list(checks.records), checks.judged(), checks.rule_names())

    def _found_nonfinite(self, origin: NonFiniteOrigin) -> None:
        """The first non-finite update (or what became of its loss): logged and written."""
        known = self.origin
        if known is None or origin.loss_step != known.loss_step:
            log.warning("trainprobe: %s", origin.describe())
        if known is not None and known.saved_in_full:
            origin = replace(origin, saved_in_full=True)
        self.origin = origin
        if not self._dry_run:
            self.output.write_origin(origin)

    def _stop(self, request: StopRequest) -> None:
        log.warning("trainprobe: stopping the training: %s", request.explain())
        self._stop_training()
        self._stop_request = request

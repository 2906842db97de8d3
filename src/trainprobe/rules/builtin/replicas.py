"""ReplicaDivergence: data-parallel replicas of a parameter that hold different values.

In a training of several processes the PyTorch hook saves, at each saved step, every saved
parameter's fingerprint per worker (the reduction ``fingerprint``: a sum of its values weighted
by position, the same for equal tensors, different for any difference). Replicas are the
workers that hold the same tensor: every worker, for an ordinary parameter (DDP); the workers
holding the same piece of a sharded one (``Tensor.piece``: HSDP's replicas of a shard, or a
tensor-parallel parameter replicated over the mesh). A piece held by one worker alone (FSDP's
shards) has no replica to be compared with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from trainprobe.analysis.trial import Trial
from trainprobe.rules.builtin.base import BuiltinRule, Parameters
from trainprobe.rules.builtin.selection import TensorSelection
from trainprobe.storage.index_file import ShardEntry
from trainprobe.storage.reduction_names import FINGERPRINT

__all__ = ["ReplicaDivergence"]

_PARAMETERS = TensorSelection(patterns=(re.compile(r"^(?!gradient/)(?!scalar/)"),))
"""What can be a parameter: not a gradient, not a scalar (fingerprints say the rest)."""


class ReplicaDivergence(BuiltinRule):
    """Fires when the replicas of a parameter hold different values at a saved step.

    At each step it compares, parameter by parameter (in name order, those of ``tensor_regex``
    when given), the fingerprints of the workers that hold the same tensor or piece; two differ
    when they differ by more than ``tolerance`` times the larger's magnitude (0: any
    difference). It names the first parameter that differs, the step, and the workers whose
    fingerprint differs from the most common one (from the first worker's, between two). It
    passes a step whose replicas all agree, and cannot judge (Error, saying why) a job without
    replicas: one process, FSDP's shards alone, or output where only one worker wrote
    (``include_workers="one"``).
    """

    def __init__(
        self,
        base_trial: Trial,
        tensor_regex: Sequence[str] | str | None = None,
        tolerance: float | str | None = 0.0,
        *,
        other_trials: Sequence[Trial] | None = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        parameters = Parameters(
            "ReplicaDivergence", {"tensor_regex": tensor_regex, "tolerance": tolerance}
        )
        self.tensor_regex = parameters.texts("tensor_regex")
        self.tolerance = parameters.real("tolerance")
        patterns = parameters.patterns("tensor_regex")
        self.selection = TensorSelection(patterns=patterns) if patterns else _PARAMETERS

    def invoke_at_step(self, step: int) -> bool:
        """Whether some parameter's replicas differ at ``step`` (the first one is recorded)."""
        compared = 0
        for name in self.selection.names(self.base_trial, step):
            groups = self._replicas(name, step)
            for fingerprints in groups:
                if len(fingerprints) < 2:
                    continue
                compared += 1
                common = self._common(fingerprints)
                differing = [w for w, v in fingerprints.items() if not self._equal(v, common)]
                if differing:
                    self._record(name, step, fingerprints, differing, common)
                    return True
        if not compared:
            return self.nothing_due(
                f"no parameter saved at {self.step_words(step)} has replicas with a "
                "fingerprint (a training of one process, FSDP's shards alone, or output "
                "where one worker wrote: include_workers='one')"
            )
        self.has_judged = True
        return False

    def _replicas(self, name: str, step: int) -> list[dict[str, float]]:
        """The fingerprints of ``name`` at ``step`` by worker, one group per piece held."""
        tensor = self.base_trial.tensor(name)
        groups: dict[tuple[int, ...] | None, dict[str, float]] = {}
        for worker in tensor.workers(step):
            if (FINGERPRINT, False) not in tensor.saved_reductions(step, worker=worker):
                continue
            value = float(tensor.reduction_value(step, FINGERPRINT, worker=worker))
            groups.setdefault(_place(tensor.piece(step, worker=worker)), {})[worker] = value
        return list(groups.values())

    def _common(self, fingerprints: dict[str, float]) -> float:
        """The most common fingerprint (the first worker's, when none is more common)."""
        values = list(fingerprints.values())
        return max(values, key=lambda v: sum(self._equal(v, other) for other in values))

    def _equal(self, first: float, second: float) -> bool:
        if first == second or (math.isnan(first) and math.isnan(second)):
            return True  # NaN everywhere is ExplodingTensor's to report
        return abs(first - second) <= self.tolerance * max(abs(first), abs(second))

    def _record(
        self,
        name: str,
        step: int,
        fingerprints: dict[str, float],
        differing: list[str],
        common: float,
    ) -> None:
        agreeing = [worker for worker in fingerprints if worker not in differing]
        apart = max(abs(fingerprints[worker] - common) for worker in differing)
        self.record(
            message=(
                f"{name} differs between its replicas at {self.step_words(step)}: "
                f"{_workers(differing)} {'holds' if len(differing) == 1 else 'hold'} other "
                f"values than {_workers(agreeing)} (fingerprints "
                + ", ".join(f"{worker} {value:.10g}" for worker, value in fingerprints.items())
                + ")"
            ),
            tensor=name,
            step=step,
            value=apart / max(abs(common), 1e-300),
            threshold=self.tolerance,
        )


def _place(piece: ShardEntry | None) -> tuple[int, ...] | None:
    """Which piece a worker holds: where it starts (None: the whole tensor)."""
    if piece is None:
        return None
    if piece.offsets is not None:
        return piece.offsets
    return (-1, piece.flat_offset or 0)


def _workers(workers: list[str]) -> str:
    """Workers with their ranks: ``worker_1 (rank 1)``."""
    named = [f"{worker} (rank {worker.rsplit('_', 1)[-1]})" for worker in workers]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]

"""How many training processes each host starts: the estimator's ``distribution``, as SageMaker
carries it in the request's hyperparameters.

The SageMaker SDK's PyTorch estimator turns ``distribution`` into hyperparameters of the
training job; trainprobe reads the same ones:

- ``{"torch_distributed": {"enabled": True}}``: ``sagemaker_torch_distributed_enabled`` (torchrun,
  one process per GPU);
- ``{"pytorchddp": {"enabled": True}}``: ``sagemaker_pytorch_ddp_enabled`` (one process per GPU);
- ``{"mpi": {"enabled": True, "processes_per_host": N}}``: ``sagemaker_mpi_enabled`` and
  ``sagemaker_mpi_num_of_processes_per_host``.

Each kind takes ``processes_per_host`` here (SageMaker's name, sent as
``sagemaker_mpi_num_of_processes_per_host``); without it an enabled kind starts one process per
GPU (``"gpu"``, torchrun's word; one process on a machine without a GPU). Every process of every
host is one rank of one torch.distributed job (``trainprobe.jobs.runner.hosts``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from trainprobe.config.errors import ConfigError

__all__ = [
    "MAX_PROCESSES_PER_HOST",
    "PROCESSES_PER_HOST_HYPERPARAMETER",
    "distribution_hyperparameters",
    "processes_per_host",
]

MAX_PROCESSES_PER_HOST = 64
"""The most training processes one host starts."""

PROCESSES_PER_HOST_HYPERPARAMETER = "sagemaker_mpi_num_of_processes_per_host"

_ENABLED = {
    "torch_distributed": "sagemaker_torch_distributed_enabled",
    "pytorchddp": "sagemaker_pytorch_ddp_enabled",
    "mpi": "sagemaker_mpi_enabled",
}
"""Each distribution kind trainprobe runs, and the hyperparameter that says it is enabled."""

ProcessCount = int | Literal["gpu"]


def _count(value: object, field: str) -> int:
    """``value`` as a number of processes per host; ConfigError naming ``field`` otherwise."""
    count = value
    if isinstance(value, str) and value.isdigit():
        count = int(value)
    if isinstance(count, bool) or not isinstance(count, int):
        count = 0
    if not 1 <= count <= MAX_PROCESSES_PER_HOST:
        raise ConfigError(field, value, f"a whole number from 1 to {MAX_PROCESSES_PER_HOST}")
    return count


def distribution_hyperparameters(distribution: Mapping[str, Any] | None) -> dict[str, str]:
    """The hyperparameters (JSON-encoded, as the SDK encodes them) that carry ``distribution``;
    ConfigError for a kind trainprobe does not run or a value it cannot take."""
    if not distribution:
        return {}
    if not isinstance(distribution, Mapping):
        raise ConfigError("distribution", distribution, "a dict such as {'torch_distributed': ...}")
    found: dict[str, str] = {}
    for kind, options in distribution.items():
        if kind not in _ENABLED:
            raise ConfigError("distribution", kind, f"one of {', '.join(sorted(_ENABLED))}")
        if not isinstance(options, Mapping):
            raise ConfigError(f"distribution.{kind}", options, "a dict such as {'enabled': True}")
        if options.get("enabled", False) is not True:
            continue
        found[_ENABLED[kind]] = "true"
        if "processes_per_host" in options:
            count = _count(options["processes_per_host"], f"distribution.{kind}.processes_per_host")
            found[PROCESSES_PER_HOST_HYPERPARAMETER] = json.dumps(count)
    return found


def processes_per_host(hyperparameters: Mapping[str, Any]) -> ProcessCount:
    """The processes each host starts, from a request's decoded ``hyperparameters``: the count
    given, ``"gpu"`` for a distribution enabled without one, else 1."""
    if PROCESSES_PER_HOST_HYPERPARAMETER in hyperparameters:
        field = f"HyperParameters.{PROCESSES_PER_HOST_HYPERPARAMETER}"
        return _count(hyperparameters[PROCESSES_PER_HOST_HYPERPARAMETER], field)
    for name in _ENABLED.values():
        if hyperparameters.get(name) in (True, "true", "True"):
            return "gpu"
    return 1

"""What a job runs, read from its request the ways SageMaker requests say it.

1. As the SageMaker SDK's framework estimators (PyTorch, ...) send it: the script is the
   ``sagemaker_program`` hyperparameter, in the directory ``sagemaker_submit_directory`` (a local
   directory, a ``file://`` URL, or a local ``sourcedir.tar.gz``); both values are JSON-encoded,
   as the SDK encodes every hyperparameter. The other hyperparameters (those not starting with
   ``sagemaker_``) become the script's ``--key value`` arguments, as SageMaker's training
   toolkit passes them (``script_arguments``). The script runs in its directory.
2. trainprobe's shorthand, which ``trainprobe run train.py -- args`` sends:
   ``AlgorithmSpecification.ContainerEntrypoint`` is the command (``["train.py"]`` or
   ``["python", "train.py"]``) and ``ContainerArguments`` its arguments; it runs in the directory
   the job was created from.
3. With neither, a ``TrainingImage`` of SageMaker's XGBoost container names its built-in
   algorithm: trainprobe's (``trainprobe.jobs.processes.xgboost_algorithm``) runs on the job's
   channels.

A Python script runs through ``trainprobe.jobs.processes.training_entry``, which installs the hook
automatically; ``ResourceConfig.InstanceCount`` > 1 runs it as that many hosts, each a torchrun
node (``trainprobe.jobs.runner.hosts``), every port they open bound to 127.0.0.1
(``trainprobe.jobs.processes.local_torchrun``).
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.config.sdk_request import PROGRAM_HYPERPARAMETER, SUBMIT_DIRECTORY_HYPERPARAMETER

__all__ = [
    "PROGRAM_HYPERPARAMETER",
    "SUBMIT_DIRECTORY_HYPERPARAMETER",
    "EntryPoint",
    "decode_hyperparameters",
    "entry_point_from_request",
    "script_arguments",
]

_SAGEMAKER_PREFIX = "sagemaker_"
_PYTHONS = ("python", "python3")
TRAINING_ENTRY_MODULE = "trainprobe.jobs.processes.training_entry"
LOCAL_TORCHRUN_MODULE = "trainprobe.jobs.processes.local_torchrun"
LOOPBACK = "127.0.0.1"
"""Every port a multi-process job opens is on this address
(``trainprobe.jobs.processes.local_torchrun``)."""
XGBOOST_IMAGE = "sagemaker-xgboost"


def decode_hyperparameters(hyperparameters: Mapping[str, str]) -> dict[str, Any]:
    """Each value JSON-decoded, as the SDK encoded it; a value that is not JSON stays a string."""
    decoded: dict[str, Any] = {}
    for key, value in hyperparameters.items():
        try:
            decoded[key] = json.loads(value)
        except ValueError:
            decoded[key] = value
    return decoded


def _argument_text(value: object) -> str:
    if isinstance(value, Mapping):
        return ",".join(f"{key}={item}" for key, item in sorted(value.items()))
    return str(value)


def script_arguments(hyperparameters: Mapping[str, str]) -> list[str]:
    """The script's arguments for the user's hyperparameters, as SageMaker's training toolkit
    makes them: by name in sorted order, ``--key value`` (``-k value`` for a one-letter key), the
    value as Python writes it (``True``, ``[1, 2]``), a mapping as ``a=1,b=2``."""
    arguments = []
    decoded = decode_hyperparameters(hyperparameters)
    for key in sorted(decoded):
        if key.startswith(_SAGEMAKER_PREFIX):
            continue
        arguments += [f"--{key}" if len(key) > 1 else f"-{key}", _argument_text(decoded[key])]
    return arguments


@dataclass(frozen=True)
class EntryPoint:
    """The program a job runs, its arguments, and the directory it runs in.

    ``python`` says whether ``program`` is a Python script (run with the automatic hook, and
    under torchrun for several processes) or another executable (run as it is).
    """

    program: str
    arguments: tuple[str, ...]
    working_dir: str
    python: bool = True

    def command(self, python: str) -> list[str]:
        """The command line that starts the training with ``python`` (an interpreter path), as
        one process; a job of several hosts runs it under torchrun
        (``trainprobe.jobs.runner.hosts``)."""
        if not self.python:
            return [self.program, *self.arguments]
        return [python, "-m", TRAINING_ENTRY_MODULE, self.program, *self.arguments]


def _json_string(hyperparameters: Mapping[str, str], key: str) -> str:
    raw = hyperparameters[key]
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if not isinstance(value, str) or not value:
        raise ConfigError(f"HyperParameters.{key}", raw, "a JSON-encoded string, e.g. '\"x\"'")
    return value


def _source_directory(url: str, cwd: str, unpack_to: str | None, program: str) -> str:
    """The directory the script runs in: the submit directory, or where its archive is unpacked
    (only with ``unpack_to``; otherwise the archive is only checked to hold ``program``)."""
    field = f"HyperParameters.{SUBMIT_DIRECTORY_HYPERPARAMETER}"
    path = os.path.normpath(os.path.join(cwd, os.path.expanduser(_local_path(url, field))))
    if os.path.isdir(path):
        return path
    if not (os.path.isfile(path) and path.endswith((".tar.gz", ".tgz"))):
        raise ConfigError(
            field, url, "an existing directory, or a sourcedir.tar.gz on this machine"
        )
    try:
        with tarfile.open(path, "r:gz") as archive:
            if unpack_to is None:
                names = {os.path.normpath(name) for name in archive.getnames()}
                if os.path.normpath(program) not in names:
                    raise ConfigError(
                        f"HyperParameters.{PROGRAM_HYPERPARAMETER}",
                        program,
                        f"a script in the source archive {path}",
                    )
                return path
            os.makedirs(unpack_to, exist_ok=True)
            archive.extractall(unpack_to, filter="data")
    except (OSError, tarfile.TarError) as error:
        raise ConfigError(field, url, f"a readable .tar.gz archive ({error})") from None
    return unpack_to


def _local_path(url: str, field: str) -> str:
    """The path of a local path or ``file://`` URL (``local_directory`` without "a directory")."""
    if "\x00" in url or not url.isprintable():
        raise ConfigError(field, url, "a local path without NUL or control characters")
    if url.startswith("file://"):
        return url[len("file://") :]
    if "://" in url:
        raise ConfigError(field, url, "a local path or a file:// URL")
    return url


def _container_entry_point(specification: Mapping[str, Any], cwd: str) -> EntryPoint:
    command = specification.get("ContainerEntrypoint")
    arguments = specification.get("ContainerArguments", [])
    where = "AlgorithmSpecification"
    if (
        not isinstance(command, list)
        or not command
        or not all(isinstance(item, str) and item for item in command)
    ):
        raise ConfigError(f"{where}.ContainerEntrypoint", command, "a list of strings")
    if not isinstance(arguments, list) or not all(isinstance(item, str) for item in arguments):
        raise ConfigError(f"{where}.ContainerArguments", arguments, "a list of strings")
    words = list(command)
    if os.path.basename(words[0]) in _PYTHONS and len(words) > 1 and words[1].endswith(".py"):
        words = words[1:]
    program, rest = words[0], words[1:]
    if program.endswith(".py"):
        script = os.path.normpath(os.path.join(cwd, os.path.expanduser(program)))
        if not os.path.isfile(script):
            raise ConfigError(
                f"{where}.ContainerEntrypoint[0]", program, "an existing Python script"
            )
        return EntryPoint(script, (*rest, *arguments), cwd)
    if os.sep in program:
        executable = os.path.normpath(os.path.join(cwd, os.path.expanduser(program)))
        found = os.path.isfile(executable) and os.access(executable, os.X_OK)
    else:
        found = shutil.which(program) is not None
    if not found:
        raise ConfigError(
            f"{where}.ContainerEntrypoint[0]",
            program,
            "a Python script (.py), or a program that exists on this machine and can be run",
        )
    return EntryPoint(program, (*rest, *arguments), cwd, python=False)


def entry_point_from_request(
    algorithm_specification: object,
    hyperparameters: Mapping[str, str],
    *,
    cwd: str,
    unpack_to: str,
    unpack: bool = True,
) -> EntryPoint:
    """What the job runs, from its AlgorithmSpecification and HyperParameters (see the module
    docstring); relative paths are taken from ``cwd``, a packed source directory is unpacked
    into ``unpack_to`` (with ``unpack`` False, it is only checked to hold the script: nothing
    is written). ConfigError when neither names a program."""
    specification = algorithm_specification if isinstance(algorithm_specification, Mapping) else {}
    if algorithm_specification is not None and not isinstance(algorithm_specification, Mapping):
        raise ConfigError("AlgorithmSpecification", algorithm_specification, "a JSON object")
    if specification.get("ContainerEntrypoint") is not None:
        return _container_entry_point(specification, cwd)
    if PROGRAM_HYPERPARAMETER in hyperparameters:
        program = _json_string(hyperparameters, PROGRAM_HYPERPARAMETER)
        directory = cwd
        if SUBMIT_DIRECTORY_HYPERPARAMETER in hyperparameters:
            url = _json_string(hyperparameters, SUBMIT_DIRECTORY_HYPERPARAMETER)
            directory = _source_directory(url, cwd, unpack_to if unpack else None, program)
            if not unpack and not os.path.isdir(directory):
                script = os.path.normpath(os.path.join(unpack_to, program))
                return EntryPoint(script, tuple(script_arguments(hyperparameters)), unpack_to)
        script = os.path.normpath(os.path.join(directory, program))
        if not os.path.isfile(script):
            raise ConfigError(
                f"HyperParameters.{PROGRAM_HYPERPARAMETER}",
                program,
                f"a script in the source directory {directory}",
            )
        return EntryPoint(script, tuple(script_arguments(hyperparameters)), directory)
    if XGBOOST_IMAGE in str(specification.get("TrainingImage", "")):
        from trainprobe.jobs.processes import xgboost_algorithm  # imports nothing of XGBoost's

        return EntryPoint(os.path.abspath(xgboost_algorithm.__file__), (), cwd)
    raise ConfigError(
        "AlgorithmSpecification",
        algorithm_specification,
        "an entry point: the HyperParameters sagemaker_program (and sagemaker_submit_directory), "
        "as the SageMaker SDK's framework estimators send them, or "
        'AlgorithmSpecification.ContainerEntrypoint, e.g. ["train.py"], or the TrainingImage of '
        "SageMaker's XGBoost algorithm (sagemaker-xgboost:<version>)",
    )

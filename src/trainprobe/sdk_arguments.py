"""The SageMaker Python SDK's estimator arguments that mean nothing on one machine.

``Estimator(role=..., instance_type="ml.p3.2xlarge", volume_size=30, subnets=[...])`` is how
SageMaker notebooks build an estimator; trainprobe accepts every argument the SDK's estimators
accept (SDK 2.257, ``EstimatorBase``, ``Estimator`` and ``PyTorch``), keeps each as an attribute
of the estimator of the same name, and says once per process, at INFO, which ones it ignores.
A name the SDK does not know is a TypeError, as Python raises it, with the closest SDK name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from trainprobe.config.errors import closest

__all__ = ["IGNORED", "accept_sdk_arguments"]

log = logging.getLogger("trainprobe")

IGNORED = {
    "role": "there is no IAM role to assume",
    "keep_alive_period_in_seconds": "there is no warm pool",
    "volume_size": "the job writes to this machine's disk",
    "volume_kms_key": "nothing is encrypted with KMS",
    "input_mode": "channels are local directories, read as files",
    "output_kms_key": "nothing is encrypted with KMS",
    "sagemaker_session": "the job runs through trainprobe's own session",
    "tags": "there is nothing to tag",
    "subnets": "there is no VPC",
    "security_group_ids": "there is no VPC",
    "model_uri": "no model is downloaded",
    "model_channel_name": "no model is downloaded",
    "metric_definitions": "there is no SageMaker Metrics; losses are saved tensors",
    "encrypt_inter_container_traffic": "the workers run on one machine",
    "use_spot_instances": "there are no instances",
    "max_wait": "there are no spot instances to wait for",
    "checkpoint_s3_uri": "checkpoints stay where the script writes them",
    "checkpoint_local_path": "checkpoints stay where the script writes them",
    "enable_sagemaker_metrics": "there is no SageMaker Metrics",
    "enable_network_isolation": "the job runs on this machine's network",
    "max_retry_attempts": "a failed job is not retried",
    "git_config": "the script is read from source_dir",
    "container_log_level": "the training's output is shown as it is",
    "code_location": "the script is not uploaded",
    "dependencies": "the script runs in this Python environment",
    "instance_groups": "there are no instances",
    "training_repository_access_mode": "there is no image",
    "training_repository_credentials_provider_arn": "there is no image",
    "enable_infra_check": "there are no instances to check",
    "container_entry_point": "the entry point is the script",
    "container_arguments": "the entry point is the script",
    "disable_output_compression": "outputs are not compressed",
    "enable_remote_debug": "the job runs on this machine",
    "enable_session_tag_chaining": "there is no session to tag",
    "training_plan": "there is no capacity to reserve",
    "instance_placement_config": "there are no instances",
    "image_uri": "the script runs in this Python environment, not in an image",
    "framework_version": "the installed PyTorch is used",
    "py_version": "this Python is used",
    "compiler_config": "there is no Training Compiler",
    "training_recipe": "there are no recipes",
    "recipe_overrides": "there are no recipes",
    "experiment_config": "there is no SageMaker Experiments (fit's argument)",
}
"""Each SDK argument that changes nothing here, and why."""

_said: set[str] = set()


def accept_sdk_arguments(owner: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The SDK arguments ``given`` to ``owner`` (a class name), checked and logged once."""
    for name, value in given.items():
        if name not in IGNORED:
            suggestion = closest(name, IGNORED)
            hint = f"; did you mean {suggestion!r}?" if suggestion else ""
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}{hint}")
        if value is not None and name not in _said:
            _said.add(name)
            log.info(
                "trainprobe: %s(%s=...) is accepted and ignored: %s", owner, name, IGNORED[name]
            )
    return dict(given)
